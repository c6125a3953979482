"""Sparse aggregation ``A @ X`` with an explicit transpose for the backward pass.

``A`` is a CSR matrix of shape ``[rows, cols]`` (targets x sources). The forward pass is one
CSR SpMM; the backward pass is ``A^T @ dY`` with ``A^T`` precomputed once as CSR, so neither
direction scatters per edge. This is what makes full-graph epochs cheap on CPU.
"""

from __future__ import annotations

import warnings

import torch

warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta state")
warnings.filterwarnings("ignore", message="Sparse invariant checks are implicitly disabled")

class SparseOperator:
    """A fixed sparse matrix ``A`` and its transpose, both CSR."""

    def __init__(self, row: torch.Tensor, col: torch.Tensor, value: torch.Tensor,
                 shape: tuple[int, int]) -> None:
        self.shape = shape
        self.matrix = _csr(row, col, value, shape)
        self.transpose = _csr(col, row, value, (shape[1], shape[0]))

    def __matmul__(self, x: torch.Tensor) -> torch.Tensor:
        return _SpMM.apply(x, self)


def _csr(row: torch.Tensor, col: torch.Tensor, value: torch.Tensor, shape: tuple[int, int]) -> torch.Tensor:
    order = torch.argsort(row * shape[1] + col)
    row, col, value = row[order], col[order], value[order]
    crow = torch.zeros(shape[0] + 1, dtype=torch.long, device=row.device)
    crow[1:] = torch.cumsum(torch.bincount(row, minlength=shape[0]), 0)
    return torch.sparse_csr_tensor(crow, col, value, shape, check_invariants=False)


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
