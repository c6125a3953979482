"""The network model of the virtual clock (:mod:`gnntrain.timing.virtual_clock`) and of replay
(:mod:`gnntrain.timing.replay`): when a transfer completes on each rank, from every participant's
virtual post time and the state of its links. Pure arithmetic on seconds and bytes: the same
functions time a live run and recompute a recorded one under another network.

The links are those the wall clock's emulator holds transfers back to
(:mod:`gnntrain.comm.network`; defined here, :class:`Link` and :func:`wire`): levels ``inter``
and, with ``gpus_per_node``, ``intra``, payload bytes on the wire as TCP over Ethernet frames;
here on both ends of a transfer:

* Each rank has per level an *egress* and an *ingress* queue (its full-duplex link's two
  directions). An operation reserves them when the rank posts it, in the order the rank posts,
  from its post time: ``egress done = max(post, egress free) + wire(bytes sent on that level) /
  bandwidth``, likewise ingress with the bytes received. A transfer posted while the link is
  busy queues behind it (PipeGCN's stale exchange and its synchronous one share the link).
* A message of ``b`` bytes from ``q`` to ``r`` arrives at
  ``max(egress done of q, ingress done of r, start + wire(b) / bandwidth) + latency``: it
  leaves no earlier than ``q``'s queue lets it, enters no earlier than ``r``'s does, and moves
  no earlier than both ends are ready (``start``: the later of the two posts for a two-sided
  transfer, an all-to-all or an exchange of point-to-point messages; the sender's post for a
  one-sided send, as a pipeline's pre-posted receive takes it, whose receiver reserves its
  ingress from the sender's post when it learns it).
* An operation completes on a rank when its own sends have left (its egress is done) and every
  message to it has arrived.
* An all-reduce of ``b`` bytes over ``P`` ranks runs as a ring on the slowest level the group
  spans (on a two-level cluster, the one between nodes bounds the ring): each rank reserves
  ``2 (P-1)/P x wire(b) / bandwidth`` on both directions of that level from its post, and the
  all-reduce completes on every rank at the latest reservation's end plus ``2 (P-1)`` latencies.

With no link set (``network=none``) every link is ideal: a transfer completes when its last
participant has posted it. What it leaves out, as the wall-clock emulator does: switch
contention, the frames' preamble and gap, TCP's acknowledgements, and a late receiver's effect on
the other messages of its sender (only the message to it waits).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

GBIT = 1e9 / 8
"""Bytes per second in one Gbit/s."""
SEGMENT_BYTES = 1448
"""TCP payload in one full-size Ethernet frame: the 1500-byte MTU less 20 bytes of IPv4 header
and 32 of TCP header (with timestamps, as Linux sends them)."""
FRAME_BYTES = 1514
"""What that frame occupies on a link as Linux's traffic control counts it (the MTU and the
14-byte Ethernet header; a physical link also spends 20 bytes of preamble and gap on it)."""


def wire(payload: float) -> float:
    """The bytes ``payload`` bytes of TCP payload occupy on the link."""
    return payload * FRAME_BYTES / SEGMENT_BYTES


@dataclass(frozen=True)
class Link:
    bytes_per_s: float
    latency_s: float


LEVELS = ("inter", "intra")
"""The link levels, in the order a rank's stamp lists its egress times."""


@dataclass(frozen=True)
class Topology:
    """Which link joins two ranks, and what it costs. ``links`` is empty for ideal links."""

    links: dict[str, Link] = field(default_factory=dict)
    gpus_per_node: int | None = None

    @classmethod
    def of(cls, network) -> Topology:
        """The links of a typed ``network`` config section (ideal without a bandwidth; the
        kernel's links are not modelled here)."""
        if network.bandwidth_gbps is None:
            return cls()
        links = {"inter": Link(network.bandwidth_gbps * GBIT, network.latency_us * 1e-6)}
        if network.gpus_per_node:
            links["intra"] = Link(network.intra_bandwidth_gbps * GBIT, network.intra_latency_us * 1e-6)
        return cls(links, network.gpus_per_node)

    def level(self, a: int, b: int) -> str:
        """The level of the link between world ranks ``a`` and ``b``."""
        if self.gpus_per_node and a // self.gpus_per_node == b // self.gpus_per_node:
            return "intra"
        return "inter"

    def occupancy(self, level: str, nbytes: float) -> float:
        """Seconds ``nbytes`` of payload occupy a link of ``level``."""
        link = self.links.get(level)
        return 0.0 if link is None or nbytes == 0 else wire(nbytes) / link.bytes_per_s

    def latency(self, level: str) -> float:
        link = self.links.get(level)
        return 0.0 if link is None else link.latency_s

    def ring_level(self, group: list[int]) -> str:
        """The slowest level a group of world ranks spans."""
        return "inter" if any(self.level(group[0], r) == "inter" for r in group[1:]) else "intra"


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
    """When a ring all-reduce completes, from every participant's reservation end."""
    return max(reserved) + (2 * (size - 1) * topology.latency(level) if size > 1 else 0.0)


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


def at_bandwidth(network, gbps: float):
    """``network`` (a typed network section) with its link between nodes at ``gbps`` Gbit/s; the
    intra-node link, where there is one, keeps its ratio to it."""
    scale = gbps / network.bandwidth_gbps
    return replace(network, bandwidth_gbps=gbps, intra_bandwidth_gbps=(
        network.intra_bandwidth_gbps * scale if network.intra_bandwidth_gbps else None))
