"""Per-edge operations of layers whose messages are not a fixed linear map of the source row
(attention, softmax aggregation, feature-wise modulation).

Edges are given by their local target ids ``dst`` (inner nodes, ``0 <= dst < num_targets``);
values are ``[E, k]`` tensors, one row per edge.
"""

from __future__ import annotations

import torch


def edge_sum(values: torch.Tensor, dst: torch.Tensor, num_targets: int) -> torch.Tensor:
    """``out_i = sum_{e: dst_e = i} values_e``."""
    return values.new_zeros((num_targets,) + tuple(values.shape[1:])).index_add_(0, dst, values)


def edge_softmax(scores: torch.Tensor, dst: torch.Tensor, num_targets: int) -> torch.Tensor:
    """``alpha_e = exp(s_e) / sum_{e': dst_e' = dst_e} exp(s_e')`` per column, computed after
    subtracting each target's maximum (a constant per softmax group, so only stability
    changes)."""
    index = dst.view(-1, *([1] * (scores.dim() - 1))).expand_as(scores)
    peak = scores.detach().new_full((num_targets,) + tuple(scores.shape[1:]), float("-inf"))
    peak = peak.scatter_reduce_(0, index, scores.detach(), "amax")
    w = (scores - peak[dst]).exp()
    return w / edge_sum(w, dst, num_targets)[dst]
