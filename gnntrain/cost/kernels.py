"""What a training step asks of a device, counted by kernel class, without timing anything.

A step is counted under a :class:`~torch.utils._python_dispatch.TorchDispatchMode`, which sees
every ATen operation the forward, the backward and the optimizer run, and files each into one
class, the classes a device profile prices (:mod:`gnntrain.cost.profile`):

* ``dense`` — matrix products (``mm``, ``addmm``, ``bmm``, ``baddbmm``): ``2 m n k`` flops, filed
  by the product's narrowest dimension (:data:`WIDTHS`);
* ``sparse`` — products with a sparse CSR operand (the aggregations of :mod:`gnntrain.data.sparse`):
  the operand's nonzeros times the dense operand's columns; ``sampled_addmm`` (attention's
  gradient at the entries): the nonzeros times the length of the dot product at each; filed by
  that width;
* ``indexed_bytes`` — operations that read or write rows at indices (``index_select``,
  ``index_add``, ``gather``, the scatters, :data:`INDEXED`) and copies of strided tensors: the
  bytes of their inputs and outputs, which they move at random places;
* ``bytes`` — every other operation: the bytes of its tensor inputs and outputs (an element-wise
  pass, a reduction moves about that much memory, in order);
* ``ops`` — every operation once: its launch and dispatch cost, which dominates small graphs.

Views and metadata operations move nothing and are not counted. A model's counts grow linearly
with a rank's inner rows ``I``, halo rows ``H`` and in-edges ``E`` (each layer's work is a sum of
per-row, per-edge and fixed parts) as long as the rows keep their proportions (a layer chooses
the cheaper order of its product by comparing its row counts), so :func:`step_counts` counts a
step on two probe graphs of the rank's proportions and extends the line through them to the
rank's size.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from gnntrain.config.schema import ModelConfig
from gnntrain.config.typed import plain

DENSE_PRODUCTS = {"mm", "addmm", "bmm", "baddbmm"}
INDEXED = {"index_select", "index_add", "index_copy", "index_put", "index", "gather", "scatter", "scatter_add",
           "scatter_reduce", "embedding", "embedding_dense_backward", "masked_select", "masked_scatter", "take"}
UNCOUNTED = {"view", "_unsafe_view", "t", "transpose", "expand", "as_strided", "permute", "unsqueeze", "squeeze",
             "detach", "alias", "slice", "select", "split", "split_with_sizes", "unbind", "_reshape_alias",
             "empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "lift_fresh",
             "sym_size", "sym_stride", "is_same_size", "_has_compatible_shallow_copy_type", "values", "crow_indices",
             "col_indices", "_nnz", "size", "stride"}
WIDTHS = (4, 16, 64, 256)
"""The width classes of products: a product's work is filed under the class nearest (in log scale)
its narrowest dimension (dense) or its dense operand's columns (sparse), because a narrow
product does less per second than a wide one."""


def width_class(width: int) -> int:
    """The index in :data:`WIDTHS` nearest ``width`` in log scale."""
    return min(range(len(WIDTHS)), key=lambda k: abs(math.log(max(width, 1) / WIDTHS[k])))


def _in_class(width: int, amount: float) -> tuple[float, ...]:
    return tuple(amount if k == width_class(width) else 0.0 for k in range(len(WIDTHS)))


@dataclass(frozen=True)
class KernelCounts:
    """Work by kernel class (module docstring); products by width class (:data:`WIDTHS`)."""

    ops: float = 0.0
    dense_flops: tuple[float, ...] = (0.0,) * len(WIDTHS)
    sparse_products: tuple[float, ...] = (0.0,) * len(WIDTHS)
    bytes: float = 0.0
    indexed_bytes: float = 0.0

    def __add__(self, other: KernelCounts) -> KernelCounts:
        return KernelCounts(self.ops + other.ops, tuple(map(sum, zip(self.dense_flops, other.dense_flops))),
                            tuple(map(sum, zip(self.sparse_products, other.sparse_products))), self.bytes + other.bytes,
                            self.indexed_bytes + other.indexed_bytes)

    def scaled(self, factor: float) -> KernelCounts:
        return KernelCounts(self.ops * factor, tuple(v * factor for v in self.dense_flops),
                            tuple(v * factor for v in self.sparse_products), self.bytes * factor,
                            self.indexed_bytes * factor)


def _tensors(values) -> list[torch.Tensor]:
    out = []
    for v in values:
        if isinstance(v, torch.Tensor):
            out.append(v)
        elif isinstance(v, (list, tuple)):
            out.extend(_tensors(v))
    return out


def _nbytes(t: torch.Tensor) -> int:
    if t.layout == torch.sparse_csr:
        return t._nnz() * (t.element_size() + 8)
    return t.numel() * t.element_size()


class _Counter(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.counts = KernelCounts()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        name = func._overloadpacket.__name__.rstrip("_")
        if name in UNCOUNTED:
            return out
        inputs, outputs = _tensors(args) + _tensors((kwargs or {}).values()), _tensors([out])
        sparse = [t for t in inputs if t.layout == torch.sparse_csr]
        if sparse:
            dense = [t for t in inputs if t.layout == torch.strided and t.dim() == 2] or [sparse[0]]
            columns = (dense[0] if name.endswith("sampled_addmm") else dense[-1]).shape[-1]
            self.counts += KernelCounts(ops=1, sparse_products=_in_class(columns, sparse[0]._nnz() * columns))
        elif name in DENSE_PRODUCTS:
            a, b = inputs[-2], inputs[-1]
            narrowest = min(a.shape[-2], a.shape[-1], b.shape[-1])
            self.counts += KernelCounts(ops=1, dense_flops=_in_class(narrowest, 2.0 * a.numel() * b.shape[-1]))
        else:
            moved = sum(_nbytes(t) for t in inputs + outputs)
            indexed = name in INDEXED or (name == "copy" and not all(t.is_contiguous() for t in inputs))
            self.counts += KernelCounts(ops=1, **{"indexed_bytes" if indexed else "bytes": moved})
        return out


def count(step) -> KernelCounts:
    """The kernel counts of calling ``step()``."""
    with _Counter() as counter:
        step()
    return counter.counts


PROBE_ROWS = 2048
"""Inner rows of the smaller of the two probes a count is scaled from."""


@dataclass(frozen=True)
class StepCounts:
    """A training step's counts: its forward, its backward with the optimizer's step, and what
    the first forward on a graph adds (its aggregation matrices built, sorted), which a method
    pays again for every graph it trains on once (a sample)."""

    forward: KernelCounts
    backward: KernelCounts
    build: KernelCounts

    def __add__(self, other: StepCounts) -> StepCounts:
        return StepCounts(self.forward + other.forward, self.backward + other.backward, self.build + other.build)

    def scaled(self, factor: float) -> StepCounts:
        return StepCounts(self.forward.scaled(factor), self.backward.scaled(factor), self.build.scaled(factor))


def _step_on(config: ModelConfig, features: int, classes: int, dtype: torch.dtype, inner: int, halo: int,
             edges: int) -> StepCounts:
    """One training step of the model on a probe graph as a graph-parallel rank takes it: forward
    with halo rows (as many rows gathered to be sent as arrive, their gradients added back in the
    backward), the loss over half the inner rows (the training rows, picked), backward, the
    gradients flattened for their all-reduce and copied back, an Adam step."""
    from gnntrain.cost.memory import probe_graph
    from gnntrain.models import build_model

    torch.manual_seed(0)
    graph = probe_graph(inner, halo, edges, features)
    graph.x = graph.x.to(dtype)
    model = build_model(config, features, classes).to(dtype)
    model.train()
    optimizer = torch.optim.Adam(model.parameters())
    arrived: dict[int, torch.Tensor] = {}
    sent = torch.randint(0, inner, (halo,), generator=torch.Generator().manual_seed(1))
    rows = torch.arange(0, inner, 2)
    labels = graph.y[rows] % classes

    def halo_rows(h: torch.Tensor, layer: int) -> torch.Tensor:
        if layer not in arrived:
            arrived[layer] = torch.randn(halo, h.shape[1], dtype=h.dtype, requires_grad=h.requires_grad)
        return arrived[layer] + 0 * h[:inner].index_select(0, sent)

    loss: list[torch.Tensor] = []

    def forward() -> None:
        out = model(graph.x, graph, halo_rows)
        loss.append(-torch.nn.functional.log_softmax(out[rows], dim=-1).gather(1, labels.unsqueeze(1)).sum())

    def backward() -> None:
        loss.pop().backward()
        params = [p for p in model.parameters() if p.grad is not None]
        flat = torch.cat([p.grad.reshape(-1) for p in params])
        for p, g in zip(params, flat.split([p.numel() for p in params])):
            p.grad.copy_(g.view_as(p))
        optimizer.step()
        optimizer.zero_grad(set_to_none=False)

    cold = count(forward)  # the first forward builds the graph's matrices, which the later ones reuse
    backward()
    warm = count(forward)
    return StepCounts(warm, count(backward), cold + warm.scaled(-1.0))


RAY_STEPS = 8
"""Steps per doubling of the rays a rank's proportions are rounded to (each within 4.4%)."""
_LINES: dict[tuple, tuple[StepCounts, StepCounts]] = {}
"""Per model section (as JSON), features, classes, dtype and ray: the counts at
:data:`PROBE_ROWS` inner rows and their growth per inner row."""


def on_ray(ratio: float) -> float:
    """``ratio`` rounded to the nearest of :data:`RAY_STEPS` steps per doubling (0 stays 0)."""
    return 0.0 if ratio <= 0 else 2.0 ** (round(math.log2(ratio) * RAY_STEPS) / RAY_STEPS)


def model_key(config: ModelConfig) -> str:
    """A model section as the key of its counts (computed once per section by a caller that
    counts often: :class:`gnntrain.cost.compute.Costs`)."""
    return json.dumps(plain(config), sort_keys=True)


def step_counts(config: ModelConfig, features: int, classes: int, dtype: str, inner: float, halo: float,
                edges: float, key: str | None = None) -> StepCounts:
    """The counts of one training step of the model ``config`` on a rank of ``inner`` rows,
    ``halo`` rows and ``edges`` in-edges (module docstring): the line through two probes of the
    rank's proportions (rounded, :func:`on_ray`), of :data:`PROBE_ROWS` and twice as many inner
    rows, at ``inner``. One pair of probes serves every rank and sample of like proportions;
    ``key``: :func:`model_key` of ``config``, where the caller has it."""
    ray = (on_ray(halo / inner), on_ray(edges / inner))
    line = (key or model_key(config), features, classes, dtype, ray)
    if line not in _LINES:
        value = getattr(torch, dtype)
        shape = lambda rows: (rows, round(ray[0] * rows), max(round(ray[1] * rows), 1))  # noqa: E731
        small = _step_on(config, features, classes, value, *shape(PROBE_ROWS))
        large = _step_on(config, features, classes, value, *shape(2 * PROBE_ROWS))
        _LINES[line] = small, (large + small.scaled(-1.0)).scaled(1.0 / PROBE_ROWS)
    small, per_row = _LINES[line]
    return small + per_row.scaled(inner - PROBE_ROWS)
