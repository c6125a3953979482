"""One rank's side of the network model, the same in a live run (:mod:`gnntrain.timing.virtual_rank`)
and in replay (:mod:`gnntrain.timing.replay`): an operation is posted (its bytes reserved on
the rank's links, :class:`gnntrain.timing.links.LinkQueues`) and completes at the time
:mod:`gnntrain.timing.links` gives from its participants' stamps.

Operations have four shapes:

* ``exchange``: two-sided, an all-to-all or point-to-point messages sent and received together;
* ``send``: a one-sided send (a pipeline stage's activations, a migrating model), complete on
  the sender once it has left;
* ``recv``: the receive of one, complete when the message has arrived;
* ``ring``: an all-reduce.

A message is ``(world rank of the peer, payload bytes, key)``; its key is the meter's
(:meth:`gnntrain.comm.communicator.Communicator.keys_of`), the same on both ends, so a receiver
finds the sender's stamp under it (a collective's key, shared by all its messages, with the
sender's rank).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gnntrain.timing import links as link_model
from gnntrain.timing.cluster import Topology
from gnntrain.timing.links import LinkQueues, Stamp

Message = tuple[int, int, tuple]
SHAPES = ("exchange", "send", "recv", "ring")


@dataclass
class VirtualOp:
    """An operation as one rank posted it (virtual seconds)."""

    shape: str
    kind: str
    post: float
    sent: list[Message] = field(default_factory=list)
    received: list[Message] = field(default_factory=list)
    group: list[int] = field(default_factory=list)
    """A ring's world ranks."""
    key: tuple = ()
    """A ring's key."""
    nbytes: int = 0
    """A ring's payload."""
    egress: dict[str, float] = field(default_factory=dict)
    ingress: dict[str, float] = field(default_factory=dict)
    reserved: float = 0.0
    """A ring's reservation end on this rank."""
    keys: tuple = ()
    """The meter's keys of the operation (:meth:`gnntrain.comm.communicator.Communicator.keys_of`),
    the same on every rank taking part: where the accounting finds the other participants' posts."""
    counted: int = 0
    """The payload bytes the meter counted for it on this rank (an all-to-all's send buffer, its
    share to the rank itself included)."""
    depart: float | None = None
    """Where its messages leave: its post and the host's cost of sending them (None: at its post)."""

    @property
    def leaves(self) -> float:
        return self.post if self.depart is None else self.depart

    @property
    def collective(self) -> bool:
        """Whether it is a collective (every member's stamp gathered beside it), not point-to-point
        messages (each stamp travelling with its message)."""
        return any(key[1] < 0 for key in self.keys)

    def stamp(self) -> Stamp:
        return link_model.stamp(self.leaves, self.egress) if self.shape != "ring" else (self.post, (self.reserved,))

    def stamp_sources(self) -> list[tuple[tuple, int]]:
        """Where this rank finds the stamps its completion needs: per message received (a ring:
        per member), the key it was sent under and its sender."""
        if self.shape == "ring":
            return [(self.key, q) for q in self.group]
        return [(key, peer) for peer, _, key in self.received]


class RankLinks:
    """One rank's links: posts and completes its operations."""

    def __init__(self, topology: Topology, rank: int) -> None:
        self.topology, self.rank = topology, rank
        self.queues = LinkQueues(topology)

    def posted(self, op: VirtualOp) -> VirtualOp:
        """Reserve ``op``'s bytes from its post: a receive reserves when it learns its sender's
        post (:meth:`complete`)."""
        if op.shape == "ring":
            level = self.topology.ring_level(op.group)
            op.reserved = self.queues.post_ring(op.post, level, op.nbytes, len(op.group))
        elif op.shape != "recv":
            op.egress, op.ingress = self.queues.post(self.rank, op.leaves, _per_peer(op.sent), _per_peer(op.received))
        return op

    def messages(self, op: VirtualOp, side: str) -> dict[str, int]:
        """The operation's messages to other ranks per link level, on one ``side``: those it sends
        (``send``) or receives (``recv``); none for a ring, whose steps
        :func:`~gnntrain.timing.links.ring_completion` prices."""
        counts: dict[str, int] = {}
        if op.shape != "ring":
            for peer, _, _ in (op.sent if side == "send" else op.received):
                level = self.topology.level(self.rank, peer)
                counts[level] = counts.get(level, 0) + 1
        return counts

    def overhead(self, op: VirtualOp, side: str) -> float:
        """The host's seconds for the operation's messages on one ``side`` (``send``, ``recv``)."""
        return self.topology.overhead(side, self.messages(op, side))

    def complete(self, op: VirtualOp, stamps: list[Stamp]) -> float:
        """When ``op`` completes on this rank, from the stamps of :meth:`VirtualOp.stamp_sources`."""
        if op.shape == "ring":
            level = self.topology.ring_level(op.group)
            return link_model.ring_completion(self.topology, level, len(op.group), [s[1][0] for s in stamps])
        if op.shape == "send":
            return max(op.egress.values(), default=op.leaves)
        if op.shape == "recv":
            return max([op.post] + [link_model.one_sided_arrival(self.topology, self.queues, self.rank, peer, nbytes, s)
                                    for (peer, nbytes, _), s in zip(op.received, stamps)])
        return link_model.exchange_completion(self.topology, self.rank, op.leaves, op.egress, op.ingress,
                                              [(peer, nbytes, s) for (peer, nbytes, _), s in zip(op.received, stamps)])

    def link_cost(self, op: VirtualOp) -> tuple[float, float]:
        """Seconds ``op``'s bytes occupied this rank's links (per level, the busier direction)
        and its latency terms, for the record's link figures."""
        top = self.topology
        if op.shape == "ring":
            level, size = top.ring_level(op.group), len(op.group)
            return top.occupancy(level, 2 * (size - 1) / size * op.nbytes), 2 * (size - 1) * top.latency(level)
        levels: dict[str, list[int]] = {}
        for messages, side in ((op.sent, 0), (op.received, 1)):
            for peer, nbytes, _ in messages:
                levels.setdefault(top.level(self.rank, peer), [0, 0])[side] += nbytes
        busy = sum(top.occupancy(lv, max(sides)) for lv, sides in levels.items())
        return busy, max((top.latency(lv) for lv in levels), default=0.0)


def _per_peer(messages: list[Message]) -> dict[int, int]:
    out: dict[int, int] = {}
    for peer, nbytes, _ in messages:
        out[peer] = out.get(peer, 0) + nbytes
    return out
