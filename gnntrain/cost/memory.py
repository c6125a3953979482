"""The peak memory of a rank of a graph-parallel job, estimated before any is spent: the
arithmetic the launcher's check (:mod:`gnntrain.job.memory`) and the predictor share.

A rank holds its part (the part file's tensors, :func:`~gnntrain.data.partition.carve_part`),
the halo rows of the input features, the aggregation matrices it builds from its in-edges, and,
during a step, the activations the forward keeps for the backward and the backward's
gradients. Per rank, with ``I`` inner and ``H`` halo nodes, ``E`` in-edges of inner nodes, ``F``
features and ``s`` bytes per value of the training dtype:

* ``runtime``: the interpreter, torch and gnntrain, before any data (:data:`RUNTIME_MB`, by how
  the rank's process starts);
* ``features``: ``(I + H) F s``, the inner rows and the halo rows of the input;
* ``graph``: :data:`BYTES_PER_EDGE` per in-edge (the part's edge lists, the CSR orders, indices
  and values of a matrix and its transpose, and what sorting them takes) and 28 bytes per
  local node (ids, degrees);
* ``activations``: what the model's forward keeps for the backward, measured: the model runs
  on small probe graphs under :class:`~gnntrain.parallel.activation_memory.SavedActivations`
  and the saved bytes are fitted as ``a I + b H + c E`` (:func:`saved_bytes_per_row`), then
  doubled for the backward's gradients of the same rows (:data:`BACKWARD_FACTOR`);
* ``method``: what the strategy keeps beyond its family's baseline (vanilla), as its
  registration states it (:attr:`~gnntrain.strategies.registry.Method.memory`, given the rank's
  :class:`RankShape`): PipeGCN its exchanges in flight across the epoch, BNS-GCN its sampled
  graph beside the full one;
* ``shared``: where spawned ranks carve their parts from the launcher's whole graph (no part
  files), the whole graph as shared memory each of them maps and reads (``E`` edges at 16 bytes
  and every node's features): in each rank's resident peak, held once for all of them. Missing,
  the estimate was 0.72-0.76 of the measured peak at 200k nodes of degree 50 (BNS-GCN,
  GraphSAGE-64, 4 workers); with it 0.98.

The launcher sums the estimates of the ranks of this machine, less what they share or map from
their part files, and stops a job whose sum exceeds the memory available here before any worker
starts (:func:`gnntrain.job.memory.check_fits`); the predictor reads the same arithmetic. ``summary.json``
holds the largest rank's estimate as ``estimated_peak_mem_mb`` beside the measured
``peak_mem_mb``; ``make scale`` compares them on every step of its ladder (docs/testing.md).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, replace
from functools import partial
from typing import Callable

import torch

from gnntrain.config.schema import ModelConfig, RootConfig
from gnntrain.config.typed import plain
from gnntrain.data.graph_data import GraphFacts
from gnntrain.cost.rank_shape import RankShape
from gnntrain.data.local_graph import LocalGraph
from gnntrain.models import build_model
from gnntrain.parallel.activation_memory import SavedActivations

RUNTIME_MB = {"forked": 350.0, "started": 360.0}
"""A worker's resident memory before its data: Python, torch, gnntrain. ``forked``: a spawned
job's worker, forked from the fork server that imported them (:mod:`gnntrain.job.launch.fork_server`;
measured on this project's CPU workers at 277-279 MiB under torch 2.4-2.6; under torch 2.13 the
peaks of ``make predict-check``'s small-graph runs came out 66-82 MiB above the estimate made with
that figure, so 70 more); ``started``: a process that imports them
itself (torchrun's or submitit's ranks; 325-395 MiB). SciPy, which AdaQP's adaptive bit
assignment imports when it first solves, adds about 40 MiB to either."""
BYTES_PER_EDGE = 100.0
"""Resident bytes per in-edge of a rank's part: 16 of edge lists, 16 of CSR orders, 16 of CSR
indices and 8 of values for a matrix and its transpose, and the sort that orders them (a
64-bit key and the sort's output and indices, 24 more, while it runs), plus the allocator's
slack."""
SHARED_RUNTIME_MB = 100.0
"""The part of :data:`RUNTIME_MB` mapped from files (the libraries' code and data), shared by the
ranks of a machine: ``RssFile`` of a process that imported torch, PyG and gnntrain measured 102
of its 388 MiB here."""
BYTES_PER_NODE = 28.0
"""Bytes per local node besides its features: global id (8), in-degree count (8) and its
floating copy (4), and the row pointers of both matrices (8)."""
BACKWARD_FACTOR = 2.0
"""The saved activations and, at the backward's peak, gradients of about the same rows."""

DTYPE_BYTES = {"float32": 4, "float64": 8, "bfloat16": 2}
PARTITION_BYTES_PER_EDGE = 128.0
"""Resident bytes per directed edge while the launcher partitions the whole graph (its edge
lists, METIS's symmetrised CSR, its coarser graphs and the sorts that build them), beside its
features and runtime. Measured: 127 on a synthetic graph of 2M nodes, 117.5M directed edges,
32 features and homophily 0.8 (14.52 GiB); 90 at ogbn-products' size and homophily 0.97
(``make scale``, 11.63 GiB). The larger, so a refusal errs on the side of room (products'
partition is over-estimated by 38%)."""
WHOLE_GRAPH_BYTES_PER_EDGE = 16.0
"""The launcher's whole graph while its ranks run: the ``edge_index`` (two int64 per edge),
beside the features (the ranks carve their parts from it)."""


def whole_graph_mb(nodes: int, edges: int, features: int, dtype: str) -> float:
    """What the launcher holds of a graph while its ranks run (:data:`WHOLE_GRAPH_BYTES_PER_EDGE`), MiB."""
    return (nodes * features * DTYPE_BYTES[dtype] + WHOLE_GRAPH_BYTES_PER_EDGE * edges) / 2**20


def floor_mb(model: ModelConfig, nodes: int, edges: int, features: int, classes: int, dtype: str) -> float:
    """Less than any job of these sizes needs, computed without allocating anything: the whole
    graph (:func:`whole_graph_mb`), the model's weights with their gradients and Adam's two
    moments (a lower bound on the weights: one ``hidden x hidden`` map per hidden layer), and
    the logits of every node, which training or evaluation computes over the ranks."""
    hidden = model.hidden
    weights = features * hidden + (model.layers - 1) * hidden * hidden + hidden * classes
    return whole_graph_mb(nodes, edges, features, dtype) + (4 * weights + nodes * classes) * DTYPE_BYTES[dtype] / 2**20


def partition_peak_mb(nodes: int, edges: int, features: int, dtype: str) -> float:
    """The launcher's estimated peak while it partitions a graph of ``nodes`` nodes, ``edges``
    directed edges and ``features`` input features (:data:`PARTITION_BYTES_PER_EDGE`), MiB."""
    return RUNTIME_MB["started"] + (nodes * features * DTYPE_BYTES[dtype] + PARTITION_BYTES_PER_EDGE * edges) / 2**20


@dataclass(frozen=True)
class MemoryEstimate:
    """One rank's estimated peak, in MiB, by part (module docstring)."""

    runtime_mb: float
    features_mb: float
    graph_mb: float
    activations_mb: float
    method_mb: float = 0.0
    shared_mb: float = 0.0
    """The launcher's whole graph, in shared memory, as far as a rank that carves its part from
    it maps and reads it (:func:`whole_graph_mb`): counted in the rank's resident peak, held once
    for all ranks (:func:`check_fits`)."""

    @property
    def total_mb(self) -> float:
        return (self.runtime_mb + self.features_mb + self.graph_mb + self.activations_mb + self.method_mb
                + self.shared_mb)

    def to_dict(self) -> dict:
        return {**asdict(self), "total_mb": self.total_mb}

    def describe(self) -> str:
        shared = f", shared whole graph {self.shared_mb / 1024:.2f}" if self.shared_mb else ""
        return (f"{self.total_mb / 1024:.2f} GiB (features {self.features_mb / 1024:.2f}, graph "
                f"{self.graph_mb / 1024:.2f}, activations {self.activations_mb / 1024:.2f}, method "
                f"{self.method_mb / 1024:.2f}, runtime {self.runtime_mb / 1024:.2f}{shared})")


def probe_graph(inner: int, halo: int, edges: int, features: int) -> LocalGraph:
    """A local graph of ``inner`` inner and ``halo`` halo nodes with ``edges`` random in-edges."""
    gen = torch.Generator().manual_seed(0)
    local = inner + halo
    return LocalGraph(
        rank=0, world_size=2, num_inner=inner, num_halo=halo, global_ids=torch.arange(local),
        in_degree=torch.full((local,), max(edges // inner, 1), dtype=torch.float32),
        edge_src=torch.randint(0, local, (edges,), generator=gen), edge_dst=torch.randint(0, inner, (edges,), generator=gen),
        recv_splits=[0, halo], send_index=torch.zeros(0, dtype=torch.long), send_splits=[0, 0],
        x=torch.randn(inner, features, generator=gen), y=torch.zeros(inner, dtype=torch.long),
        train_mask=torch.ones(inner, dtype=torch.bool), val_mask=torch.zeros(inner, dtype=torch.bool),
        test_mask=torch.zeros(inner, dtype=torch.bool))


def _saved_bytes(model: torch.nn.Module, graph: LocalGraph) -> int:
    def halo(h: torch.Tensor, layer: int) -> torch.Tensor:
        return torch.randn(graph.num_halo, h.shape[1], requires_grad=h.requires_grad)

    model.train()
    with SavedActivations(model.parameters()) as saved:
        model(graph.x, graph, halo)
    return saved.nbytes


_FITS: dict[tuple[str, int, int], tuple[tuple[float, float, float], tuple[int, ...]]] = {}
"""Fits made in this process, by model section (as JSON), features and classes."""


def _fitted(config: ModelConfig, features: int, classes: int) -> tuple[tuple[float, float, float], tuple[int, ...]]:
    """The saved bytes per inner row, halo row and in-edge (fitted), and the layers' input widths;
    fitted once per model section, features and classes."""
    key = (json.dumps(plain(config), sort_keys=True), features, classes)
    if key not in _FITS:
        _FITS[key] = _fit(build_model(config, features, classes), features)
    return _FITS[key]


def _fit(model: torch.nn.Module, features: int) -> tuple[tuple[float, float, float], tuple[int, ...]]:
    """The fit of :func:`_fitted` on ``model``'s probe graphs."""
    base = (512, 256, 4096)
    at = _saved_bytes(model, probe_graph(*base, features))
    per = []
    for k in range(3):
        grown = list(base)
        grown[k] *= 2
        per.append((_saved_bytes(model, probe_graph(*grown, features)) - at) / base[k])
    return (per[0], per[1], per[2]), tuple(model.input_widths)


def saved_bytes_per_row(model: ModelConfig, features: int, classes: int) -> tuple[float, float, float]:
    """Bytes the model's training forward keeps for its backward per inner row, per halo row
    and per in-edge, in float32, fitted on probe graphs (module docstring)."""
    return _fitted(model, features, classes)[0]


def estimate_rank(model: ModelConfig, kept_beyond: Callable[[RankShape], float] | None, dtype: str, facts: GraphFacts,
                  inner: int, halo: int, sent: int, edges: int, runtime_mb: float) -> MemoryEstimate:
    """The estimated peak of a rank with ``inner`` and ``halo`` nodes, ``sent`` rows sent per
    exchange and ``edges`` in-edges, whose method keeps ``kept_beyond(shape)`` bytes beyond its
    family's baseline (None: nothing), on a runtime of ``runtime_mb``."""
    size = DTYPE_BYTES[dtype]
    (per_inner, per_halo, per_edge), widths = _fitted(model, facts.num_features, facts.num_classes)
    activations = BACKWARD_FACTOR * (per_inner * inner + per_halo * halo + per_edge * edges) * size / 4
    shape = RankShape(inner, halo, sent, edges, widths, size)
    return MemoryEstimate(
        runtime_mb=runtime_mb,
        features_mb=(inner + halo) * facts.num_features * size / 2**20,
        graph_mb=(BYTES_PER_EDGE * edges + BYTES_PER_NODE * (inner + halo)) / 2**20,
        activations_mb=activations / 2**20,
        method_mb=0.0 if kept_beyond is None else kept_beyond(shape) / 2**20)


def estimate_ranks(run: RootConfig, facts: GraphFacts, stats: dict, kept_beyond: Callable | None,
                   forked: bool = True, carving: bool = False) -> list[MemoryEstimate]:
    """Every rank's estimate for a graph-parallel partition's ``stats``
    (:func:`~gnntrain.data.partition.partition_stats`; a partitioned dataset written before they
    counted each part's in-edges and sent rows spreads the edges by inner nodes and takes the
    rows sent for the rows received); ``forked``: the ranks are forked from the fork server, not
    started on their own (:data:`RUNTIME_MB`); ``kept_beyond(config, shape)``: the bytes the
    method keeps beyond its family's baseline (its :attr:`~gnntrain.strategies.registry.Method.memory`)."""
    inner, halo = stats["inner_nodes"], stats["boundary_nodes"]
    edges = stats.get("inner_edges") or [facts.num_edges * count // max(facts.num_nodes, 1) for count in inner]
    sent = stats.get("sent_rows") or halo
    kept_beyond = None if kept_beyond is None else partial(kept_beyond, run.strategy)
    dtype = str(run.train.dtype)
    runtime = RUNTIME_MB["forked" if forked else "started"]
    shared = whole_graph_mb(facts.num_nodes, facts.num_edges, facts.num_features, dtype) if carving else 0.0
    return [replace(estimate_rank(run.model, kept_beyond, dtype, facts, i, h, s, e, runtime), shared_mb=shared)
            for i, h, s, e in zip(inner, halo, sent, edges)]
