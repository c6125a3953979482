"""The memory a step's forward keeps for its backward: BNS-GCN's Eq. 4 measured rather than
modelled. For a GraphSAGE layer the paper counts ``(3 n_in + n_bd) d`` saved values per
partition (every input row, inner and boundary, and the inner rows' aggregates), which is what
boundary-node sampling shrinks (Fig. 6); here every dense tensor autograd saves during the
forward is counted once (by storage), parameters excluded. Sparse operators (the graph
structure) are not counted, as Eq. 4 does not count them.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch
from torch.autograd.graph import saved_tensors_hooks


class SavedActivations(saved_tensors_hooks):
    """A context over a forward pass; ``nbytes`` is then the bytes of the distinct dense,
    non-parameter storages autograd saved for the backward."""

    def __init__(self, parameters: Iterable[torch.Tensor]) -> None:
        self.skip = {p.untyped_storage().data_ptr() for p in parameters}
        self.storages: dict[int, int] = {}
        super().__init__(self._pack, lambda t: t)

    def __enter__(self) -> "SavedActivations":
        super().__enter__()
        return self

    def _pack(self, t: torch.Tensor) -> torch.Tensor:
        if t.layout == torch.strided:
            storage = t.untyped_storage()
            if storage.data_ptr() not in self.skip:
                self.storages[storage.data_ptr()] = storage.nbytes()
        return t

    @property
    def nbytes(self) -> int:
        return sum(self.storages.values())
