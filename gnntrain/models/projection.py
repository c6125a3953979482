"""Running a model on the projections of its input rows instead of the rows themselves.

Every model reads its raw input features ``x`` only through linear maps (GCN, GAT: the first
layer's ``lin``; SAGE: ``lin_l`` and ``lin_r``; FiLM: ``lin``, ``film``, ``lin_skip``,
``film_skip``; GCNII and DeepGCN: ``lin_in``): the model's *input maps*. So the rows
``x @ W^T`` of the input maps' stacked weights ``W`` (``H`` columns, the *projection width*)
carry all the model needs of ``x``, and they can be computed where ``x`` lies:

* P3 (Gandhi & Iyer, OSDI '21) splits ``x`` by columns: rank ``r`` computes the partial sums
  ``x[:, c_r] @ W[:, c_r]^T`` and the owner of the mini-batch adds them up;
* HopGNN's Naive baseline (Sec. 3.2) splits ``x`` by rows: each rank projects the rows it owns
  when the model visits it.

:class:`Projected` stands for such input rows: a layer applies an input map to it with
:func:`project`, which reads the precomputed columns (adding the map's bias, if asked) where
``linear(h)`` would compute them; row indexing works as on a tensor; dropout leaves it alone
(it is applied to the raw rows before projecting). The gradient of ``W`` is
``grad(P)^T @ x``, which the method computes where ``x`` lies (:func:`weight_gradient`).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class Projected:
    """Input rows known by their projections: ``columns[m]`` is ``x @ m.weight^T`` for each
    input map ``m`` (no bias)."""

    def __init__(self, columns: dict[nn.Linear, torch.Tensor]) -> None:
        self.columns = columns

    def __getitem__(self, index) -> Projected:
        return Projected({m: t[index] for m, t in self.columns.items()})

    def __len__(self) -> int:
        return len(next(iter(self.columns.values())))


def project(linear: nn.Linear, h: torch.Tensor | Projected, bias: bool | torch.Tensor = True) -> torch.Tensor:
    """``linear(h)`` (``bias=False``: without its bias; a tensor: with that bias instead, added
    in the same kernel), read from the projections where ``h`` is :class:`Projected`."""
    added = linear.bias if bias is True else None if bias is False else bias
    if isinstance(h, Projected):
        out = h.columns[linear]
        return out if added is None else out + added
    return F.linear(h, linear.weight, added)


def stacked_weight(maps: list[nn.Linear]) -> torch.Tensor:
    """``W``: the input maps' weights stacked (``H x F``)."""
    return torch.cat([m.weight for m in maps])


def projection_width(maps: list[nn.Linear]) -> int:
    return sum(m.out_features for m in maps)


def split(maps: list[nn.Linear], rows: torch.Tensor) -> Projected:
    """The :class:`Projected` of the stacked projections ``rows`` (``n x H``)."""
    return Projected(dict(zip(maps, rows.split([m.out_features for m in maps], dim=1))))


@torch.no_grad()
def weight_gradient(maps: list[nn.Linear], grad: torch.Tensor, x: torch.Tensor,
                    columns: slice = slice(None)) -> None:
    """Add ``grad^T @ x`` to the ``columns`` of the input maps' weight gradients (``grad``: the
    gradient of the stacked projections of the rows ``x``, whose columns are ``columns`` of
    the input)."""
    dw = grad.t() @ x
    for m, part in zip(maps, dw.split([m.out_features for m in maps])):
        m.weight.grad[:, columns] += part
