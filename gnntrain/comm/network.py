"""An emulated cluster network (``network=``): real transfers, held back to an emulated link's
speed.

On one machine gloo moves bytes through shared memory, so communication is nearly free and a
method that saves communication cannot show it. With an emulated network every transfer still
really happens through ``torch.distributed``; its completion is then held back (a sleep, not
busy compute, so overlapped compute really hides it) until the time the emulated link would
need. The model, per rank:

* Each rank has one full-duplex link per *level*: ``inter`` (to ranks on other nodes:
  ``bandwidth_gbps``, ``latency_us``) and, with ``gpus_per_node`` set, ``intra`` (to ranks on
  its node, ``rank // gpus_per_node``: ``intra_bandwidth_gbps``, ``intra_latency_us``).
  Without ``gpus_per_node`` every peer is across the one ``inter`` level.
* Bytes travel as TCP over Ethernet frames: ``bytes`` of payload occupy the link as
  ``wire(bytes) = bytes x 1514 / 1448`` (a frame per segment of payload: 4.6% of headers;
  :func:`gnntrain.timing.links.wire`, which the virtual clock's model shares).
* A point-to-point or all-to-all transfer occupies each level's link for
  ``wire(max(bytes sent, bytes received on that level)) / bandwidth`` (a rank's sends share its
  link, so do its receives) and completes one latency after the last byte:
  ``latency + wire(bytes) / bandwidth``. Transfers started while the link is busy queue behind
  it (PipeGCN's side channel and its synchronous exchange share one link).
* An all-reduce of ``bytes`` over ``P`` ranks costs the ring's
  ``2 (P-1)/P x wire(bytes) / bandwidth + 2 (P-1) x latency`` on the slowest level the group
  spans.

Under the virtual clock (``cluster.clock=virtual``) the same links are timed by
:mod:`gnntrain.timing.links`, from every participant's post time and on both ends' links;
nothing sleeps there.

What this leaves out (a choice): the peer's link (a transfer waits on this rank's link only, so
an imbalanced all-to-all, or a pipeline stage's send into a rank whose link also carries its
halo exchange, is timed from each rank's own side), switch contention, the frames'
preamble and gap (1.6% on a physical link), TCP's acknowledgements (up to 2.3% of the
opposite direction) and the CPU that the kernel's network stack takes from compute. The
loopback transfer's own time is not added: a transfer completes at
``max(real completion, emulated completion)``.

Measured against TCP over kernel-shaped links of the same rate (``network.mode=kernel``,
``make network-check``, docs/testing.md; 10k nodes, GraphSAGE 2 x 64, 2 and 4 ranks on a
2-core machine): 13 of 20 rows' epoch times are within 15%. The others take 1.15-1.45x on the
real link, every one on 4 ranks or at 1 Gbit/s (causes not measured apart): four ranks and the
kernel's packet processing share two cores, the receiver's link is left out (above), and at
1 Gbit/s the fixed costs of each transfer weigh more (gloo's receive notice must reach the
sender before its data leaves: an exchange of 200 KB each way on 2 ranks took 0.3 ms more than
its 1.67 ms on the wire). Where a link is busy with PipeGCN's stale rows, the kernel's PipeGCN
waits on those rows, while here the gradient all-reduce queued behind them waits, so the same
time is exposed ``data`` there and ``sync`` here; the epochs agree (0.97x on 2 ranks at
0.2 Gbit/s).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gnntrain.timing.links import GBIT, Link, wire

if TYPE_CHECKING:
    from gnntrain.config.schema import NetworkConfig

@dataclass
class Hold:
    """When an emulated transfer completes, and what it cost on the links: ``busy_s`` (bytes /
    bandwidth, summed over levels) and ``latency_s`` (its latency terms)."""

    ready_at: float
    busy_s: float
    latency_s: float

    def wait(self) -> None:
        """Sleep until the emulated completion."""
        remaining = self.ready_at - time.perf_counter()
        if remaining > 0:
            time.sleep(remaining)


class EmulatedNetwork:
    """One rank's links (module docstring). ``network`` is the typed ``network`` config section."""

    def __init__(self, network: NetworkConfig, rank: int) -> None:
        self.rank = rank
        self.gpus_per_node = network.gpus_per_node
        self.links = {"inter": Link(network.bandwidth_gbps * GBIT, network.latency_us * 1e-6)}
        if self.gpus_per_node:
            self.links["intra"] = Link(network.intra_bandwidth_gbps * GBIT, network.intra_latency_us * 1e-6)
        self.free_at = dict.fromkeys(self.links, 0.0)

    @classmethod
    def from_config(cls, network: NetworkConfig, rank: int) -> EmulatedNetwork | None:
        """The rank's emulated network, or None with ``network=none`` (no bandwidth set) and
        where the kernel makes the links (``network.mode=kernel``)."""
        return cls(network, rank) if network.bandwidth_gbps is not None and network.mode == "emulated" else None

    def level(self, peer: int) -> str:
        """The link level between this rank and world rank ``peer``."""
        if self.gpus_per_node and peer // self.gpus_per_node == self.rank // self.gpus_per_node:
            return "intra"
        return "inter"

    def exchange(self, start: float, sent: dict[int, int], received: dict[int, int]) -> Hold:
        """A point-to-point or all-to-all transfer started at ``start``: bytes sent to and
        received from each world rank (this rank's own share excluded by the caller)."""
        volume = dict.fromkeys(self.links, 0)
        for direction in (sent, received):
            per_level = dict.fromkeys(self.links, 0)
            for peer, nbytes in direction.items():
                per_level[self.level(peer)] += nbytes
            volume = {lv: max(volume[lv], per_level[lv]) for lv in self.links}
        ready, busy, latency = start, 0.0, 0.0
        for lv, nbytes in volume.items():
            if nbytes == 0:
                continue
            link = self.links[lv]
            occupancy = wire(nbytes) / link.bytes_per_s
            self.free_at[lv] = max(start, self.free_at[lv]) + occupancy
            ready = max(ready, self.free_at[lv] + link.latency_s)
            busy += occupancy
            latency = max(latency, link.latency_s)
        return Hold(ready, busy, latency)

    def all_reduce(self, start: float, nbytes: int, group_ranks: list[int]) -> Hold:
        """A ring all-reduce of ``nbytes`` over the world ranks ``group_ranks``, started at
        ``start``, on the slowest level the group spans."""
        size = len(group_ranks)
        if size < 2 or nbytes == 0:
            return Hold(start, 0.0, 0.0)
        lv = "inter" if any(self.level(r) == "inter" for r in group_ranks if r != self.rank) else "intra"
        link = self.links[lv]
        occupancy = 2 * (size - 1) / size * wire(nbytes) / link.bytes_per_s
        latency = 2 * (size - 1) * link.latency_s
        self.free_at[lv] = max(start, self.free_at[lv]) + occupancy
        return Hold(self.free_at[lv] + latency, occupancy, latency)


LINK_KEYS = ("bandwidth_gbps", "latency_us")
"""The network options that set a link: one between every pair of workers ..."""
NODE_KEYS = ("gpus_per_node", "intra_bandwidth_gbps", "intra_latency_us")
"""... and, with ``gpus_per_node``, a second within each node."""


KERNEL_KEYS = ("bandwidth_gbps", "latency_us", "loss", "gpus_per_node")
"""The network options the kernel-shaped links take (:mod:`gnntrain.comm.namespaces`)."""


def describe(network: NetworkConfig) -> dict:
    """What ``summary.json`` and the tables say about the network: whether it was emulated (or
    made by the kernel), the preset, the links and, when calibrated, the calibration."""
    if network.mode == "kernel":
        return {"emulated": False, "kernel": True, "preset": network.name,
                **{k: getattr(network, k) for k in KERNEL_KEYS}}
    if network.bandwidth_gbps is None:
        return {"emulated": False, "preset": network.name}
    keys = LINK_KEYS + NODE_KEYS if network.gpus_per_node else LINK_KEYS
    return {"emulated": True, "preset": network.name, **{k: getattr(network, k) for k in keys},
            "calibration": network.calibration}


def link_overrides(info: dict) -> list[str]:
    """The command-line overrides that emulate again the network :func:`describe` described
    (its calibrated bandwidths as numbers, so nothing is calibrated anew): a later run under
    exactly a finished run's link."""
    return [f"network={info['preset']}", "network.calibrate_share=null",
            *(f"network.{k}={info[k]!r}" for k in LINK_KEYS + NODE_KEYS if k in info)]


def label(info: dict) -> str:
    """One line naming the network described by :func:`describe` (as ``summary.json`` keeps
    it), for console headers, reports and tables; ``none`` on the real transport."""
    if info.get("kernel"):
        rate = "unshaped" if info["bandwidth_gbps"] is None else f"{info['bandwidth_gbps']:.4g} Gbit/s"
        nodes = f", {info['gpus_per_node']} workers per node" if info.get("gpus_per_node") else ""
        preset = "" if info["preset"] == "none" else f" ({info['preset']})"
        return f"kernel-shaped links{preset}: {rate}, {info['latency_us']:g} us, loss {info['loss']:g}{nodes}"
    if not info["emulated"]:
        return "none"
    text = f"emulated {info['preset']}: {info['bandwidth_gbps']:.4g} Gbit/s, {info['latency_us']:g} us"
    if info.get("gpus_per_node"):
        text += (f" between nodes; {info['intra_bandwidth_gbps']:.4g} Gbit/s, {info['intra_latency_us']:g} us "
                 f"within ({info['gpus_per_node']} workers per node)")
    if info.get("calibration"):
        calibration = info["calibration"]
        text += f"; calibrated to {calibration.get('against', 'vanilla')} communication share {calibration['share']:g}"
        if "reached_share" in calibration:
            text += f" (reached {calibration['reached_share']:.2f})"
    return text
