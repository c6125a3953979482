"""Node data partitioned over ranks, and fetching the rows a rank needs from their owners.

Rank ``r`` stores the rows (features, labels) of the nodes ``owner[v] == r``, in global id
order: the inner rows of its :class:`~gnntrain.graph.LocalGraph`. :meth:`FeatureStore.fetch`
is collective (every rank of the communicator calls it, with its own ids, possibly none): it
returns the rows of the given global ids, reading owned rows in place and asking the owners of
the others, in three all-to-alls: how many ids for each peer and the ids themselves
(``fetch_ids``, control), then the rows (under the caller's kind, e.g. ``feat_fetch``), so the
data bytes a rank is charged are exactly its answers: row width x element size per id asked.
"""

from __future__ import annotations

import torch

from gnntrain.comm.communicator import Communicator


class FeatureStore:
    def __init__(self, owner: torch.Tensor, tables: dict[str, torch.Tensor], comm: Communicator) -> None:
        """``owner``: the rank of every node; ``tables``: name -> the owned nodes' rows."""
        self.comm, self.tables = comm, tables
        self.owner = owner.to(comm.device)
        owned = (self.owner == comm.rank).nonzero().view(-1)
        self.row_of = torch.full_like(self.owner, -1)
        self.row_of[owned] = torch.arange(owned.numel(), device=comm.device)

    def is_remote(self, ids: torch.Tensor) -> torch.Tensor:
        return self.owner[ids] != self.comm.rank

    def local(self, ids: torch.Tensor, table: str) -> torch.Tensor:
        """The ``table`` rows of ``ids``, all owned by this rank (no communication)."""
        return self.tables[table][self.row_of[ids]]

    def _owned_read(self, ids: torch.Tensor, table: str) -> tuple[torch.Tensor, torch.Tensor]:
        """A buffer for the ``table`` rows of ``ids`` with the owned ones read in, and the mask of the others."""
        source = self.tables[table]
        rows = source.new_empty((ids.numel(),) + tuple(source.shape[1:]))
        remote = self.is_remote(ids)
        rows[~remote] = source[self.row_of[ids[~remote]]]
        return rows, remote

    def assemble(self, ids: torch.Tensor, table: str, fetched_ids: torch.Tensor, fetched: torch.Tensor) -> torch.Tensor:
        """The ``table`` rows of ``ids`` with no communication: owned rows read in place, the others
        looked up in rows fetched earlier (``fetched``: the rows of the sorted ids ``fetched_ids``)."""
        rows, remote = self._owned_read(ids, table)
        rows[remote] = fetched[torch.searchsorted(fetched_ids, ids[remote])]
        return rows

    def fetch(self, ids: torch.Tensor, table: str, kind: str) -> torch.Tensor:
        """The ``table`` rows of the global ids ``ids`` (collective)."""
        source = self.tables[table]
        rows, remote = self._owned_read(ids, table)
        position = remote.nonzero().view(-1)
        owners = self.owner[ids[position]]
        order = torch.argsort(owners, stable=True)
        position, asked = position[order], ids[position[order]]
        world = self.comm.world_size
        ask_counts = torch.bincount(owners, minlength=world)
        answer_counts = self.comm.all_to_all_start(ask_counts, [1] * world, [1] * world, "fetch_ids").wait()
        ask_splits, answer_splits = ask_counts.tolist(), answer_counts.tolist()
        wanted = self.comm.all_to_all_start(asked, ask_splits, answer_splits, "fetch_ids").wait()
        answers = source[self.row_of[wanted]]
        rows[position] = self.comm.all_to_all_start(answers, answer_splits, ask_splits, kind).wait()
        return rows
