"""Normalisation after hidden layers (``model.norm``): ``none``, ``layer`` or ``batch``.

``layer`` is per-node LayerNorm (what PipeGCN, BNS-GCN and AdaQP use); it needs nothing from
other ranks. ``batch`` is batch normalisation over *all* nodes of the graph, wherever they
live: in training, ``mean = sum_r sum_i h_i / N`` and ``var = sum_r sum_i (h_i - mean)^2 / N``
with both sums taken over ranks by ``all_sum`` (a differentiable cross-rank sum, so the
backward pass also sees the whole graph), which makes a distributed run equal a
single-process one. It has the parameters, buffers and update rule of ``torch.nn.BatchNorm1d``
(biased variance to normalise, unbiased for the running estimate, momentum 0.1); in
evaluation it uses the running estimates and communicates nothing.
"""

from __future__ import annotations

from typing import Callable

import torch
from torch import nn

NORMS = ("none", "layer", "batch")

AllSum = Callable[[torch.Tensor], torch.Tensor]
"""Sum of a tensor over all ranks, differentiable."""


def local_sum(t: torch.Tensor) -> torch.Tensor:
    """The cross-rank sum of a single process."""
    return t


class BatchNorm(nn.Module):
    def __init__(self, width: int, all_sum: AllSum = local_sum, eps: float = 1e-5, momentum: float = 0.1) -> None:
        super().__init__()
        self.all_sum, self.eps, self.momentum = all_sum, eps, momentum
        self.weight = nn.Parameter(torch.ones(width))
        self.bias = nn.Parameter(torch.zeros(width))
        self.register_buffer("running_mean", torch.zeros(width))
        self.register_buffer("running_var", torch.ones(width))
        self.register_buffer("num_batches_tracked", torch.tensor(0, dtype=torch.long))

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        if not self.training:
            return (h - self.running_mean) * (self.running_var + self.eps).rsqrt() * self.weight + self.bias
        sums = self.all_sum(torch.cat([h.sum(0), h.new_full((1,), h.shape[0])]))
        n = sums[-1].detach()
        centered = h - sums[:-1] / n
        var = self.all_sum((centered * centered).sum(0)) / n
        with torch.no_grad():
            self.running_mean.lerp_(sums[:-1] / n, self.momentum)
            self.running_var.lerp_(var * n / (n - 1).clamp(min=1), self.momentum)
            self.num_batches_tracked += 1
        return centered * (var + self.eps).rsqrt() * self.weight + self.bias


def make_norm(kind: str, width: int, all_sum: AllSum = local_sum) -> nn.Module:
    if kind == "layer":
        return nn.LayerNorm(width)
    if kind == "batch":
        return BatchNorm(width, all_sum)
    if kind == "none":
        return nn.Identity()
    raise ValueError(f"unknown model.norm {kind!r}; valid: {', '.join(NORMS)}")
