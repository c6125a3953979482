"""The network model of the virtual clock (:mod:`gnntrain.timing.virtual_clock`) and of replay
(:mod:`gnntrain.timing.replay`): when a transfer completes on each rank, from every participant's
virtual post time and the state of its links. Pure arithmetic on seconds and bytes: the same
functions time a live run and recompute a recorded one under another network.

The links are the cluster description's (:mod:`gnntrain.timing.cluster`): levels ``inter`` and,
with ``gpus_per_node``, ``intra``, each with a bandwidth, a latency and a host cost per message
(LogGP's ``o``, on the sending and the receiving end), payload bytes on the wire as TCP over
Ethernet frames; timed here on both ends of a transfer:

* A rank that posts messages spends its level's send cost on each before they leave (its clock
  advances by it: the host is busy sending), and, where it waits for messages, its level's
  receive cost on each once they have arrived (its wait ends that much later). Both are events
  of the trace of their own (:class:`gnntrain.timing.trace.Overhead`), so a replay under another
  cluster prices them at its costs.
* Each rank has per level an *egress* and an *ingress* queue (its full-duplex link's two
  directions). An operation reserves them when the rank posts it, in the order the rank posts,
  from where its messages leave (its post, after the host's cost of sending them: ``depart``):
  ``egress done = max(depart, egress free) + wire(bytes sent on that level) / bandwidth``,
  likewise ingress with the bytes received. A transfer posted while the link is
  busy queues behind it (PipeGCN's stale exchange and its synchronous one share the link).
* A message of ``b`` bytes from ``q`` to ``r`` arrives at
  ``max(egress done of q, ingress done of r, start + wire(b) / bandwidth) + latency``: it
  leaves no earlier than ``q``'s queue lets it, enters no earlier than ``r``'s does, and moves
  no earlier than both ends are ready (``start``: the later of the two ends' departures for a
  two-sided transfer, an all-to-all or an exchange of point-to-point messages; the sender's
  departure for a one-sided send, as a pipeline's pre-posted receive takes it, whose receiver reserves its
  ingress from the sender's post when it learns it).
* An operation completes on a rank when its own sends have left (its egress is done) and every
  message to it has arrived.
* An all-reduce of ``b`` bytes over ``P`` ranks runs as a ring on the slowest level the group
  spans (on a two-level cluster, the one between nodes bounds the ring): each rank reserves
  ``2 (P-1)/P x wire(b) / bandwidth`` on both directions of that level from its post, and the
  all-reduce completes on every rank at the latest reservation's end plus ``2 (P-1)`` steps of
  the level's latency and a message's send and receive cost.

With no link set (``network=none``) every link is ideal: a transfer completes when its last
participant has posted it. What it leaves out: switch contention, the frames' preamble and gap,
TCP's acknowledgements and its congestion control, and a late receiver's effect on the other
messages of its sender (only the message to it waits).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gnntrain.timing.cluster import LEVELS, Topology


@dataclass
class LinkQueues:
    """One rank's egress and ingress queues: when each direction of each level is free again."""

    topology: Topology
    egress: dict[str, float] = field(default_factory=lambda: dict.fromkeys(LEVELS, 0.0))
    ingress: dict[str, float] = field(default_factory=lambda: dict.fromkeys(LEVELS, 0.0))

    def reserve(self, queue: dict[str, float], start: float, level: str, nbytes: float) -> float:
        """Reserve ``nbytes`` on one direction of ``level`` from ``start``; when they are through
        (``start`` where nothing is reserved)."""
        if nbytes == 0:
            return start
        queue[level] = max(start, queue[level]) + self.topology.occupancy(level, nbytes)
        return queue[level]

    def post(self, rank: int, post: float, sent: dict[int, int], received: dict[int, int]
             ) -> tuple[dict[str, float], dict[str, float]]:
        """Reserve an operation's bytes sent to and received from each world rank (the rank's
        share to itself left out by the caller): its egress and ingress done times per level."""
        out, into = dict.fromkeys(LEVELS, 0), dict.fromkeys(LEVELS, 0)
        for peer, nbytes in sent.items():
            out[self.topology.level(rank, peer)] += nbytes
        for peer, nbytes in received.items():
            into[self.topology.level(rank, peer)] += nbytes
        return ({lv: self.reserve(self.egress, post, lv, out[lv]) for lv in LEVELS},
                {lv: self.reserve(self.ingress, post, lv, into[lv]) for lv in LEVELS})

    def post_ring(self, post: float, level: str, nbytes: float, size: int) -> float:
        """Reserve a ring all-reduce's share of both directions of ``level``: when it is through."""
        if size < 2 or nbytes == 0:
            return post
        share = 2 * (size - 1) / size * nbytes
        return max(self.reserve(self.egress, post, level, share), self.reserve(self.ingress, post, level, share))


def arrival(topology: Topology, level: str, nbytes: float, start: float, sender_egress_done: float,
            receiver_ingress_done: float) -> float:
    """When a message of ``nbytes`` on ``level`` arrives (module docstring)."""
    return max(sender_egress_done, receiver_ingress_done,
               start + topology.occupancy(level, nbytes)) + topology.latency(level)


def ring_completion(topology: Topology, level: str, size: int, reserved: list[float]) -> float:
    """When a ring all-reduce completes, from every participant's reservation end: each of its
    ``2 (P-1)`` steps pays the level's latency and a message's host cost on both ends."""
    return max(reserved) + (2 * (size - 1) * topology.step(level) if size > 1 else 0.0)


Stamp = tuple[float, tuple[float, ...]]
"""What a sender tells the receivers of an operation: its post time and its egress done time on
each level (in :data:`LEVELS` order)."""


def stamp(post: float, egress: dict[str, float]) -> Stamp:
    return post, tuple(egress.get(lv, post) for lv in LEVELS)


def exchange_completion(topology: Topology, rank: int, post: float, egress: dict[str, float],
                        ingress: dict[str, float], received: list[tuple[int, int, Stamp]]) -> float:
    """When a two-sided operation (an all-to-all, an exchange of point-to-point messages)
    completes on ``rank``, which posted it at ``post`` with those reservations
    (:meth:`LinkQueues.post`): its sends have left and every message ``(sender, bytes, the
    sender's stamp)`` has arrived."""
    done = max(egress.values(), default=post)
    for sender, nbytes, (their_post, their_egress) in received:
        level = topology.level(rank, sender)
        done = max(done, arrival(topology, level, nbytes, max(post, their_post),
                                 their_egress[LEVELS.index(level)], ingress[level]))
    return done


def one_sided_arrival(topology: Topology, queues: LinkQueues, rank: int, sender: int, nbytes: int,
                      sent: Stamp) -> float:
    """When a one-sided message of ``nbytes`` from ``sender`` arrives at ``rank``, which reserves
    its ingress for it from the sender's post."""
    their_post, their_egress = sent
    level = topology.level(rank, sender)
    ingress = queues.reserve(queues.ingress, their_post, level, nbytes)
    return arrival(topology, level, nbytes, their_post, their_egress[LEVELS.index(level)], ingress)
