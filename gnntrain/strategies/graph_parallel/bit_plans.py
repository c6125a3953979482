"""Per-message bit-widths for quantized halo exchanges (AdaQP, Sec. 3.3, 4.2, Table 6).

A plan answers, for every layer and direction, the bit-width of each row the rank sends and
of each row it receives; sender and receiver of a row always hold the same width.

* :class:`FixedBits`: every message at ``bits`` (2, 4 or 8; :func:`fixed_bits` gives no plan
  at 32 bits, so those rows go unencoded).
* :class:`UniformBits`: each message's width drawn uniformly from {2, 4, 8} (Table 6's
  baseline: "samples a bit-width from {2, 4, 8} for each message uniformly and randomly",
  Sec. 5.1), afresh every epoch (our reading of "each message": a row sent in one layer,
  direction and epoch); both ends draw the same widths from a generator seeded by
  (seed, epoch, layer, direction, sender, receiver), so no message is needed to agree.
* :class:`AdaptiveBits`: every ``period`` epochs, AdaQP's assigner. Each receiver traces, per
  received message ``k``, ``beta_k = c_k D (max h_k - min h_k)^2 / 6`` from the rows that
  arrived last (Eq. 11). ``c_k = sum_v alpha_kv^2`` over ``k``'s out-neighbours ``v`` on the
  rank that holds ``k`` as a halo row, with the layer's own aggregation weights
  (:meth:`~gnntrain.models.gnn.MessagePassingLayer.squared_weight_sums`: GCN's symmetric
  normalised weights, SAGE's and FiLM's mean, GCNII's (1 - alpha) times GCN's; attention and
  softmax layers, whose weights change with the data, the mean's as a stand-in). A backward
  message is the gradient of ``k``'s row, which entered the loss through the same weights, so
  it gets the same ``c_k`` (the alpha^2 of Eq. 23 and 27); its receiver, ``k``'s owner, learns
  the coefficients once at start-up from the halo holders. Rank 0 gathers the traces, groups
  each device pair's messages by ``beta`` (``group_size``) and solves Eq. 12 per layer and
  direction (:mod:`.bit_assignment`: one time variable per ring round, the per-pair
  alpha-beta cost model profiled round by round at start-up; ``normalize`` for the scaled
  variant) to within ``assign_gap`` of its optimum, at most ``solve_time_limit`` seconds of
  branch and bound each, the problems solved concurrently by a thread pool (Sec. 3.3: the
  layers' problems share nothing); then it sends each receiver its widths, and receivers pass
  them on to the senders. Until the first assignment (after ``period`` epochs) every message
  uses 8 bits. The traffic of tracing and assigning is counted under the ``assign`` kind.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

import numpy as np
import torch

from gnntrain.rng import keyed
from gnntrain.timing.clock import Stopwatch
from gnntrain.comm.communicator import Communicator
from gnntrain.comm.quantize import FULL
from gnntrain.comm.quantized_exchange import WidthLayout
from gnntrain.data.local_graph import LocalGraph
from gnntrain.models.gnn import MessagePassingModel
from gnntrain.parallel.pinned import PinnedStaging
from gnntrain.strategies.graph_parallel.bit_assignment import WIDTHS, Assignment, PairGroups, assign_bits, group_messages

if TYPE_CHECKING:  # the config sits beside the policy that builds these plans
    from gnntrain.strategies.graph_parallel.config import AdaQPConfig

Key = tuple[int, str]


def _sizes(graph: LocalGraph, direction: str) -> tuple[list[int], list[int]]:
    """(rows sent per peer, rows received per peer) in ``direction``."""
    if direction == "fwd":
        return graph.send_splits, graph.recv_splits
    return graph.recv_splits, graph.send_splits


class _Plan:
    """Widths are issued per (layer, direction) on first use and kept in ``issued``, with their
    :class:`~gnntrain.comm.quantized_exchange.WidthLayout` (found once per issue)."""

    def __init__(self, graph: LocalGraph) -> None:
        self.graph = graph
        self.issued: dict[Key, tuple[torch.Tensor, torch.Tensor]] = {}
        self._layouts: dict[Key, tuple[WidthLayout, WidthLayout]] = {}

    def bits(self, layer: int, direction: str) -> tuple[torch.Tensor, torch.Tensor]:
        if (layer, direction) not in self.issued:
            self.issue((layer, direction), self._initial(layer, direction))
        return self.issued[layer, direction]

    def layouts(self, layer: int, direction: str) -> tuple[WidthLayout, WidthLayout]:
        key = (layer, direction)
        if key not in self._layouts:
            send_bits, recv_bits = self.bits(layer, direction)
            send, recv = _sizes(self.graph, direction)
            self._layouts[key] = (WidthLayout.of(send_bits, send), WidthLayout.of(recv_bits, recv))
        return self._layouts[key]

    def issue(self, key: Key, widths: tuple[torch.Tensor, torch.Tensor]) -> None:
        """Issue the (sent, received) widths of ``key``."""
        self.issued[key] = widths
        self._layouts.pop(key, None)

    def withdraw(self) -> None:
        """Forget every issued width (they are issued afresh on use)."""
        self.issued.clear()
        self._layouts.clear()

    def _initial(self, layer: int, direction: str) -> tuple[torch.Tensor, torch.Tensor]:
        raise NotImplementedError

    def state_dict(self) -> dict:
        return {"issued": self.issued}

    def load_state_dict(self, state: dict) -> None:
        device = self.graph.device
        self.withdraw()
        for key, (send, recv) in state["issued"].items():
            self.issue(key, (send.to(device), recv.to(device)))

    def _constant(self, direction: str, width: int) -> tuple[torch.Tensor, torch.Tensor]:
        send, recv = _sizes(self.graph, direction)
        device = self.graph.device
        return torch.full((sum(send),), width, device=device), torch.full((sum(recv),), width, device=device)

    def observe(self, layer: int, direction: str, received: torch.Tensor) -> None:
        pass

    def start_epoch(self, epoch: int) -> None:
        """Called before each training epoch (plans that change widths between epochs)."""


class FixedBits(_Plan):
    def __init__(self, bits: int, graph: LocalGraph) -> None:
        super().__init__(graph)
        self.width = bits

    def _initial(self, layer: int, direction: str) -> tuple[torch.Tensor, torch.Tensor]:
        return self._constant(direction, self.width)


def fixed_bits(bits: int, graph: LocalGraph) -> FixedBits | None:
    """Every message at ``bits``; None at 32 bits, where rows travel unencoded, without a plan."""
    return FixedBits(bits, graph) if bits < FULL else None


def rounding_generator(seed: int, comm: Communicator) -> torch.Generator:
    """The stochastic-rounding noise of this rank's quantized messages (seeded by
    the strategy's ``seed`` and the rank; the global RNG is left alone)."""
    return torch.Generator(device=comm.device).manual_seed(seed * 65_536 + comm.rank + 1)


class ChangeDrivenBits(_Plan):
    """PipeQS's widths (the authors' ``bit_assigner``): one width per layer and direction for all
    of its rows, starting at ``bits``. After each exchange that arrived, the width moves on the
    change of the messages since the previous ones (:meth:`adapt`): up one step of
    :data:`LADDER` where they changed by more than the threshold, down to its first step where the
    exchange before this one was skipped (its cached message used), unchanged otherwise. The
    authors' rule also has a branch that lowers the width, ``sigmoid(K d / q) < 0.5``, which never
    fires (``d > E > 0``): it is left out."""

    LADDER = (2, 4, 8, 32)

    def __init__(self, bits: int, graph: LocalGraph) -> None:
        super().__init__(graph)
        self.start = bits
        self.width: dict[Key, int] = {}

    def _initial(self, layer: int, direction: str) -> tuple[torch.Tensor, torch.Tensor]:
        return self._constant(direction, self.width.setdefault((layer, direction), self.start))

    def adapt(self, key: Key, changed: bool, after_skip: bool) -> None:
        """The next width of ``key``'s exchanges (class docstring)."""
        width = self.width.get(key, self.start)
        if after_skip and changed:
            width = self.LADDER[0]
        elif changed:
            width = self.LADDER[min(self.LADDER.index(width) + 1, len(self.LADDER) - 1)]
        if width != self.width.get(key, self.start):
            self.width[key] = width
            self.issue(key, self._constant(key[1], width))

    def state_dict(self) -> dict:
        return {**super().state_dict(), "width": self.width}

    def load_state_dict(self, state: dict) -> None:
        super().load_state_dict(state)
        self.width = dict(state["width"])


class UniformBits(_Plan):
    def __init__(self, seed: int, graph: LocalGraph) -> None:
        super().__init__(graph)
        self.seed = seed
        self.epoch = 0
        self.staging = PinnedStaging(graph.device)
        """Widths are drawn on the host (CPU generators: the same widths on every device)."""

    def start_epoch(self, epoch: int) -> None:
        self.epoch = epoch
        self.withdraw()

    def _draw(self, layer: int, direction: str, sender: int, receiver: int, n: int) -> torch.Tensor:
        """The widths of the ``n`` messages ``sender`` sends ``receiver`` (on the host)."""
        world = self.graph.world_size
        key = keyed.key(self.seed, self.epoch, layer, direction == "bwd", sender * world + receiver)
        choice = torch.randint(len(WIDTHS), (n,), generator=torch.Generator().manual_seed(key % (1 << 63)))
        return torch.tensor(WIDTHS)[choice]

    def _initial(self, layer: int, direction: str) -> tuple[torch.Tensor, torch.Tensor]:
        send, recv = _sizes(self.graph, direction)
        me = self.graph.rank
        return tuple(self.staging.to_device([
            torch.cat([self._draw(layer, direction, me, q, n) for q, n in enumerate(send)]),
            torch.cat([self._draw(layer, direction, q, me, n) for q, n in enumerate(recv)])]))


class AdaptiveBits(_Plan):
    def __init__(self, config: AdaQPConfig, graph: LocalGraph, comm: Communicator, model: MessagePassingModel) -> None:
        super().__init__(graph)
        self.comm = comm
        self.lam, self.group_size, self.gap = config.lambda_, config.group_size, config.assign_gap
        self.time_limit, self.normalize = config.solve_time_limit, config.normalize
        self.traced: dict[Key, torch.Tensor] = {}
        self.widths: dict[Key, int] = {}
        self.coefficients = self._coefficients(model)
        world = comm.world_size
        own = torch.zeros(world, 2, world)
        own[comm.rank] = torch.tensor([graph.recv_splits, graph.send_splits], dtype=torch.float32)
        self.splits = comm.all_reduce(own.to(comm.device), "assign").long().cpu()
        """``[rank, (halo rows from, rows sent to), peer]`` of every rank."""
        self.cost = self._profile()
        """``[receiver, sender, (theta s/bit, gamma s)]``."""
        self.solve_time = 0.0
        self.solve_gap = 0.0
        """The largest certified relative gap to the optimum of the last assignment's programs."""
        self.timed_out = 0
        """How many of the last assignment's programs ran into the time limit."""
        self.tracing = Stopwatch(comm.device)
        """Times computing the variance terms (its seconds since the epoch began: ``trace_time``)."""

    def _coefficients(self, model: MessagePassingModel) -> dict[Key, torch.Tensor]:
        """``c_k`` per layer and direction, in the order the messages arrive: forward, this
        rank's halo rows; backward, its sent rows (the halo holders' ``c_k``, exchanged once)."""
        graph = self.graph
        forward = torch.stack([conv.squared_weight_sums(graph)[graph.num_inner:] for conv in model.convs], dim=1)
        backward = self.comm.all_to_all_start(forward.float().contiguous(), graph.recv_splits, graph.send_splits,
                                              "assign").wait()
        return {**{(layer, "fwd"): forward[:, layer].float() for layer in range(forward.shape[1])},
                **{(layer, "bwd"): backward[:, layer] for layer in range(forward.shape[1])}}

    def _profile(self, sizes: tuple[int, ...] = (1 << 12, 1 << 16, 1 << 20), repeats: int = 3) -> torch.Tensor:
        """Fit ``time = theta * bits + gamma`` for every (sender -> receiver) pair from timed
        ring rounds: in round ``k`` each rank sends to the rank ``k`` places to its right. Each
        round is timed on the device's timeline (:mod:`gnntrain.timing.clock`): on NCCL a host clock
        around the wait would time the launch, not the transfer."""
        world, me, clock = self.comm.world_size, self.comm.rank, self.comm.clock
        cost = torch.zeros(world, world, 2, dtype=torch.float64)
        for k in range(1, world):
            right, left = (me + k) % world, (me - k) % world
            samples = []
            for size in sizes:
                send_splits = [size if q == right else 0 for q in range(world)]
                recv_splits = [size if q == left else 0 for q in range(world)]
                payload = torch.zeros(size, dtype=torch.uint8, device=self.comm.device)
                for _ in range(repeats):
                    start = clock.mark()
                    self.comm.all_to_all_start(payload, send_splits, recv_splits, "assign").wait()
                    samples.append((8.0 * size, clock.seconds(start, clock.mark())))
            bits, seconds = np.array(samples).T
            theta, gamma = np.polyfit(bits, seconds, 1)
            cost[me, left] = torch.tensor([max(theta, 1e-15), max(gamma, 0.0)])
        return self.comm.all_reduce(cost.to(self.comm.device), "assign").cpu()

    def _initial(self, layer: int, direction: str) -> tuple[torch.Tensor, torch.Tensor]:
        return self._constant(direction, WIDTHS[-1])

    def state_dict(self) -> dict:
        """Widths, traces and the profiled cost model (a timing, which a fresh profile would
        not reproduce)."""
        return {**super().state_dict(), "traced": self.traced, "widths": self.widths, "cost": self.cost}

    def load_state_dict(self, state: dict) -> None:
        super().load_state_dict(state)
        self.traced = {k: t.to(self.comm.device) for k, t in state["traced"].items()}
        self.widths, self.cost = dict(state["widths"]), state["cost"]

    @property
    def trace_time(self) -> float:
        """Seconds spent computing variance terms since the epoch began."""
        return self.tracing.seconds

    def observe(self, layer: int, direction: str, received: torch.Tensor) -> None:
        """Trace the rows' variance terms (kept on the device until :meth:`reassign`)."""
        with self.tracing:
            spread = received.amax(dim=1) - received.amin(dim=1) if received.numel() else received.new_zeros(0)
            coefficient = self.coefficients[layer, direction]
            self.traced[layer, direction] = coefficient * received.shape[1] * spread.float() ** 2 / 6
        self.widths[layer, direction] = received.shape[1]

    def _incoming(self, rank: int, direction: str) -> torch.Tensor:
        """Rows ``rank`` receives from each peer in ``direction``."""
        return self.splits[rank, 0 if direction == "fwd" else 1]

    def reassign(self) -> None:
        """Gather the traces on rank 0, solve, and hand every rank its widths (both ends)."""
        keys = sorted(self.traced)
        world, me = self.comm.world_size, self.comm.rank
        totals = [sum(int(self._incoming(r, d).sum()) for _, d in keys) for r in range(world)]
        beta = torch.cat([self.traced[k] for k in keys]).float().to(self.comm.device)
        at_root = self.comm.all_to_all_start(beta, [beta.numel() if q == 0 else 0 for q in range(world)],
                                             totals if me == 0 else [0] * world, "assign").wait()
        recv_bits = torch.zeros(0, dtype=torch.uint8, device=self.comm.device)
        if me == 0:
            traces = at_root.cpu().split(totals)
            start = time.perf_counter()
            solved = self._solve(keys, traces)
            self.solve_time = time.perf_counter() - start
            recv_bits = torch.cat(solved).to(self.comm.device)
        mine = self.comm.all_to_all_start(recv_bits, totals if me == 0 else [0] * world,
                                          [totals[me] if q == 0 else 0 for q in range(world)], "assign").wait()
        blocks = mine.split([int(self._incoming(me, d).sum()) for _, d in keys])
        received = {k: b.split(_sizes(self.graph, k[1])[1]) for k, b in zip(keys, blocks)}
        sent_sizes = {k: _sizes(self.graph, k[1])[0] for k in keys}
        # receivers tell each sender the widths of the messages it sends them (peer-major, key by key)
        outgoing = torch.cat([received[k][q] for q in range(world) for k in keys] or [mine[:0]])
        incoming_from = self.comm.all_to_all_start(
            outgoing, [sum(len(received[k][q]) for k in keys) for q in range(world)],
            [sum(sent_sizes[k][q] for k in keys) for q in range(world)], "assign").wait()
        pieces = iter(incoming_from.split([sent_sizes[k][q] for q in range(world) for k in keys]))
        sent: dict[Key, list[torch.Tensor]] = {k: [] for k in keys}
        for q in range(world):
            for k in keys:
                sent[k].append(next(pieces))
        for k, block in zip(keys, blocks):
            self.issue(k, (torch.cat(sent[k]).long(), block.long()))

    def _solve(self, keys: list[Key], traces: tuple[torch.Tensor, ...]) -> list[torch.Tensor]:
        """Rank 0: every rank's received widths, in the order of its traces; the problems of
        the layers and directions solved concurrently."""
        world = self.comm.world_size
        offsets = [0] * world
        problems = []
        for layer, direction in keys:
            pairs, slots = [], []
            for r in range(world):
                counts = self._incoming(r, direction).tolist()
                block = traces[r][offsets[r]: offsets[r] + sum(counts)]
                offsets[r] += sum(counts)
                for q, part in enumerate(block.split(counts)):
                    if part.numel():
                        groups = group_messages(part.double().numpy(), self.group_size)
                        theta, gamma = self.cost[r, q].tolist()
                        pairs.append(PairGroups(np.array([part[g].sum().item() for g in groups]),
                                                np.array([len(g) * self.widths[layer, direction] for g in groups],
                                                         dtype=float), theta, gamma, round=(r - q) % world))
                        slots.append((r, q, groups))
            problems.append((direction, pairs, slots))
        with ThreadPoolExecutor(max_workers=max(len(problems), 1)) as pool:
            timed = list(pool.map(lambda p: self._assign(p[1]), problems))
        solved = [assignment for assignment, _ in timed]
        self.comm.clock.charge(sum(cpu for _, cpu in timed))
        self.solve_gap = max((a.gap for a in solved), default=0.0)
        self.timed_out = sum(a.timed_out for a in solved)
        per_rank: list[list[torch.Tensor]] = [[] for _ in range(world)]
        for (direction, _, slots), assignment in zip(problems, solved):
            blocks = [torch.zeros(int(self._incoming(r, direction).sum()), dtype=torch.uint8) for r in range(world)]
            for (r, q, groups), group_bits in zip(slots, assignment.bits):
                start = int(self._incoming(r, direction)[:q].sum())
                for g, b in zip(groups, group_bits):
                    blocks[r][start + torch.from_numpy(g)] = int(b)
            for r in range(world):
                per_rank[r].append(blocks[r])
        return [torch.cat(blocks) if blocks else torch.zeros(0, dtype=torch.uint8) for blocks in per_rank]

    def _assign(self, pairs: list[PairGroups]) -> tuple[Assignment, float]:
        """The assignment, and the CPU seconds its thread took (the virtual clock's compute)."""
        start = time.thread_time()
        assignment = assign_bits(pairs, self.lam, self.gap, self.time_limit, self.normalize)
        return assignment, time.thread_time() - start
