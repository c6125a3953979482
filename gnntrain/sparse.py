"""Sparse aggregation ``A @ X`` with an explicit transpose for the backward pass.

``A`` is a CSR matrix of shape ``[rows, cols]`` (targets x sources). The forward pass is one
CSR SpMM; the backward pass is ``A^T @ dY`` with ``A^T`` precomputed once as CSR, so neither
direction scatters per edge. This is what makes full-graph epochs cheap on CPU.

Building a CSR matrix sorts its entries (:func:`csr_orders`). For an operator on a subset of
another's entries (a sampled graph's, each epoch), :func:`subset_orders` filters the other's
orders in linear time instead of sorting again.
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


class SparseOperator:
    """A fixed sparse matrix ``A`` (entries ``value`` at ``(row, col)``) and its transpose, both
    CSR; ``orders`` (:func:`csr_orders`) are sorted out here unless given."""

    def __init__(self, row: torch.Tensor, col: torch.Tensor, value: torch.Tensor, shape: tuple[int, int],
                 orders: Orders | None = None) -> None:
        self.shape = shape
        order, transpose_order = csr_orders(row, col, shape) if orders is None else orders
        self.matrix = _csr(row, col, value, shape, order)
        self.transpose = _csr(col, row, value, (shape[1], shape[0]), transpose_order)

    def __matmul__(self, x: torch.Tensor) -> torch.Tensor:
        return _SpMM.apply(x, self)


def _csr(row: torch.Tensor, col: torch.Tensor, value: torch.Tensor, shape: tuple[int, int],
         order: torch.Tensor) -> torch.Tensor:
    crow = torch.zeros(shape[0] + 1, dtype=torch.long, device=row.device)
    crow[1:] = torch.cumsum(torch.bincount(row, minlength=shape[0]), 0)
    return torch.sparse_csr_tensor(crow, col[order], value[order], shape, check_invariants=False)


class _SpMM(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor, op: SparseOperator) -> torch.Tensor:  # type: ignore[override]
        ctx.op = op
        if op.shape[0] == 0 or op.shape[1] == 0:
            return x.new_zeros(op.shape[0], x.shape[1])
        return torch.sparse.mm(op.matrix, x)

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> tuple[torch.Tensor, None]:  # type: ignore[override]
        op = ctx.op
        if op.shape[0] == 0 or op.shape[1] == 0:
            return grad.new_zeros(op.shape[1], grad.shape[1]), None
        return torch.sparse.mm(op.transpose, grad.contiguous()), None
