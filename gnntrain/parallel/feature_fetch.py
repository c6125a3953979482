"""Node data partitioned over ranks, and fetching the rows a rank needs from their owners.

Rank ``r`` stores the rows (features, labels) of the nodes ``owner[v] == r``, in global id
order: the inner rows of its :class:`~gnntrain.data.local_graph.LocalGraph`. :meth:`FeatureStore.stage`
is collective (every rank of the communicator calls it, with its own ids, possibly none): it
asks the owners of the given remote ids for their rows, in three all-to-alls: how many ids for
each peer and the ids themselves (``fetch_ids``, control), then the rows (under the caller's
kind, e.g. ``feat_fetch``), so the data bytes a rank is charged are exactly its answers: row
width x element size per id asked.

Reading rows. Each table is one buffer: the owned rows, then a tail where the rows staged from
peers arrive (the all-to-all receives into it). A dense slot map gives every owned or staged
node its row, so :meth:`FeatureStore.read` serves any mix of owned and staged ids in one
gather, each row copied once, and :meth:`FeatureStore.fetch` (stage, then read) costs a
mini-batch system no more. Staged rows stay readable until the next :meth:`~FeatureStore.stage`
of the same table.
"""

from __future__ import annotations

import torch

from gnntrain.comm.communicator import Communicator


class FeatureStore:
    def __init__(self, owner: torch.Tensor, tables: dict[str, torch.Tensor], comm: Communicator) -> None:
        """``owner``: the rank of every node; ``tables``: name -> the owned nodes' rows."""
        self.comm = comm
        self.owner = owner.to(comm.device)
        owned = (self.owner == comm.rank).nonzero().view(-1)
        self.owned = owned.numel()
        self.buffers = {name: rows[:self.owned] for name, rows in tables.items()}
        """Per table: the owned rows, then the staged rows (room kept for the largest staging so far)."""
        row_of = torch.full_like(self.owner, -1)
        row_of[owned] = torch.arange(self.owned, device=comm.device)
        self.slot_of = {name: row_of.clone() for name in tables}
        """Per table: each node's row in the buffer (-1: neither owned nor staged)."""
        self.staged = {name: owned[:0] for name in tables}

    def is_remote(self, ids: torch.Tensor) -> torch.Tensor:
        return self.owner[ids] != self.comm.rank

    def read(self, ids: torch.Tensor, table: str) -> torch.Tensor:
        """The ``table`` rows of ``ids``, each owned or staged (no communication)."""
        slots = self.slot_of[table][ids]
        if ids.numel() and int(slots.min()) < 0:
            raise KeyError(f"rows of {int((slots < 0).sum())} nodes are neither owned by rank {self.comm.rank} "
                           f"nor staged in table {table!r}")
        return self.buffers[table].index_select(0, slots)

    def _tail(self, table: str, count: int) -> torch.Tensor:
        """The buffer's first ``count`` rows after the owned ones, grown if there is less room."""
        buffer = self.buffers[table]
        if buffer.shape[0] < self.owned + count:
            grown = buffer.new_empty((self.owned + count,) + tuple(buffer.shape[1:]))
            grown[:self.owned] = buffer[:self.owned]
            self.buffers[table] = buffer = grown
        return buffer[self.owned: self.owned + count]

    def stage(self, ids: torch.Tensor, table: str, kind: str) -> None:
        """Fetch the ``table`` rows of the remote ones of ``ids`` (distinct global ids) into the
        table's tail, replacing those staged before (collective)."""
        slots = self.slot_of[table]
        slots[self.staged[table]] = -1
        asked = ids[self.is_remote(ids)]
        owners = self.owner[asked]
        order = torch.argsort(owners, stable=True)
        asked = asked[order]
        world = self.comm.world_size
        ask_counts = torch.bincount(owners, minlength=world)
        answer_counts = self.comm.all_to_all_start(ask_counts, [1] * world, [1] * world, "fetch_ids").wait()
        ask_splits, answer_splits = ask_counts.tolist(), answer_counts.tolist()
        wanted = self.comm.all_to_all_start(asked, ask_splits, answer_splits, "fetch_ids").wait()
        answers = self.buffers[table].index_select(0, slots[wanted])
        tail = self._tail(table, asked.numel())
        self.comm.all_to_all_start(answers, answer_splits, ask_splits, kind, into=tail).wait()
        slots[asked] = self.owned + torch.arange(asked.numel(), device=self.comm.device)
        self.staged[table] = asked

    def fetch(self, ids: torch.Tensor, table: str, kind: str) -> torch.Tensor:
        """The ``table`` rows of the distinct global ids ``ids`` (collective)."""
        self.stage(ids, table, kind)
        return self.read(ids, table)
