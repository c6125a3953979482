"""The kernel-shaped network (``network.mode=kernel``): a spawned job's ranks in Linux network
namespaces, one per node, joined by virtual Ethernet links that traffic control shapes, so that
gloo's traffic and the rendezvous cross real TCP stacks and real queues.

Topology: a *switch* namespace holds a bridge with the address :data:`SWITCH_ADDRESS`, where the
launcher's rendezvous store listens; node ``k`` (ranks ``r // network.gpus_per_node == k``, or
one rank per node without it) has the interface :data:`NODE_INTERFACE` with the address
``10.0.0.(k+1)``, the peer end of a veth pair whose other end is a port of the bridge. Ranks of
one node share its namespace and talk over its loopback, unshaped.

Shaping, per node link: an HTB class at ``network.bandwidth_gbps`` on both ends' egress (the
node's sending and receiving are limited apart, as on a full-duplex NIC). Packets of at most 128
bytes (TCP's acknowledgements) queue apart from the data and go first: at these rates a NIC's
queue of 1000 packets holds seconds' worth of one direction's data, and the other direction's
ACKs waiting behind it halve its throughput (gloo's exchange of 1.3 MB each way over 0.2 Gbit/s
took 2.0x its ideal time with one queue; a queue short enough to avoid that, 1 ms of the rate,
dropped so much of a 4-rank exchange's converging traffic that TCP stalled on its retransmission
timer: 3.7x; with the two queues, 640 KB to each peer took 1.02x on 2 ranks and 1.18x on 4).

``network.loss`` drops that share of the packets a node sends, by a classic-BPF classifier that
sends a random share of them to a class whose queue holds none (per packet: segmentation offload
is turned off on the node's interface, or one drop would take a 64 KiB burst). Per-message
latency needs the ``netem`` queueing discipline, which not every kernel has: where it is missing
a latency is refused in one line.

Lifetime: each namespace is held by a ``sleep`` process started with ``unshare --net`` and asked
to die with the launcher (``PR_SET_PDEATHSIG``), and by an idle socket each worker opens in every
namespace of the job (:func:`join`): the kernel removes a namespace once no process and no socket
is left in it, so the links stay while any process of the job lives (a worker blocked in a
collective when the launcher is killed still sees its peer leave, and stops) and go, with their
queues, when the job ends however it ends. Making them takes ``CAP_SYS_ADMIN`` and
``CAP_NET_ADMIN`` (root); the launcher refuses the mode in one line where it cannot.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import signal
import socket
import subprocess
import time
from typing import Iterator, Optional

from gnntrain.config.schema import NetworkConfig
from gnntrain.errors import ConfigError

NODE_INTERFACE = "gnet0"
"""The interface of every node namespace (gloo binds to it: ``GLOO_SOCKET_IFNAME``)."""
SWITCH_ADDRESS = "10.0.0.254"
"""The bridge's address in the switch namespace, where the rendezvous store listens."""
PROGRAMS = ("unshare", "nsenter", "ip", "tc")
"""What building the namespaces runs (util-linux and iproute2)."""

SMALL_PACKETS = "4,128 0 0 0,37 1 0 128,6 0 0 4294967295,6 0 0 0"
"""Classic BPF matching packets of at most 128 bytes (TCP's pure ACKs are 66)."""

CLONE_NEWNET = 0x40000000
PR_SET_PDEATHSIG = 1
RANDOM = 0xFFFFF038
"""Classic BPF's ancillary load of a random 32-bit number (``SKF_AD_OFF + SKF_AD_RANDOM``)."""


def node_address(node: int) -> str:
    return f"10.0.0.{node + 1}"


def take_link_down() -> None:
    """Take this process's node link down (``fault.link_down``), as a pulled cable: its
    interface stops, and nothing it sends or its peers send to it arrives."""
    subprocess.run(["ip", "link", "set", "dev", NODE_INTERFACE, "down"], check=True)


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def enter(namespace: str) -> None:
    """Move the calling thread (and the threads it starts later) into the network namespace
    ``namespace`` (a ``/proc/<pid>/ns/net`` path)."""
    fd = os.open(namespace, os.O_RDONLY)
    try:
        if _libc().setns(fd, CLONE_NEWNET) != 0:
            errno = ctypes.get_errno()
            raise OSError(errno, f"setns into {namespace}: {os.strerror(errno)}")
    finally:
        os.close(fd)


_HELD: list[socket.socket] = []
"""The idle sockets that keep this worker's job's namespaces alive while it lives."""


def join(own: str, every: list[str]) -> None:
    """A worker's move into its node's namespace ``own``, after opening an idle socket in each
    of the job's namespaces ``every`` (the module docstring's lifetime)."""
    for namespace in dict.fromkeys(every):
        enter(namespace)
        _HELD.append(socket.socket(socket.AF_INET, socket.SOCK_DGRAM))
    enter(own)


@contextlib.contextmanager
def inside(namespace: str) -> Iterator[None]:
    """Run the block in ``namespace`` and come back: a socket made in it stays there."""
    back = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    try:
        enter(namespace)
        yield
    finally:
        _libc().setns(back, CLONE_NEWNET)
        os.close(back)


def _dies_with_the_launcher() -> None:
    _libc().prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def loss_filter(share: float) -> str:
    """Classic BPF for ``tc filter ... bpf bytecode``: a random 32-bit number below ``share`` of
    the range matches (the filter's class), any other does not (the default class)."""
    threshold = min(int(share * 2**32), 2**32 - 1)
    return f"4,32 0 0 {RANDOM},53 1 0 {threshold},6 0 0 {2**32 - 1},6 0 0 0"


class KernelNetwork:
    """The namespaces of one job (``with KernelNetwork(network, nodes) as net``): built on entry,
    their holders stopped on exit (and killed by the kernel should the launcher die first)."""

    def __init__(self, network: NetworkConfig, nodes: int) -> None:
        self.network, self.nodes = network, nodes
        self.holders: list[subprocess.Popen] = []

    @property
    def switch(self) -> str:
        return self._path(self.holders[0])

    def node(self, node: int) -> str:
        """The namespace of node ``node``."""
        return self._path(self.holders[1 + node])

    def unreachable(self) -> list[int]:
        """The nodes whose link is down."""
        down = []
        for node in range(self.nodes):
            shown = subprocess.run(["nsenter", f"--net={self.node(node)}", "ip", "-o", "link", "show", NODE_INTERFACE],
                                   capture_output=True, text=True, check=False).stdout
            if "state UP" not in shown:
                down.append(node)
        return down

    @property
    def every(self) -> list[str]:
        """The job's namespaces: the switch's, then each node's."""
        return [self._path(holder) for holder in self.holders]

    @staticmethod
    def _path(holder: subprocess.Popen) -> str:
        return f"/proc/{holder.pid}/ns/net"

    def __enter__(self) -> "KernelNetwork":
        missing = [p for p in PROGRAMS if shutil.which(p) is None]
        if missing:
            raise ConfigError(f"network.mode=kernel needs {', '.join(PROGRAMS)} (util-linux, iproute2), and "
                              f"{', '.join(missing)} not on PATH; valid: install them, or network.mode=modelled")
        try:
            self.holders = [self._holder() for _ in range(1 + self.nodes)]
            self._wait_until_held()
            self._build()
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        for holder in self.holders:
            holder.kill()
        for holder in self.holders:
            holder.wait()

    def _holder(self) -> subprocess.Popen:
        return subprocess.Popen(["unshare", "--net", "--", "sleep", "infinity"], preexec_fn=_dies_with_the_launcher,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    def _wait_until_held(self) -> None:
        """Each holder in a namespace of its own (``unshare`` has made it and run ``sleep``), or
        one line saying why not."""
        own = os.readlink(f"/proc/{os.getpid()}/ns/net")
        deadline = time.monotonic() + 10.0
        for holder in self.holders:
            while True:
                if holder.poll() is not None:
                    why = holder.stderr.read().decode(errors="replace").strip().splitlines()  # type: ignore[union-attr]
                    raise ConfigError("network.mode=kernel needs CAP_SYS_ADMIN and CAP_NET_ADMIN to make network "
                                      f"namespaces ({why[-1] if why else 'unshare failed'}); valid: run as root, or "
                                      "network.mode=modelled")
                with contextlib.suppress(OSError):
                    if os.readlink(self._path(holder)) != own:
                        break
                if time.monotonic() > deadline:
                    raise ConfigError("network.mode=kernel: a network namespace was not made within 10 s")
                time.sleep(0.01)

    def _run(self, namespace: str, *command: str) -> None:
        done = subprocess.run(["nsenter", f"--net={namespace}", *command], capture_output=True, text=True,
                              check=False)
        if done.returncode != 0:
            raise ConfigError(f"network.mode=kernel: `{' '.join(command)}` failed: "
                              f"{(done.stderr.strip().splitlines() or ['no message'])[-1]}")

    def _build(self) -> None:
        switch = self.switch
        self._run(switch, "ip", "link", "set", "lo", "up")  # the store's own client reaches it through lo
        self._run(switch, "ip", "link", "add", "br0", "type", "bridge")
        self._run(switch, "ip", "addr", "add", f"{SWITCH_ADDRESS}/24", "dev", "br0")
        self._run(switch, "ip", "link", "set", "br0", "up")
        for node in range(self.nodes):
            namespace, port = self.node(node), f"port{node}"
            self._run(switch, "ip", "link", "add", port, "type", "veth", "peer", "name", NODE_INTERFACE, "netns",
                      str(self.holders[1 + node].pid))
            self._run(switch, "ip", "link", "set", port, "master", "br0", "up")
            self._run(namespace, "ip", "addr", "add", f"{node_address(node)}/24", "dev", NODE_INTERFACE)
            self._run(namespace, "ip", "link", "set", "lo", "up")
            self._run(namespace, "ip", "link", "set", NODE_INTERFACE, "up",
                      *(("gso_max_segs", "1") if self.network.loss > 0 else ()))
            self._shape(namespace, NODE_INTERFACE, self.network.loss, self.network.latency_us)
            self._shape(switch, port, 0.0, 0.0)

    def _shape(self, namespace: str, device: str, loss: float, latency_us: float) -> None:
        """The link's rate on ``device``'s egress, a random ``loss`` of its packets and a delay of
        ``latency_us`` (netem) on each (the module docstring's classes)."""
        rate = self.network.bandwidth_gbps
        if rate is None and loss == 0 and latency_us == 0:
            return
        bits = (rate if rate is not None else 100.0) * 1e9
        tc = lambda *args: self._run(namespace, "tc", *args)  # noqa: E731
        tc("qdisc", "add", "dev", device, "root", "handle", "1:", "htb", "default", "10")
        tc("class", "add", "dev", device, "parent", "1:", "classid", "1:1", "htb", "rate", f"{bits:.0f}bit",
           "quantum", "60000")
        for classid, share, prio in (("1:10", 0.9, "1"), ("1:30", 0.1, "0")):
            tc("class", "add", "dev", device, "parent", "1:1", "classid", classid, "htb", "rate", f"{bits * share:.0f}bit",
               "ceil", f"{bits:.0f}bit", "prio", prio, "quantum", "60000")
            if latency_us > 0:
                self._delay(namespace, device, classid, latency_us)
        if loss > 0:
            tc("class", "add", "dev", device, "parent", "1:", "classid", "1:20", "htb", "rate", f"{bits:.0f}bit",
               "quantum", "60000")
            tc("qdisc", "add", "dev", device, "parent", "1:20", "pfifo", "limit", "0")
            tc("filter", "add", "dev", device, "parent", "1:", "protocol", "all", "prio", "1", "bpf", "bytecode",
               loss_filter(loss), "classid", "1:20")
        tc("filter", "add", "dev", device, "parent", "1:", "protocol", "all", "prio", "2", "bpf", "bytecode",
           SMALL_PACKETS, "classid", "1:30")

    def _delay(self, namespace: str, device: str, classid: str, latency_us: float) -> None:
        try:
            self._run(namespace, "tc", "qdisc", "add", "dev", device, "parent", classid, "netem", "delay",
                      f"{latency_us:g}us", "limit", "100000")
        except ConfigError as exc:
            if "unknown" not in str(exc):
                raise
            raise ConfigError(f"network.latency_us={latency_us:g} with network.mode=kernel needs the netem "
                              "queueing discipline, which this kernel lacks; valid: network.latency_us=0, or "
                              "network.mode=modelled") from None


def nodes_of(network: NetworkConfig, world_size: int) -> list[int]:
    """The node of each rank: ``r // gpus_per_node``, or one node per rank."""
    per_node: Optional[int] = network.gpus_per_node
    return [rank // per_node if per_node else rank for rank in range(world_size)]
