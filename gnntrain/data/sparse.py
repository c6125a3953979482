"""Sparse aggregation ``A @ X`` with an explicit transpose for the backward pass.

``A`` is a CSR matrix of shape ``[rows, cols]`` (targets x sources). The forward pass is one
CSR SpMM; the backward pass is ``A^T @ dY`` with ``A^T`` precomputed once as CSR, so neither
direction scatters per edge. This is what makes full-graph epochs cheap on CPU.

Building a CSR matrix sorts its entries (:func:`csr_orders`). For an operator on a subset of
another's entries (a sampled graph's, each epoch), :func:`subset_orders` filters the other's
orders in linear time instead of sorting again.

:func:`weighted_sum` is the same product for per-entry weights that are themselves computed
(attention): ``out[:, k] = A_k @ X[:, k]`` for each of ``K`` channels, whose entries' gradient
``dL/dA_k[i, j] = dY[i, k] . X[j, k]`` is a sampled dense-dense product at the entries only
(``torch.sparse.sampled_addmm``), so no ``[entries, features]`` tensor is ever formed.

cuSPARSE's products sum in an order that changes from run to run, and torch's deterministic mode
neither replaces nor refuses them; under that mode on a GPU (``cluster.deterministic``,
:func:`repeatable_on`) both products gather the entries' rows and sum them with ``index_add_``
or ``sum``, in a fixed order, at the memory of one ``[entries, features]`` tensor.
"""

from __future__ import annotations

import warnings

import torch

warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta state")
warnings.filterwarnings("ignore", message="Sparse invariant checks are implicitly disabled")

Orders = tuple[torch.Tensor, torch.Tensor]


def csr_orders(row: torch.Tensor, col: torch.Tensor, shape: tuple[int, int]) -> Orders:
    """The row-major order of the entries at ``(row, col)`` in ``A`` and in ``A^T``."""
    return torch.argsort(row * shape[1] + col), torch.argsort(col * shape[0] + row)


def subset_orders(orders: Orders, keep: torch.Tensor) -> Orders:
    """The orders of the entries in the mask ``keep``, numbered ``0..kept-1`` in their original
    order, given the orders of all entries. Valid when the subset's rows and columns are
    renumbered without changing their order (as dropping rows or columns does)."""
    position = torch.cumsum(keep, 0) - 1
    return position[orders[0].masked_select(keep[orders[0]])], position[orders[1].masked_select(keep[orders[1]])]


class SparsePattern:
    """Where the entries of a ``[rows, cols]`` matrix lie (at ``(row, col)``, in a given entry
    order): the CSR indices of ``A`` and of ``A^T``; ``orders`` (:func:`csr_orders`) are sorted
    out here unless given. Matrices on it take one value per entry, in entry order."""

    def __init__(self, row: torch.Tensor, col: torch.Tensor, shape: tuple[int, int],
                 orders: Orders | None = None) -> None:
        self.shape = shape
        self.order, self.transpose_order = csr_orders(row, col, shape) if orders is None else orders
        self._indices = (_crow(row, shape[0]), col[self.order])
        self._transpose_indices = (_crow(col, shape[1]), row[self.transpose_order])

    def matrix(self, value: torch.Tensor) -> torch.Tensor:
        """``A`` as CSR, ``value`` in entry order."""
        return self.matrices(value.unsqueeze(1))[0]

    def transpose(self, value: torch.Tensor) -> torch.Tensor:
        """``A^T`` as CSR, ``value`` in entry order."""
        return self.transposes(value.unsqueeze(1))[0]

    def matrices(self, values: torch.Tensor) -> list[torch.Tensor]:
        """``A_k`` as CSR for each column ``k`` of ``values`` (``[entries, K]``, entry order)."""
        return _per_column(self._indices, self.order, values, self.shape)

    def transposes(self, values: torch.Tensor) -> list[torch.Tensor]:
        """``A_k^T`` as CSR for each column ``k`` of ``values`` (``[entries, K]``, entry order)."""
        return _per_column(self._transpose_indices, self.transpose_order, values, (self.shape[1], self.shape[0]))


def _per_column(indices: tuple[torch.Tensor, torch.Tensor], order: torch.Tensor, values: torch.Tensor,
                shape: tuple[int, int]) -> list[torch.Tensor]:
    """One CSR matrix per column of ``values``, its values put in CSR ``order`` by one gather of
    whole rows (where a gather per column would read ``values`` with a stride)."""
    columns = values.index_select(0, order).t().contiguous()
    return [torch.sparse_csr_tensor(*indices, column, shape, check_invariants=False) for column in columns]


class SparseOperator:
    """A fixed sparse matrix ``A`` (entries ``value`` at ``(row, col)``) and its transpose, both
    CSR; ``orders`` (:func:`csr_orders`) are sorted out here unless given."""

    def __init__(self, row: torch.Tensor, col: torch.Tensor, value: torch.Tensor, shape: tuple[int, int],
                 orders: Orders | None = None) -> None:
        self.shape = shape
        pattern = SparsePattern(row, col, shape, orders)
        self.matrix = pattern.matrix(value)
        self.transpose = pattern.transpose(value)

    def __matmul__(self, x: torch.Tensor) -> torch.Tensor:
        return _SpMM.apply(x, self)


def weighted_sum(pattern: SparsePattern, weights: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """``out[i, k] = sum_{entries e = (i, j)} weights[e, k] x[j, k]``: ``weights`` ``[entries, K]``
    in entry order, ``x`` ``[cols, K, C]`` -> ``[rows, K, C]``; differentiable in both."""
    return _WeightedSum.apply(weights, x, pattern)


def _crow(row: torch.Tensor, rows: int) -> torch.Tensor:
    crow = torch.zeros(rows + 1, dtype=torch.long, device=row.device)
    crow[1:] = torch.cumsum(torch.bincount(row, minlength=rows), 0)
    return crow


class _SpMM(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor, op: SparseOperator) -> torch.Tensor:  # type: ignore[override]
        ctx.op = op
        return spmm(op.matrix, x)

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> tuple[torch.Tensor, None]:  # type: ignore[override]
        return spmm(ctx.op.transpose, grad), None


class _WeightedSum(torch.autograd.Function):
    @staticmethod
    def forward(ctx, weights: torch.Tensor, x: torch.Tensor, pattern: SparsePattern) -> torch.Tensor:  # type: ignore[override]
        ctx.save_for_backward(weights, x)
        ctx.pattern = pattern
        out = x.new_empty(pattern.shape[0], *x.shape[1:])
        for k, matrix in enumerate(pattern.matrices(weights)):
            out[:, k] = spmm(matrix, x[:, k])
        return out

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> tuple[torch.Tensor | None, torch.Tensor | None, None]:  # type: ignore[override]
        weights, x = ctx.saved_tensors
        pattern: SparsePattern = ctx.pattern
        grad_weights = grad_x = None
        if ctx.needs_input_grad[1]:
            grad_x = x.new_empty(x.shape)
            for k, transpose in enumerate(pattern.transposes(weights)):
                grad_x[:, k] = spmm(transpose, grad[:, k])
        if ctx.needs_input_grad[0]:
            grad_weights = weights.new_empty(weights.shape)
            if weights.shape[0]:
                grad_weights.index_copy_(0, pattern.order, _sampled_products(pattern, grad, x))
        return grad_weights, grad_x, None


def _sampled_products(pattern: SparsePattern, grad: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """``grad[i, k] . x[j, k]`` at each entry ``(i, j)`` of ``pattern``, in CSR order, ``[entries, K]``:
    cuSPARSE's sampled product (``torch.sparse.sampled_addmm``), or under deterministic kernels on
    a GPU (:func:`repeatable_on`) the entries' rows gathered and multiplied, one
    ``[entries, K, C]`` tensor, whose sums run in one fixed order."""
    if repeatable_on(x):
        row, col = _entry_rows(pattern._indices[0]), pattern._indices[1]
        return (grad.index_select(0, row) * x.index_select(0, col)).sum(-1)
    at_entries = pattern.matrix(grad.new_zeros(pattern.order.numel()))
    return torch.stack([torch.sparse.sampled_addmm(at_entries, grad[:, k].contiguous(), x[:, k].t(), beta=0.0).values()
                        for k in range(x.shape[1])], dim=1)


ROW_KERNEL_MIN_COLUMNS = 64
"""The width from which :func:`spmm` runs torch's row kernel on the CPU. Measured on a 2-core
machine (100k x 100k, 2.2M entries, interleaved): the row kernel takes 1.7-1.9x the general
kernel's time at 8-32 columns, 0.94x at 64 and 0.67x at 128 (where the dense rows, 51 MB,
exceed the 32 MB cache)."""


def spmm(matrix: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """``matrix @ x`` for a CSR ``matrix`` (no autograd), empty shapes included.

    On the CPU, ``x`` of :data:`ROW_KERNEL_MIN_COLUMNS` columns or more goes to torch's
    row-parallel CSR kernel (``torch.sparse.mm(..., reduce="sum")``, which PyG's ``adj_t`` path
    runs for its mean, min and max aggregations): it sums each output row over its entries in
    column order. Narrower ``x`` (and every ``x`` on a GPU: cuSPARSE) goes to the general sparse
    product. Both sum the same entries; only the rounding of the sums' order may differ. Under
    deterministic kernels on a GPU (:func:`repeatable_on`) the product is ``index_add_`` of the
    weighted source rows instead: one ``[entries, columns]`` tensor, summed in a fixed order."""
    if matrix.shape[0] == 0 or matrix.shape[1] == 0:
        return x.new_zeros(matrix.shape[0], x.shape[1])
    if repeatable_on(x):
        entries = matrix.values().unsqueeze(1) * x.index_select(0, matrix.col_indices())
        return x.new_zeros(matrix.shape[0], x.shape[1]).index_add_(0, _entry_rows(matrix.crow_indices()), entries)
    if x.device.type == "cpu" and x.shape[1] >= ROW_KERNEL_MIN_COLUMNS:
        return torch.sparse.mm(matrix, x.contiguous(), "sum")
    return torch.sparse.mm(matrix, x.contiguous())


def repeatable_on(x: torch.Tensor) -> bool:
    """Whether products with ``x`` must give the same bits every run: deterministic kernels are on
    (``cluster.deterministic``) and ``x`` is on a GPU. On an H100, ten runs of one CSR product
    (and of one sampled product) gave ten different results, and deterministic training runs
    differed in their losses' last bits (``tests/test_cuda.py``); torch's ``index_add_`` is
    deterministic in that mode."""
    return x.device.type == "cuda" and torch.are_deterministic_algorithms_enabled()


def _entry_rows(crow: torch.Tensor) -> torch.Tensor:
    """The row of each entry of a CSR matrix, in CSR order, from its row offsets."""
    return torch.repeat_interleave(torch.arange(crow.numel() - 1, device=crow.device), crow.diff())
