"""Per-edge operations of layers whose messages are not a fixed linear map of the source row
(attention, softmax aggregation, feature-wise modulation).

Edges are given by their local target ids ``dst`` (inner nodes, ``0 <= dst < num_targets``);
values are ``[E, k]`` tensors, one row per edge.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def edge_sum(values: torch.Tensor, dst: torch.Tensor, num_targets: int) -> torch.Tensor:
    """``out_i = sum_{e: dst_e = i} values_e``."""
    return values.new_zeros((num_targets,) + tuple(values.shape[1:])).index_add_(0, dst, values)


def edge_softmax(scores: torch.Tensor, dst: torch.Tensor, num_targets: int,
                 negative_slope: float | None = None) -> torch.Tensor:
    """``alpha_e = exp(s_e) / sum_{e': dst_e' = dst_e} exp(s_e')`` per column, of ``s = scores``
    or, with ``negative_slope``, of ``s = LeakyReLU(scores)`` (GAT's attention scores); computed
    after subtracting each target's maximum (a constant per softmax group, so only stability
    changes).

    The backward keeps ``alpha`` alone (and, with the LeakyReLU, one byte per score saying
    whether it was positive): ``dL/ds_e = alpha_e (g_e - sum_{e' in e's group} alpha_e' g_e')``
    with ``g = dL/dalpha``, times the LeakyReLU's slope at ``scores_e``. Composed from autograd's
    own ops, the same function would keep ``s``, ``exp(s - max)`` and the gathered denominators
    as well: three more values per score."""
    return _EdgeSoftmax.apply(scores, dst, num_targets, negative_slope)


class _EdgeSoftmax(torch.autograd.Function):
    @staticmethod
    def forward(ctx, scores: torch.Tensor, dst: torch.Tensor, num_targets: int,  # type: ignore[override]
                negative_slope: float | None) -> torch.Tensor:
        positive = None
        if negative_slope is not None:
            positive = scores > 0
            scores = F.leaky_relu(scores, negative_slope)
        index = dst.view(-1, *([1] * (scores.dim() - 1))).expand_as(scores)
        peak = scores.new_full((num_targets,) + tuple(scores.shape[1:]), float("-inf"))
        peak = peak.scatter_reduce_(0, index, scores, "amax")
        alpha = (scores - peak.index_select(0, dst)).exp_()
        alpha = alpha.div_(edge_sum(alpha, dst, num_targets).index_select(0, dst))
        ctx.save_for_backward(alpha, dst, positive)
        ctx.num_targets, ctx.negative_slope = num_targets, negative_slope
        return alpha

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> tuple[torch.Tensor, None, None, None]:  # type: ignore[override]
        alpha, dst, positive = ctx.saved_tensors
        weighted = alpha * grad
        grad_scores = weighted.sub_(alpha * edge_sum(weighted, dst, ctx.num_targets).index_select(0, dst))
        if positive is not None:
            grad_scores = torch.where(positive, grad_scores, grad_scores * ctx.negative_slope)
        return grad_scores, None, None, None
