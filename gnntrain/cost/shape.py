"""What the predictor knows of a partitioned graph: per rank its inner rows, halo rows, in-edges
and training nodes, and the rows each rank sends each other rank in one halo exchange.

From the real graph: the dataset and the METIS partition a run of the same overrides would use
(:func:`gnntrain.data.job.prepare_job_data`, cached as a run caches it). For a graph too big to
hold here (given by its statistics, ``gnntrain-predict --nodes --edges ...``): a
*proxy* (:func:`proxy_shape`), the synthetic generator (:mod:`gnntrain.data.synthetic`) at
``proxy_nodes`` nodes with the graph's average degree, feature and class counts and the dataset's
homophily and degree exponent, partitioned by METIS into the same parts; every count of rows is
then scaled by the node ratio, every count of edges by the edge ratio.
That keeps each part's shares (halo rows per inner row, cut edges per edge) as the proxy has
them, which holds where METIS cuts the same share of a bigger graph of the same kind: the error
this leaves is measured against the products-size step of ``make scale`` (``results/scale.json``)
by ``scripts/predict_check.py`` and published with it (docs/usage.md).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import torch

from gnntrain.config.schema import RootConfig
from gnntrain.data.graph_data import GraphData, GraphFacts
from gnntrain.data.job import prepare_job_data
from gnntrain.data.partition import narrow_owners

DEGREE_TOLERANCE = 0.02


@dataclass(frozen=True)
class PartitionShape:
    """A partitioned graph as the predictor sees it (module docstring)."""

    nodes: int
    edges: int
    """Directed edges (in-edges of all nodes)."""
    features: int
    classes: int
    inner: tuple[float, ...]
    halo: tuple[float, ...]
    in_edges: tuple[float, ...]
    """In-edges of each part's inner nodes."""
    train: tuple[float, ...]
    rows: tuple[tuple[float, ...], ...]
    """``rows[q][r]``: rows part ``q`` sends part ``r`` in one halo exchange (its inner rows that
    ``r`` reads)."""
    readers: tuple[tuple[tuple[tuple[int, float], ...], ...], ...]
    """``readers[q][r]``: ``(c, rows)`` pairs: how many of those rows have ``c`` edges into ``r``
    (an edge sampler keeps a row that any of its kept edges reads)."""
    scale: float = 1.0
    """The proxy's node ratio (1: counted on the graph itself)."""
    data: GraphData | None = field(default=None, compare=False, repr=False)
    """The graph counted (the proxy's for a proxy), for methods that sample it."""
    part: torch.Tensor | None = field(default=None, compare=False, repr=False)
    """Its partition."""

    @property
    def parts(self) -> int:
        return len(self.inner)

    def scaled(self, rows: float, edges: float, nodes: int, total_edges: int) -> PartitionShape:
        """A graph of ``nodes`` nodes and ``total_edges`` edges in the same shares: every count of
        rows times ``rows``, of edges times ``edges``."""
        times = lambda values, factor: tuple(v * factor for v in values)  # noqa: E731
        return replace(self, nodes=nodes, edges=total_edges, inner=times(self.inner, rows),
                       halo=times(self.halo, rows), in_edges=times(self.in_edges, edges), train=times(self.train, rows),
                       rows=tuple(times(row, rows) for row in self.rows),
                       readers=tuple(tuple(tuple((c, n * rows) for c, n in pair) for pair in row)
                                     for row in self.readers),
                       scale=self.scale * rows)

    def facts(self) -> GraphFacts:
        """The graph's facts as a memory estimate reads them (:func:`~gnntrain.cost.memory.estimate_ranks`)."""
        return GraphFacts(name="predicted", num_nodes=self.nodes, num_edges=self.edges, num_features=self.features,
                          num_classes=self.classes, multilabel=False, num_train=round(sum(self.train)))

    def stats(self) -> dict:
        """Each part's counts as a partition's stats give them (:func:`~gnntrain.data.partition.partition_stats`)."""
        return {"inner_nodes": [round(v) for v in self.inner], "boundary_nodes": [round(v) for v in self.halo],
                "inner_edges": [round(v) for v in self.in_edges], "sent_rows": [round(sum(row)) for row in self.rows]}

    def cut_edges(self, reader: int) -> float:
        """In-edges of ``reader``'s inner rows from other parts' rows."""
        return sum(c * n for row in self.readers for c, n in row[reader])

    def kept_rows(self, sender: int, reader: int, keep: float) -> float:
        """Rows ``sender`` sends ``reader`` when each cut edge is kept with probability ``keep``, in
        expectation: a row is sent where one of its edges is kept."""
        return sum(n * (1.0 - (1.0 - keep) ** c) for c, n in self.readers[sender][reader])


def shape_of(data: GraphData, part: torch.Tensor, parts: int) -> PartitionShape:
    """The shape of ``data`` cut by ``part`` into ``parts`` parts."""
    n = data.num_nodes
    src, dst = data.edge_index
    owner = narrow_owners(part, parts)
    cut = owner[src] != owner[dst]
    halo_pairs, multiplicity = torch.unique(owner[dst[cut]].long() * n + src[cut], return_counts=True)
    reader, row = halo_pairs // n, halo_pairs % n
    sender = owner[row].long()
    rows = torch.zeros(parts, parts, dtype=torch.long)
    rows.index_put_((sender, reader), torch.ones_like(reader), accumulate=True)
    most = int(multiplicity.max()) + 1 if multiplicity.numel() else 1
    triples, counts = torch.unique((sender * parts + reader) * most + multiplicity, return_counts=True)
    readers = [[[] for _ in range(parts)] for _ in range(parts)]
    for triple, rows_with in zip(triples.tolist(), counts.tolist()):
        pair, c = divmod(triple, most)
        readers[pair // parts][pair % parts].append((c, float(rows_with)))
    as_floats = lambda t: tuple(float(v) for v in t.tolist())  # noqa: E731
    return PartitionShape(
        nodes=n, edges=int(src.numel()), features=data.num_features, classes=data.num_classes,
        inner=as_floats(torch.bincount(part, minlength=parts)),
        halo=as_floats(torch.bincount(reader, minlength=parts)),
        in_edges=as_floats(torch.zeros(parts, dtype=torch.long).index_add_(0, part, torch.bincount(dst, minlength=n))),
        train=as_floats(torch.bincount(part[data.train_mask], minlength=parts)),
        rows=tuple(as_floats(r) for r in rows),
        readers=tuple(tuple(tuple(pair) for pair in row) for row in readers), data=data, part=part)


def partition_shape(run: RootConfig, parts: int) -> PartitionShape:
    """The shape of the run's dataset in ``parts`` parts, partitioned as the run would be."""
    job = prepare_job_data(run, parts)
    return shape_of(job.data, job.part, parts)


def proxy_shape(run: RootConfig, parts: int, nodes: int, edges: int) -> PartitionShape:
    """The shape of a graph of ``nodes`` nodes and ``edges`` directed edges, from the run's
    synthetic dataset (the proxy, of fewer nodes) in ``parts`` parts, scaled (module docstring).
    The generator drops duplicate edges, more of them on a smaller graph, so a proxy whose degree
    falls more than :data:`DEGREE_TOLERANCE` short is drawn again at a degree corrected by the
    shortfall."""
    shape = partition_shape(run, parts)
    wanted, realised = edges / nodes, shape.edges / shape.nodes
    if abs(realised / wanted - 1) > DEGREE_TOLERANCE:
        corrected = replace(run.dataset, avg_degree=run.dataset.avg_degree * wanted / realised)
        shape = partition_shape(replace(run, dataset=corrected), parts)
    return shape.scaled(nodes / shape.nodes, edges / shape.edges, nodes, edges)
