"""AdaQP (Wan et al., MLSys 2023): graph parallelism whose halo exchanges are quantized.

Every layer's forward (features) and backward (gradients) halo exchange is synchronous, as in
the vanilla strategy, but each message row travels as stochastic integer codes
(:mod:`gnntrain.comm.quantize`; unbiased, Theorem 1) at the bit-width the plan assigns
(:mod:`.bit_plans`): ``strategy.assign=fixed`` (``strategy.bits``, 32 = unquantized),
``uniform`` (random over {2, 4, 8} per message and epoch, Table 6's baseline) or ``adaptive`` (the
variance-time MILP every ``strategy.period`` epochs, weight ``strategy.lambda_``, groups of
``strategy.group_size`` messages, solved to within ``strategy.assign_gap`` of its optimum).
Evaluation exchanges full-precision rows.

Per epoch it reports ``mean_bits`` (over all message rows sent, both directions) and, with
adaptive widths, ``assign_time`` (gathering the traces, solving and distributing the widths;
slowest rank; 0 on epochs that keep the widths, so its mean is the cost per epoch) and
``trace_time`` (computing the variance terms of the rows received). Epochs that reassign add
``reassign_time`` (their ``assign_time``, so its mean is the cost per reassignment),
``solve_time`` (rank 0's solves, run concurrently), ``gather_time`` (the rest: gathering the
traces and handing out the widths), ``assign_gap`` (the largest certified relative gap of the
solves to the MILP optimum) and ``assign_timeouts`` (how many ran into
``strategy.solve_time_limit``).

``strategy.overlap=true`` is the central/marginal split of Sec. 3.4: each layer starts its
exchange, computes the rows of the central nodes (no halo in-neighbour) while the halo is in
flight, then those of the marginal nodes; the backward pass sends the halo gradients first and
waits for the boundary gradients after the central rows' backward. Rows and bytes are those of
the synchronous exchange, and so are the results up to float rounding
(:mod:`gnntrain.strategies.graph_parallel.overlap`).
"""

from __future__ import annotations

from gnntrain.timing.clock import Stopwatch
from gnntrain.comm.communicator import Communicator
from gnntrain.comm.quantized_exchange import ALL_WIDTHS
from gnntrain.data.local_graph import LocalGraph
from gnntrain.models.gnn import HaloSource, MessagePassingModel
from gnntrain.parallel.halo import HaloExchange
from gnntrain.strategies.base import Tallies
from gnntrain.strategies.graph_parallel.bit_plans import AdaptiveBits, UniformBits, fixed_bits, rounding_generator
from gnntrain.strategies.graph_parallel.config import AdaQPConfig
from gnntrain.strategies.graph_parallel.overlap import OverlappedHaloExchange
from gnntrain.strategies.graph_parallel.strategy import HaloPolicy, halo_wire


def make_plan(config: AdaQPConfig, graph: LocalGraph, comm: Communicator, model: MessagePassingModel):
    """The bit plan ``config.assign`` names; None for fixed 32 bits (rows go unencoded)."""
    if config.assign == "fixed":
        return fixed_bits(config.bits, graph)
    if config.assign == "uniform":
        return UniformBits(config.seed, graph)
    return AdaptiveBits(config, graph, comm, model)


class Quantized(HaloPolicy):
    def __init__(self, config: AdaQPConfig, graph: LocalGraph, comm: Communicator, model: MessagePassingModel) -> None:
        self.graph, self.comm = graph, comm
        self.plan = make_plan(config, graph, comm, model)
        self.period = config.period
        exchange = OverlappedHaloExchange if config.overlap else HaloExchange
        self.exchange = exchange(graph, comm, self.plan, rounding_generator(config.seed, comm), halo_wire(config))
        self.full = HaloExchange(graph, comm)
        self.assigning = Stopwatch(graph.device)
        """Times the epoch's reassignment of widths (adaptive widths only)."""

    def training_view(self, epoch: int) -> tuple[LocalGraph, HaloSource]:
        if self.plan is not None:
            self.plan.start_epoch(epoch)
        if isinstance(self.plan, AdaptiveBits):
            self.plan.solve_time = self.plan.solve_gap = 0.0
            self.plan.timed_out = 0
            self.plan.tracing.reset()
            self.assigning.reset()
            if epoch > 1 and (epoch - 1) % self.period == 0:
                with self.assigning:
                    self.plan.reassign()
        return self.graph, self.exchange

    def evaluation_halo(self) -> HaloSource:
        return self.full

    def epoch_tallies(self) -> Tallies:
        if self.plan is None:
            return Tallies()
        counts = [row for key in self.plan.issued for row in self.plan.layouts(*key)[0].counts]
        tallies = Tallies(summed={"sent_bits": float(sum(n * w for row in counts for n, w in zip(row, ALL_WIDTHS))),
                                  "sent_rows": float(sum(sum(row) for row in counts))})
        if isinstance(self.plan, AdaptiveBits):
            tallies.peak = {"assign_time": self.assigning.seconds, "trace_time": self.plan.trace_time,
                            "solve_time": self.plan.solve_time, "assign_gap": self.plan.solve_gap,
                            "assign_timeouts": float(self.plan.timed_out)}
        return tallies

    def epoch_metrics(self, totals: dict[str, float]) -> dict[str, float]:
        """``mean_bits`` of the rows sent in an epoch; with adaptive widths ``assign_time``,
        ``trace_time``, and where the epoch reassigned ``solve_time``, ``gather_time``,
        ``assign_gap`` and ``assign_timeouts`` (each the slowest rank's)."""
        if self.plan is None:
            return {"mean_bits": 32.0}
        metrics = {"mean_bits": totals["sent_bits"] / totals["sent_rows"]} if totals["sent_rows"] else {}
        if isinstance(self.plan, AdaptiveBits):
            assign = totals["assign_time"]
            metrics.update(assign_time=assign, trace_time=totals["trace_time"])
            if assign > 0:
                metrics.update(reassign_time=assign, solve_time=totals["solve_time"],
                               gather_time=assign - totals["solve_time"], assign_gap=totals["assign_gap"],
                               assign_timeouts=totals["assign_timeouts"])
        return metrics

    def state_dict(self) -> dict:
        return {"generator": self.exchange.generator.get_state(),
                "plan": None if self.plan is None else self.plan.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        self.exchange.generator.set_state(state["generator"])
        if self.plan is not None:
            self.plan.load_state_dict(state["plan"])
