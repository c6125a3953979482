"""The graph-parallel family's declarations: its schemas (the one every method's extends, and the
one with 16-bit halos that the built-in methods extend), each built-in method's config, checks
and memory beyond the baseline, and the family with its methods registered. Nothing here imports
torch: the implementations are named (``"module:Class"``) and imported when a job builds them.

* ``vanilla``: :mod:`.synchronous`;
* ``pipegcn``: :mod:`.stale`;
* ``bns``, ``bes``, ``dropedge``: :mod:`.sampled`;
* ``adaqp``: :mod:`.quantized`;
* ``pipeqs``: :mod:`.cached_stale`;
* ``granndis``: :mod:`.preloaded` (its ranks' graphs: :mod:`gnntrain.data.preloading`);
* ``sylvie``: :mod:`.bounded_stale`;
* ``broadcast``, ``sancus``: :mod:`.broadcast`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from gnntrain.config.schema import RUN_SEED, StrategyConfig, check, choices
from gnntrain.errors import ConfigError
from gnntrain.cost.rank_shape import RankShape
from gnntrain.strategies.registry import Family, Method, register

PACKAGE = "gnntrain.strategies.graph_parallel"

FAMILY = Family("graph_parallel", baseline="vanilla", module=PACKAGE, runs=f"{PACKAGE}.strategy:GraphParallel")
"""Graph parallelism; its baseline, which network calibration probes, is synchronous graph parallelism."""

HaloDtype = choices("HaloDtype", "bfloat16", "float16", module=__name__)
"""The 16-bit formats a halo row may travel in (torch's dtypes of those names)."""


@dataclass
class GraphParallelConfig(StrategyConfig):
    """Graph parallelism: every graph-parallel method's schema extends it (directly where the
    method sends its training halos its own way, as a compression plugin does)."""


@dataclass
class HalfHalosConfig(GraphParallelConfig):
    """Graph parallelism whose training halos go through the family's halo exchanges
    (:class:`~gnntrain.parallel.halo.HaloExchange` built with
    :func:`~gnntrain.strategies.graph_parallel.strategy.halo_wire`), so that
    ``strategy.halo_dtype`` sets their format: ``vanilla``'s, and the schema every built-in
    graph-parallel method extends. A method that sends its training halos otherwise extends
    :class:`GraphParallelConfig`, so that the key is neither offered (``--help``) nor accepted."""

    halo_dtype: Optional[HaloDtype] = None
    """Format of the training halo rows on the wire, both directions: null (train.dtype), bfloat16 or float16."""


QUANTIZED_WIDTHS = (2, 4, 8, 32)
"""The halo message widths AdaQP's codec sends (32: unquantized)."""


def check_bits(bits: int, widths: tuple[int, ...] = QUANTIZED_WIDTHS) -> None:
    """``strategy.bits`` is one of ``widths`` the codec sends (:mod:`gnntrain.comm.quantize`)."""
    check("strategy.bits", bits, bits in widths, f"one of {', '.join(map(str, widths))}")


def check_one_halo_format(config: HalfHalosConfig, assign: str, bits: int) -> None:
    """16-bit halos and quantized ones exclude each other: a method that quantizes its halos
    (``assign`` other than fixed, or ``bits`` below 32) refuses ``strategy.halo_dtype``."""
    if config.halo_dtype is not None and (assign != "fixed" or bits != 32):
        raise ConfigError(f"strategy.halo_dtype={config.halo_dtype} with quantized halos (strategy.assign={assign}, "
                          f"strategy.bits={bits}) is ambiguous; valid: halo_dtype=null, or assign=fixed with bits=32")


TIMING_MODELS = f"{PACKAGE}.timing_model"
register(Method("vanilla", FAMILY, f"{PACKAGE}.synchronous:Synchronous", HalfHalosConfig,
                timing_model=f"{TIMING_MODELS}:synchronous"))


Smoothing = choices("Smoothing", "none", "f", "g", "gf", module=__name__)
SmoothingStart = choices("SmoothingStart", "zero", "first", module=__name__)


@dataclass
class PipeGCNConfig(HalfHalosConfig):
    """PipeGCN: halo exchanges one epoch stale, overlapped with compute."""

    smooth: Smoothing = Smoothing.none
    """Smooth the stale boundary features (f), gradients (g), both (gf) or none."""
    gamma: float = 0.95
    """Weight of the smoothing's moving average."""
    smooth_start: SmoothingStart = SmoothingStart.zero
    """Where the moving average starts: zero (the authors' helper/feature_buffer.py) or the first value received."""
    track_staleness_error: bool = False
    """Log the per-layer error of the stale values against fresh ones (costs an extra exchange)."""
    bits: int = 32
    """Width of the stale halo messages: 32 (unquantized) or 2/4/8 (AdaQP's codec)."""
    seed: int = RUN_SEED
    """Seed of the quantization's stochastic rounding."""


def validate_pipegcn(config: PipeGCNConfig) -> None:
    """The smoothing weight and the stale messages' width in their ranges; 16-bit halos only unquantized."""
    check_one_halo_format(config, "fixed", config.bits)
    check("strategy.gamma", config.gamma, 0.0 <= config.gamma < 1.0, "in [0, 1)")
    check_bits(config.bits)


def in_flight_bytes(config: PipeGCNConfig, shape: RankShape) -> float:
    """What a PipeGCN rank keeps beyond the vanilla strategy (:attr:`Method.memory`): every
    layer's exchanges stay in flight for a whole epoch in both directions, each holding its sent
    rows and the buffer its rows arrive in: ``2 (H + S) sum_l d_l`` values for ``H`` halo rows,
    ``S`` sent rows and layer input widths ``d_l``; smoothing keeps the moving averages besides
    (``H sum_l d_l`` for the features, ``S sum_l d_l`` for the gradients). Quantized messages
    (``bits`` < 32) are counted at full width: an upper bound."""
    rows = 2 * (shape.halo + shape.sent)
    rows += shape.halo * (config.smooth in ("f", "gf")) + shape.sent * (config.smooth in ("g", "gf"))
    return rows * sum(shape.widths) * shape.value_bytes


register(Method("pipegcn", FAMILY, f"{PACKAGE}.stale:Stale", PipeGCNConfig, kinds={"assign": "control"},
                validate=validate_pipegcn, memory=in_flight_bytes, timing_model=f"{TIMING_MODELS}:stale"))


@dataclass
class SylvieConfig(PipeGCNConfig):
    """Sylvie: 1-bit halo messages, pipelined one epoch stale, with a bound on the staleness."""

    bits: int = 1
    """Width of the halo messages, both directions: 1 (Sylvie's), 2, 4, 8 or 32 (unquantized)."""
    sync_every: int = 10
    """Bounded staleness: every sync_every-th epoch exchanges fresh halos and waits for them (1: every epoch, no staleness)."""


SYLVIE_WIDTHS = (1, *QUANTIZED_WIDTHS)


def validate_sylvie(config: SylvieConfig) -> None:
    """PipeGCN's checks with the 1-bit width besides AdaQP's; the staleness bound at least one epoch."""
    check_one_halo_format(config, "fixed", config.bits)
    check("strategy.gamma", config.gamma, 0.0 <= config.gamma < 1.0, "in [0, 1)")
    check_bits(config.bits, SYLVIE_WIDTHS)
    check("strategy.sync_every", config.sync_every, config.sync_every >= 1, ">= 1")


register(Method("sylvie", FAMILY, f"{PACKAGE}.bounded_stale:BoundedStale", SylvieConfig, validate=validate_sylvie,
                memory=in_flight_bytes, timing_model=f"{TIMING_MODELS}:bounded_stale"))


PipeQSAssignment = choices("PipeQSAssignment", "change", "fixed", module=__name__)


@dataclass
class PipeQSConfig(PipeGCNConfig):
    """PipeQS: PipeGCN's stale pipeline with widths that follow the messages' change and a cache of the last message."""

    bits: int = 2
    """Width of the first messages (assign=change) or of all (assign=fixed): 2, 4, 8 or 32 (unquantized)."""
    assign: PipeQSAssignment = PipeQSAssignment.change
    """How the widths are picked: change (a step up where the messages changed by more than the threshold, the authors' rule) or fixed (bits)."""
    threshold: float = 0.1
    """Change, (1 - cos) / 2 of the last two messages of a layer, up to which the cache stands in for the exchange in flight (the authors' E)."""
    cache: bool = True
    """Use the last message received while the messages change little, posting no exchange."""
    max_skips: int = 1
    """Epochs in a row a layer may use its cache (a message is at most max_skips + 1 epochs old)."""
    pipeline: bool = True
    """Overlap each exchange with the next epoch (false: wait where posted, at the starting width, no cache)."""


def validate_pipeqs(config: PipeQSConfig) -> None:
    """The widths AdaQP's codec sends from the authors' ladder; the threshold a change, the skips at least one."""
    check_one_halo_format(config, str(config.assign) if config.assign == "change" else "fixed", config.bits)
    check("strategy.gamma", config.gamma, 0.0 <= config.gamma < 1.0, "in [0, 1)")
    check_bits(config.bits)
    check("strategy.threshold", config.threshold, 0.0 <= config.threshold <= 1.0, "in [0, 1]")
    check("strategy.max_skips", config.max_skips, config.max_skips >= 1, ">= 1")


register(Method("pipeqs", FAMILY, f"{PACKAGE}.cached_stale:CachedStale", PipeQSConfig, kinds={"change": "control"},
                validate=validate_pipeqs, memory=in_flight_bytes, timing_model=f"{TIMING_MODELS}:cached_stale"))


@dataclass
class SamplingConfig(HalfHalosConfig):
    """BNS-GCN (``bns``) and its edge-sampling baselines (``bes``, ``dropedge``)."""

    p: float = 0.1
    """Keep each boundary node with this probability (the baselines drop as many edges as that drops)."""
    seed: int = RUN_SEED
    """Seed of the per-epoch samples."""


def validate_sampling(config: SamplingConfig) -> None:
    """The keep probability is a probability."""
    check("strategy.p", config.p, 0.0 <= config.p <= 1.0, "in [0, 1]")


SAMPLED_GRAPH_BYTES_PER_EDGE = 20.0
"""Bytes per in-edge a sampling rank's peak lies above the vanilla strategy's, measured on ``make
scale``'s ladder (10-30 at ``p = 0.1``). It holds 5 bytes per in-edge for the whole run (the cut
flags and the edge weights) and, during an epoch, its sampled graph: edge lists and weights (20
bytes per kept in-edge) and the matrices built from them; vanilla's peak is set while its
matrices are sorted, before training, which covers most of the rest."""


def sampled_graph_bytes(config: SamplingConfig, shape: RankShape) -> float:
    """What a sampling rank keeps beyond the vanilla strategy (:attr:`Method.memory`): nothing at
    ``p = 1`` (no sampling), otherwise :data:`SAMPLED_GRAPH_BYTES_PER_EDGE` per in-edge."""
    return 0.0 if config.p >= 1.0 else SAMPLED_GRAPH_BYTES_PER_EDGE * shape.edges


for _name in ("bns", "bes", "dropedge"):
    register(Method(_name, FAMILY, f"{PACKAGE}.sampled:BoundarySampling", SamplingConfig,
                    kinds={"sample_index": "control"}, validate=validate_sampling, memory=sampled_graph_bytes,
                    timing_model=f"{TIMING_MODELS}:sampled"))


BitAssignment = choices("BitAssignment", "adaptive", "uniform", "fixed", module=__name__)


@dataclass
class AdaQPConfig(HalfHalosConfig):
    """AdaQP: quantized halo messages with adaptively assigned bit-widths."""

    assign: BitAssignment = BitAssignment.adaptive
    """How the per-message bit-widths are picked: adaptive (the variance-time MILP), uniform (random over 2, 4, 8) or fixed."""
    bits: int = 8
    """The width under assign=fixed: 2, 4, 8 or 32 (unquantized)."""
    period: int = 50
    """Epochs between adaptive re-assignments."""
    group_size: int = 100
    """Messages per group that share one bit-width in the assignment."""
    lambda_: float = 0.5
    """Weight of the variance term against the time term in the assignment's objective (Eq. 12)."""
    normalize: bool = False
    """Divide the objective's two terms by their worst cases (false: the paper's raw terms, variance and seconds)."""
    assign_gap: float = 0.01
    """Largest relative gap to the MILP optimum an assignment may have (0 solves it exactly by branch and bound)."""
    solve_time_limit: float = 10.0
    """Seconds of branch and bound per problem; then the best plan found (at worst the rounded relaxation)."""
    overlap: bool = False
    """Compute the central nodes while the marginal nodes' halo rows are in flight."""
    seed: int = RUN_SEED
    """Seed of the stochastic rounding and the uniform assignment."""


def validate_adaqp(config: AdaQPConfig) -> None:
    """The assignment's keys in their ranges; 16-bit halos only where no halo is quantized."""
    check_one_halo_format(config, config.assign, config.bits)
    check_bits(config.bits)
    for key, ok, rule in (("period", config.period >= 1, ">= 1"), ("group_size", config.group_size >= 1, ">= 1"),
                          ("lambda_", 0.0 <= config.lambda_ <= 1.0, "in [0, 1]"),
                          ("solve_time_limit", config.solve_time_limit > 0, "> 0"),
                          ("assign_gap", 0.0 <= config.assign_gap < 1.0, "in [0, 1)")):
        check(f"strategy.{key}", getattr(config, key), ok, rule)


register(Method("adaqp", FAMILY, f"{PACKAGE}.quantized:Quantized", AdaQPConfig, kinds={"assign": "control"},
                validate=validate_adaqp, timing_model=f"{TIMING_MODELS}:quantized"))


@dataclass
class BroadcastConfig(GraphParallelConfig):
    """Broadcast training: every rank sends its whole partition's rows of each layer input to every peer."""


@dataclass
class SancusConfig(BroadcastConfig):
    """Sancus: a rank skips its broadcast while its rows changed little since the last one."""

    threshold: float = 0.1
    """Skip while the rows' relative change since the last broadcast (Frobenius) is below this (0: never skip)."""
    max_staleness: int = 4
    """Broadcast at least every max_staleness epochs, however little the rows changed."""


def validate_sancus(config: SancusConfig) -> None:
    check("strategy.threshold", config.threshold, config.threshold >= 0.0, ">= 0")
    check("strategy.max_staleness", config.max_staleness, config.max_staleness >= 1, ">= 1")


def cached_halo_bytes(config: BroadcastConfig, shape: RankShape) -> float:
    """What a broadcasting rank keeps beyond the vanilla strategy (:attr:`Method.memory`): per layer
    its cached halo rows (``H d_l`` values) and, skipping (Sancus), the rows it last broadcast
    (``I d_l``); the blocks that arrive are picked from and dropped layer by layer."""
    rows = shape.halo + (shape.inner if isinstance(config, SancusConfig) and config.threshold > 0 else 0)
    return rows * sum(shape.widths) * shape.value_bytes


BROADCAST_KINDS = {"bcast_fwd": "data"}
register(Method("broadcast", FAMILY, f"{PACKAGE}.broadcast:Broadcast", BroadcastConfig, kinds=BROADCAST_KINDS,
                memory=cached_halo_bytes, timing_model=f"{TIMING_MODELS}:broadcast"))
register(Method("sancus", FAMILY, f"{PACKAGE}.broadcast:Sancus", SancusConfig,
                kinds={**BROADCAST_KINDS, "skip_flags": "control"}, validate=validate_sancus,
                memory=cached_halo_bytes, timing_model=f"{TIMING_MODELS}:broadcast"))


@dataclass
class GraNNDisConfig(HalfHalosConfig):
    """GraNNDis: every server (node of the cluster) holds its vertices' dependencies, so halo rows move only within a server."""

    hops: Optional[int] = None
    """Hops of dependencies a server preloads: null, the model's layers (every dependency: no halo crosses servers); fewer truncates the expansion there, as the authors' artifact does."""
    rate: float = 1.0
    """Expansion-aware sampling: keep each in-edge from outside the server with this probability, weighted 1/rate, drawn once before training (1: keep all)."""
    fanout: Optional[int] = None
    """Cooperative batching: a server's ranks train one co-batch, its training vertices and up to fanout sampled in-neighbours per vertex and hop (null: full-batch preloading)."""
    seed: int = RUN_SEED
    """Seed of the expansion's and the co-batch's samples."""


def validate_granndis(config: GraNNDisConfig) -> None:
    """The hops at least one, the rate a probability above 0, the fanout at least one and not beside a rate."""
    if config.hops is not None:
        check("strategy.hops", config.hops, config.hops >= 1, ">= 1 or null")
    check("strategy.rate", config.rate, 0.0 < config.rate <= 1.0, "in (0, 1]")
    if config.fanout is not None:
        check("strategy.fanout", config.fanout, config.fanout >= 1, ">= 1 or null")
        check("strategy.rate", config.rate, config.rate == 1.0, "1 with strategy.fanout (a co-batch samples its own)")


register(Method("granndis", FAMILY, f"{PACKAGE}.synchronous:Synchronous", GraNNDisConfig, validate=validate_granndis,
                runs=f"{PACKAGE}.preloaded:ServerPreloading", timing_model=f"{TIMING_MODELS}:preloaded"))
