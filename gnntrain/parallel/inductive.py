"""Scores of an inductive run (``dataset.inductive``): the model trains on the subgraph induced
by the training nodes and is scored on graphs it never saw, as the PipeGCN and BNS-GCN authors'
``evaluate_induc`` does: validation on the subgraph induced by the training and validation
nodes, test on the whole graph (their ``inductive_split``), each in one process (rank 0) with
the graph's own degrees. The other ranks add nothing to those counts, so the usual sum over
ranks gives the scores; training scores stay those of the distributed evaluation on the
training graph.

With ``model.precompute_first`` the model here aggregates its raw input itself: in evaluation
mode (no dropout) that is the same map as the precomputed one, as the authors' layer does.
"""

from __future__ import annotations

import torch

from gnntrain.data.graph_data import GraphData, induced_subgraph
from gnntrain.data.local_graph import build_local_graph
from gnntrain.models.gnn import MessagePassingModel, no_halo
from gnntrain.parallel.full_batch import score_counts


class WholeGraphScores:
    """Rank 0's validation and test counts of an inductive run, in the layout of
    :func:`~gnntrain.parallel.full_batch.score_counts` over (train, val, test) with the training
    pair zero."""

    def __init__(self, whole: GraphData, dtype: torch.dtype, device: torch.device, multilabel: bool) -> None:
        seen = induced_subgraph(whole, whole.train_mask | whole.val_mask)
        self.graphs = {split: build_local_graph(graph, torch.zeros(graph.num_nodes, dtype=torch.long), 0, 1,
                                                dtype).to(device)
                       for split, graph in (("val", seen), ("test", whole))}
        self.multilabel = multilabel

    @torch.no_grad()
    def counts(self, model: MessagePassingModel) -> torch.Tensor:
        model.eval()
        counts = []
        for split, graph in self.graphs.items():
            out = model(graph.x, graph, no_halo)
            y = graph.y.to(out.dtype) if self.multilabel else graph.y
            counts.append(score_counts(out, y, [getattr(graph, f"{split}_mask")], self.multilabel))
        return torch.cat([torch.zeros_like(counts[0]), *counts])
