"""The cluster description, as every timed figure reads it: which level of link joins two ranks
and what a message costs on it.

A cluster is described once, by the ``network`` config section (its presets: ``conf/network/``)
beside ``cluster.world_size`` and ``cluster.device``: ranks per node (``gpus_per_node``; none: every
rank a node of its own), and per level (``inter`` between nodes; ``intra`` within one, with
``gpus_per_node``) a bandwidth, a latency and LogGP's per-message host cost ``o``, on the
sending and on the receiving end. :class:`Topology` is that description in the timing's own
terms; a live run (:mod:`gnntrain.timing.virtual_rank`), a replay (:mod:`gnntrain.timing.replay`),
a prediction (:mod:`gnntrain.predict`) and calibration all build theirs with :meth:`Topology.of`,
so the same cluster is timed by one model whoever times it.

A described link selects the virtual clock (``cluster.clock=auto``); a run on a real transport
(``network=none``, ``network.mode=kernel``; torchrun across machines with ``network=none``) is
timed on the wall clock, and its ``network`` section says what the links are, not a model of them
(docs/clusters.md).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gnntrain.config.schema import NetworkConfig

GBIT = 1e9 / 8
"""Bytes per second in one Gbit/s."""
SEGMENT_BYTES = 1448
"""TCP payload in one full-size Ethernet frame: the 1500-byte MTU less 20 bytes of IPv4 header
and 32 of TCP header (with timestamps, as Linux sends them)."""
FRAME_BYTES = 1514
"""What that frame occupies on a link as Linux's traffic control counts it (the MTU and the
14-byte Ethernet header; a physical link also spends 20 bytes of preamble and gap on it)."""
LEVELS = ("inter", "intra")
"""The link levels, in the order a rank's stamp lists its egress times."""


def wire(payload: float) -> float:
    """The bytes ``payload`` bytes of TCP payload occupy on the link."""
    return payload * FRAME_BYTES / SEGMENT_BYTES


@dataclass(frozen=True)
class Link:
    """One level's link: bytes per second, latency and the host's cost of a message on each end."""

    bytes_per_s: float
    latency_s: float
    send_overhead_s: float = 0.0
    recv_overhead_s: float = 0.0


@dataclass(frozen=True)
class Topology:
    """Which link joins two ranks, and what it costs. ``links`` is empty for ideal links."""

    links: dict[str, Link] = field(default_factory=dict)
    gpus_per_node: int | None = None

    @classmethod
    def of(cls, network: NetworkConfig) -> Topology:
        """The links of a typed ``network`` config section (ideal without a bandwidth: the real
        transport, whose time the wall clock measures)."""
        if network.bandwidth_gbps is None:
            return cls()
        links = {"inter": Link(network.bandwidth_gbps * GBIT, network.latency_us * 1e-6,
                               network.send_overhead_us * 1e-6, network.recv_overhead_us * 1e-6)}
        if network.gpus_per_node:
            links["intra"] = Link(network.intra_bandwidth_gbps * GBIT, network.intra_latency_us * 1e-6,
                                  network.intra_send_overhead_us * 1e-6, network.intra_recv_overhead_us * 1e-6)
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

    def overhead(self, side: str, messages: dict[str, int]) -> float:
        """The host's seconds for ``messages`` (a count per level) on one ``side`` (``send``,
        ``recv``)."""
        return sum(n * getattr(self.links[lv], f"{side}_overhead_s") for lv, n in messages.items() if lv in self.links)

    def step(self, level: str) -> float:
        """One step of a ring on ``level``: its latency and a message's cost on both ends."""
        link = self.links.get(level)
        return 0.0 if link is None else link.latency_s + link.send_overhead_s + link.recv_overhead_s

    def ring_level(self, group: list[int]) -> str:
        """The slowest level a group of world ranks spans."""
        return "inter" if any(self.level(group[0], r) == "inter" for r in group[1:]) else "intra"


LINK_KEYS = ("bandwidth_gbps", "latency_us", "send_overhead_us", "recv_overhead_us")
"""The network options that set a link: one between every pair of workers ..."""
NODE_KEYS = ("gpus_per_node", "intra_bandwidth_gbps", "intra_latency_us", "intra_send_overhead_us",
             "intra_recv_overhead_us")
"""... and, with ``gpus_per_node``, a second within each node."""
KERNEL_KEYS = ("bandwidth_gbps", "latency_us", "loss", "gpus_per_node")
"""The network options the kernel-shaped links take (:mod:`gnntrain.comm.namespaces`)."""


def scaled(network: NetworkConfig, factor: float) -> NetworkConfig:
    """``network`` with every level's bandwidth times ``factor`` (calibration, bandwidth sweeps)."""
    intra = network.intra_bandwidth_gbps * factor if network.intra_bandwidth_gbps else network.intra_bandwidth_gbps
    return replace(network, bandwidth_gbps=network.bandwidth_gbps * factor, intra_bandwidth_gbps=intra)


def at_bandwidth(network: NetworkConfig, gbps: float) -> NetworkConfig:
    """``network`` with its link between nodes at ``gbps`` Gbit/s; the intra-node link, where there
    is one, keeps its ratio to it."""
    return scaled(network, gbps / network.bandwidth_gbps)


def modelled(network: NetworkConfig) -> bool:
    """Whether the section describes links the virtual clock models (a bandwidth, not the
    kernel's links)."""
    return network.bandwidth_gbps is not None and network.mode != "kernel"


def describe(network: NetworkConfig) -> dict:
    """What ``summary.json`` and the tables say about the network: whether it was modelled (or
    made by the kernel), the preset, the links and, when calibrated, the calibration."""
    if network.mode == "kernel":
        return {"modelled": False, "kernel": True, "preset": network.name,
                **{k: getattr(network, k) for k in KERNEL_KEYS}}
    if network.bandwidth_gbps is None:
        return {"modelled": False, "preset": network.name}
    keys = LINK_KEYS + NODE_KEYS if network.gpus_per_node else LINK_KEYS
    return {"modelled": True, "preset": network.name, **{k: getattr(network, k) for k in keys},
            "calibration": network.calibration}


def is_modelled(info: dict) -> bool:
    """Whether a described network (:func:`describe`, as a summary keeps it) was modelled; a
    summary written before the virtual clock timed every described link says ``emulated``."""
    return bool(info.get("modelled", info.get("emulated")))


def link_overrides(info: dict) -> list[str]:
    """The command-line overrides that describe again the network :func:`describe` described
    (its calibrated bandwidths as numbers, so nothing is calibrated anew): a later run, or a
    replay, under exactly a finished run's link. A summary written before the links had host
    costs per message ran without any: 0, whatever its preset says now."""
    keys = LINK_KEYS + NODE_KEYS if info.get("gpus_per_node") else LINK_KEYS
    given = [f"network.{k}={info[k]!r}" for k in keys if k in info]
    costless = [f"network.{k}=0.0" for k in keys if k.endswith("overhead_us") and k not in info and is_modelled(info)]
    return [f"network={info['preset']}", "network.calibrate_share=null", *given, *costless]


def label(info: dict) -> str:
    """One line naming the network described by :func:`describe` (as ``summary.json`` keeps it),
    for console headers, reports and tables; ``none`` on the real transport. A link is named by
    what it is (bandwidth, latency, per-message host cost, each level's), then the preset it came
    from, with the calibration that scaled it: a preset's name alone would promise the preset's
    bandwidth, which a calibrated or overridden link no longer has."""
    origin = "" if info.get("preset", "none") == "none" else f"; from preset {info['preset']}"
    if info.get("kernel"):
        rate = "unshaped" if info["bandwidth_gbps"] is None else f"{info['bandwidth_gbps']:.4g} Gbit/s"
        nodes = f", {info['gpus_per_node']} workers per node" if info.get("gpus_per_node") else ""
        return f"kernel-shaped links: {rate}, {info['latency_us']:g} us latency, loss {info['loss']:g}{nodes}{origin}"
    if not is_modelled(info):
        return "none"
    word = "modelled" if "modelled" in info else "emulated"
    text = f"{word} link: {info['bandwidth_gbps']:.4g} Gbit/s, {info['latency_us']:g} us latency"
    if info.get("send_overhead_us") or info.get("recv_overhead_us"):
        text += f", {info['send_overhead_us']:g}/{info['recv_overhead_us']:g} us per message (send/receive)"
    if info.get("gpus_per_node"):
        text += (f" between nodes; {info['intra_bandwidth_gbps']:.4g} Gbit/s, {info['intra_latency_us']:g} us "
                 f"within ({info['gpus_per_node']} workers per node)")
    text += origin
    if info.get("calibration"):
        calibration = info["calibration"]
        nominal = calibration.get("preset_bandwidth_gbps")
        text += (f" ({nominal:.4g} Gbit/s)" if nominal else "") + (
            f", scaled to {calibration.get('against', 'vanilla')}'s communication share {calibration['share']:g}")
        if "reached_share" in calibration:
            text += f" (reached {calibration['reached_share']:.2f})"
    return text
