"""The arrays a dataset source gives, checked before they become a :class:`GraphData`: a bad
array is one line naming the dataset, the array and what is wrong with it (exit 2, before any
worker starts), not a traceback from deep in the partitioner or a run that trains on NaN.

Every source (PyG, OGB, a user's file) passes through :func:`check_arrays`:

* ``x``: ``[N, F]``, every value finite;
* ``edge_index``: ``[2, E]`` of integer node ids in ``0..N-1``;
* ``y``: ``[N]`` integer class ids, ``-1`` for an unlabeled node (multilabel: ``[N, C]`` of 0/1);
  where the source does not state the number of classes it is the largest id + 1, and every id
  below it must label some node (a stray id such as 99 among classes 0..4 would otherwise make
  95 empty classes);
* masks: ``[N]`` or ``[N, splits]``, boolean or 0/1;

and :func:`check_split` asks the split for at least one training node.
"""

from __future__ import annotations

from typing import Any

import torch

from gnntrain.errors import GnntrainError


class BadDataset(GnntrainError):
    """A dataset's arrays are not a graph gnntrain can train on."""


def check_arrays(name: str, data: Any, multilabel: bool, num_classes: int | None) -> None:
    """Refuse, in one line, arrays of ``data`` (``x``, ``edge_index``, ``y``, optional masks)
    that break the rules of the module docstring."""
    def bad(what: str) -> BadDataset:
        return BadDataset(f"dataset '{name}': {what}")

    x, edge_index, y = data.x, data.edge_index, data.y
    if not isinstance(x, torch.Tensor) or x.dim() != 2:
        raise bad(f"x has shape {_shape(x)}; valid: [N, F] node features")
    n = x.shape[0]
    if not bool(torch.isfinite(x.float()).all()):
        raise bad(f"x holds {int((~torch.isfinite(x.float())).sum())} values that are NaN or infinite; valid: finite "
                  "features")
    if not isinstance(edge_index, torch.Tensor) or edge_index.dim() != 2 or edge_index.shape[0] != 2:
        raise bad(f"edge_index has shape {_shape(edge_index)}; valid: [2, E] (sources, then targets)")
    if edge_index.is_floating_point() or edge_index.dtype == torch.bool:
        raise bad(f"edge_index is {edge_index.dtype}; valid: integer node ids")
    if edge_index.numel() and (int(edge_index.min()) < 0 or int(edge_index.max()) >= n):
        raise bad(f"edge_index holds node ids {int(edge_index.min())}..{int(edge_index.max())}; valid: 0..{n - 1} "
                  f"(x has {n} rows)")
    _check_labels(bad, y, n, multilabel, num_classes)
    for key in ("train_mask", "val_mask", "test_mask"):
        mask = getattr(data, key, None)
        if mask is None:
            continue
        if not isinstance(mask, torch.Tensor) or mask.dim() not in (1, 2) or mask.shape[0] != n:
            raise bad(f"{key} has shape {_shape(mask)}; valid: [{n}] or [{n}, splits], one entry per node")
        if mask.dtype != torch.bool and not bool(((mask == 0) | (mask == 1)).all()):
            raise bad(f"{key} holds values other than 0 and 1; valid: booleans")


def _check_labels(bad: Any, y: Any, n: int, multilabel: bool, num_classes: int | None) -> None:
    if multilabel:
        if not isinstance(y, torch.Tensor) or y.dim() != 2 or y.shape[0] != n:
            raise bad(f"y has shape {_shape(y)}; valid with dataset.multilabel=true: [{n}, C] of 0/1")
        if not bool(((y == 0) | (y == 1)).all()):
            raise bad("y holds values other than 0 and 1; valid with dataset.multilabel=true: 0/1 per label")
        return
    if not isinstance(y, torch.Tensor) or y.numel() != n or (y.dim() == 2 and y.shape[1] != 1) or y.dim() > 2:
        raise bad(f"y has shape {_shape(y)}; valid: [{n}] class ids, one per node")
    if y.is_floating_point() or y.dtype == torch.bool:
        raise bad(f"y is {y.dtype}; valid: integer class ids (-1: unlabeled)")
    labels = y.view(-1)
    low, high = int(labels.min()), int(labels.max())
    classes = num_classes if num_classes is not None else high + 1
    if low < -1 or high >= classes:
        raise bad(f"y holds class ids {low}..{high}; valid: 0..{classes - 1}, or -1 for an unlabeled node")
    if high < 1:
        raise bad(f"y holds {'no labeled node' if high < 0 else 'one class only'}; valid: at least 2 classes")
    if num_classes is None:
        used = torch.bincount(labels[labels >= 0], minlength=classes) > 0
        if not bool(used.all()):
            empty = [str(c) for c in torch.nonzero(~used).view(-1)[:5].tolist()]
            raise bad(f"y holds class ids 0..{high} but no node has class {', '.join(empty)}"
                      f"{' ...' if int((~used).sum()) > 5 else ''}; valid: class ids 0..C-1, each labeling some node")


def check_split(name: str, train_mask: torch.Tensor) -> None:
    """At least one training node."""
    if not bool(train_mask.any()):
        raise BadDataset(f"dataset '{name}': no labeled node is in the training split; valid: a train_mask with at "
                         "least one labeled node (or no masks: a random split of the labeled nodes)")


def _shape(value: Any) -> str:
    return str(list(value.shape)) if isinstance(value, torch.Tensor) else type(value).__name__
