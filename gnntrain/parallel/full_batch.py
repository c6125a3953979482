"""Full-batch training of one model replica over a local graph: the step that graph
parallelism and data parallelism share.

One step on rank ``r``: forward over a local graph (a halo source supplies the rows owned
elsewhere; dropout keyed by the run's seed and the epoch, so every rank masks a node's row as
a single process would), loss summed over the rank's training rows and divided by the *global* number of
training nodes, backward (halo gradients flow back to their owners), one all-reduce (sum) of
the flattened gradients over the ranks that hold replicas of the parameters, optimizer step.
The per-rank losses are partial sums of the full-graph mean loss, so as long as every
training node's loss is computed on exactly one rank the summed gradients equal the
full-graph gradient, however the graph and the training nodes are split.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from gnntrain.comm.communicator import Communicator
from gnntrain.config.schema import RootConfig
from gnntrain.data.graph_data import GraphFacts
from gnntrain.data.local_graph import LocalGraph
from gnntrain.models import build_model
from gnntrain.models.decay import param_groups
from gnntrain.models.gnn import HaloSource, LinearPart, step_key
from gnntrain.parallel.activation_memory import SavedActivations
from gnntrain.timing.clock import phase

SPLITS = ("train", "val", "test")


def loss_share(out: torch.Tensor, y: torch.Tensor, rows: torch.Tensor | None, num_train: int,
               multilabel: bool) -> torch.Tensor:
    """The share of the full-graph mean training loss of the rows ``rows`` (indices; None: every
    row of ``out``): their summed cross-entropy (binary cross-entropy per label for multilabel
    data) over the global number of training nodes (times labels). The cross-entropy is the
    negative log-softmax at the label, picked with ``gather``: the value ``F.cross_entropy``
    computes, whose CUDA kernel has no deterministic variant (``cluster.deterministic``)."""
    if rows is not None:
        out, y = out[rows], y[rows]
    if multilabel:
        return F.binary_cross_entropy_with_logits(out, y, reduction="sum") / (num_train * y.shape[1])
    return -F.log_softmax(out, dim=-1).gather(1, y.unsqueeze(1)).sum() / num_train


def rows_of(mask: torch.Tensor) -> torch.Tensor:
    """The indices of a boolean mask's set rows (found once: indexing by a mask on a device
    reads its count back to the host every time)."""
    return mask.nonzero().view(-1)


EVAL_COUNTS = 4
"""Figures per split in :func:`score_counts`: the score's numerator and denominator, the summed
loss and the nodes."""


def score_counts(out: torch.Tensor, y: torch.Tensor, masks: list[torch.Tensor], multilabel: bool) -> torch.Tensor:
    """Per mask, :data:`EVAL_COUNTS` figures: (correct, total) for accuracy, or (2TP, 2TP+FP+FN)
    for F1-micro; then the loss summed over the mask's nodes (the training loss's function:
    cross-entropy, or binary cross-entropy averaged over the labels) and their number; float64."""
    counts = []
    for mask in masks:
        rows = out[mask]
        if multilabel:
            pred, true = rows > 0, y[mask] > 0.5
            tp = (pred & true).sum()
            counts += [2 * tp, 2 * tp + (pred & ~true).sum() + (~pred & true).sum()]
            loss = F.binary_cross_entropy_with_logits(rows, y[mask], reduction="sum") / max(1, y.shape[1])
        else:
            counts += [(rows.argmax(-1) == y[mask]).sum(), mask.sum()]
            loss = -F.log_softmax(rows, dim=-1).gather(1, y[mask].unsqueeze(1)).sum()
        counts += [loss, mask.sum()]
    return torch.stack([c.double() for c in counts])


def build_optimizer(model: torch.nn.Module, run: RootConfig,
                    only: list[torch.nn.Parameter] | None = None) -> torch.optim.Optimizer:
    """The ``train`` section's optimizer (Adam or SGD, ``lr``) over the model's parameters (those
    in ``only`` where given), each with its weight decay (:mod:`gnntrain.models.decay`)."""
    train = run.train
    opt_cls = torch.optim.Adam if train.optimizer == "adam" else torch.optim.SGD
    return opt_cls(param_groups(model, run.model.decay_groups, train.weight_decay, only), lr=train.lr)


def all_reduce_gradients(params: list[torch.nn.Parameter], comm: Communicator) -> None:
    """Sum the gradients of ``params`` over ``comm``'s ranks, in one flat all-reduce."""
    params = [p for p in params if p.requires_grad]
    flat = torch.cat([p.grad.reshape(-1) for p in params])
    comm.all_reduce(flat, "allreduce")
    offset = 0
    for p in params:
        p.grad.copy_(flat[offset: offset + p.numel()].view_as(p))
        offset += p.numel()


class FullBatchStep:
    """Model, optimizer and the loss share of one rank.

    ``facts``: the whole graph's sizes and training-node count; ``graph``: the rank's local
    graph; ``masks``: the rows of it whose loss (``train``) and scores (``val``, ``test``) this
    rank computes (default: the graph's own masks);
    ``stats``: the communicator over which cross-rank statistics (batch norm) are summed,
    i.e. the ranks that hold the parts of one graph; ``sync``: the one over which gradients
    are summed, i.e. every rank whose loss share the gradients must include.
    """

    def __init__(self, run: RootConfig, facts: GraphFacts, graph: LocalGraph, stats: Communicator,
                 sync: Communicator, masks: dict[str, torch.Tensor] | None = None) -> None:
        dtype = getattr(torch, run.train.dtype)
        self.graph, self.sync = graph, sync
        self.multilabel = facts.multilabel
        self.num_train = facts.num_train
        self.x = graph.x
        self.y = graph.y.to(dtype) if facts.multilabel else graph.y
        self.masks = masks if masks is not None else {k: getattr(graph, f"{k}_mask") for k in SPLITS}
        self.train_rows = rows_of(self.masks["train"])
        self.seed = run.seed
        torch.manual_seed(run.seed)
        self.model = build_model(run.model, facts.num_features, facts.num_classes,
                                 lambda t: stats.all_sum(t, "bn_stats")).to(graph.device, dtype)
        self.optimizer = build_optimizer(self.model, run)
        self.first_layer_halo: HaloSource | None = None
        """Set (to a synchronous exchange) to aggregate the first layer's input once
        (``model.precompute_first``): :meth:`model_input`."""
        self.first: torch.Tensor | None = None
        self.saved_for_backward = 0
        """Bytes the last training forward kept for its backward (:mod:`.activation_memory`)."""

    def state_dict(self) -> dict:
        return {"model": self.model.state_dict(), "optimizer": self.optimizer.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])

    def model_input(self) -> torch.Tensor | LinearPart:
        """The raw input rows; with :attr:`first_layer_halo` set (the authors' ``--use-pp``), the
        first layer's output less its bias, mapped from its input rows aggregated once: on the
        first call the input's halo rows arrive through ``first_layer_halo`` (recorded as
        ``precompute_halo_fwd``) and the layer aggregates them with the inner rows. Dropout then
        applies to the aggregated rows, as the authors' input dropout applies to their
        precomputed features, so this is a different model from the one without the option
        (which drops the raw rows before aggregating), equal to a single process's with it. The
        aggregated rows are not checkpointed: a resumed run exchanges the input's halo once more,
        in its first epoch."""
        if self.first_layer_halo is None:
            return self.x
        layer = self.model.summed_input_layer
        if self.first is None:
            with torch.no_grad(), self.sync.meter.tagged("precompute_"):
                x_halo = self.first_layer_halo(self.x, 0)
                self.first = layer.aggregated_inputs(torch.cat([self.x, x_halo]), self.graph)
        ids = self.graph.global_ids[: self.graph.num_inner]
        return LinearPart(layer.from_aggregated(self.model.drop_input(self.first, ids)))

    def local_loss(self, out: torch.Tensor) -> torch.Tensor:
        """This rank's share of the full-graph mean training loss."""
        return loss_share(out, self.y, self.train_rows, self.num_train, self.multilabel)

    def forward_backward(self, epoch: int, graph: LocalGraph, halo: HaloSource) -> torch.Tensor:
        """Epoch ``epoch``'s forward over ``graph`` (the local graph or a sample of it with the
        same inner nodes), loss and backward, without the gradient all-reduce; returns the
        local loss."""
        self.model.train()
        self.model.begin_step(step_key(self.seed, epoch))
        self.optimizer.zero_grad(set_to_none=False)
        with SavedActivations(self.model.parameters()) as saved:
            loss = self.local_loss(self.model(self.model_input(), graph, halo))
        self.saved_for_backward = saved.nbytes
        with phase("backward"):
            loss.backward()
        return loss.detach()

    def all_reduce_gradients(self) -> None:
        all_reduce_gradients(list(self.model.parameters()), self.sync)

    def train(self, epoch: int, graph: LocalGraph, halo: HaloSource) -> torch.Tensor:
        """Epoch ``epoch``'s step: forward, backward, gradient sum, optimizer step; returns the
        local loss."""
        loss = self.forward_backward(epoch, graph, halo)
        self.all_reduce_gradients()
        with phase("optimizer step"):
            self.optimizer.step()
        return loss

    @torch.no_grad()
    def local_outputs(self, halo: HaloSource, graph: LocalGraph | None = None) -> torch.Tensor:
        """Model outputs (logits) for the inner nodes of the rank's local graph (or of ``graph``, a
        graph it does not train on, from its raw rows), in evaluation mode; traffic recorded under
        ``eval_`` kinds."""
        self.model.eval()
        with self.sync.meter.tagged("eval_"):
            if graph is not None:
                return self.model(graph.x, graph, halo)
            return self.model(self.model_input(), self.graph, halo)

    def local_eval_counts(self, halo: HaloSource, graph: LocalGraph | None = None) -> torch.Tensor:
        """Per split: (correct, total) for accuracy, or (2TP, 2TP+FP+FN) for F1-micro; on the
        rank's local graph, or on ``graph`` with its own labels and masks."""
        if graph is None:
            y, masks = self.y, list(self.masks.values())
        else:
            y = graph.y.to(self.x.dtype) if self.multilabel else graph.y
            masks = [getattr(graph, f"{split}_mask") for split in SPLITS]
        return score_counts(self.local_outputs(halo, graph), y, masks, self.multilabel)
