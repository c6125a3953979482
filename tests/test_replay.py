"""Traces and replay (:mod:`gnntrain.timing.trace`, :mod:`gnntrain.timing.replay`,
``gnntrain-replay``): a trace replayed under its own network repeats its run's times exactly, and
under another network equals a virtual-clock rerun there within 3%."""

from __future__ import annotations

import dataclasses
import json
import re
from dataclasses import replace
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import train_records
from gnntrain.cost.compute import Costs
from gnntrain.cost.profile import DeviceProfile
from gnntrain.cost.shape import partition_shape
from gnntrain.engine.metrics import read_records
from gnntrain.errors import GnntrainError
from gnntrain.job import api
from gnntrain.predict.predictor import predicted, written
from gnntrain.strategies import method
from gnntrain.timing.epoch import EpochTiming
from gnntrain.timing.cluster import Link, Topology
from gnntrain.timing.replay import replay
from gnntrain.timing import trace
from gnntrain.job.api import network_of
from gnntrain.report.traced import Traced
from gnntrain.commands.replay import main as replay_main
from gnntrain.repro.paper import Curve
from gnntrain.repro.replayed import (
    FASTEST, HIGHEST_SHARE, MARGIN, POINTS, SEPARATE, SLOWEST, Replayer, above_bounds, at_share, paper_point,
    rounds_curve, traced_jobs, traced_runs,
)

COMMON = ("dataset.num_nodes=1500", "dataset.avg_degree=8", "train.epochs=10", "train.warmup_epochs=2",
          "model=sage", "model.hidden=32", "cluster.world_size=2", "cluster.clock=virtual", "network=eth10g")
METHODS = {"vanilla": ["strategy=vanilla"], "pipegcn": ["strategy=pipegcn"],
           "gnnpipe": ["strategy=gnnpipe", "strategy.chunks=4", "model.layers=4"]}


@pytest.fixture(scope="module")
def traced(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Vanilla, PipeGCN and GNNPipe traced on a 10 Gbit/s link."""
    root = tmp_path_factory.mktemp("traced")
    for name, overrides in METHODS.items():
        train_records(root / name, *COMMON, *overrides, "cluster.trace=true")
    return {name: root / name for name in METHODS}


UNIT = DeviceProfile("unit", 1e-6, (1e-11,) * 4, (1e-10,) * 4, 1e-10, 1e-10, 16.0)
"""Any device profile: the prediction's type and traffic are checked here, not its seconds."""


def assert_same_timing(live: EpochTiming, replayed: EpochTiming, name: str) -> None:
    """Every field of two timings of one epoch equal (to float tolerance), their clocks aside."""
    for field in dataclasses.fields(EpochTiming):
        if field.name == "clock":
            continue
        mine, theirs = getattr(live, field.name), getattr(replayed, field.name)
        if isinstance(mine, dict):
            keys = set(mine) | set(theirs)
            mine, theirs = [mine.get(k, 0.0) for k in sorted(keys)], [theirs.get(k, 0.0) for k in sorted(keys)]
        assert theirs == pytest.approx(mine, rel=1e-6, abs=1e-9), f"{name} epoch {live.epoch}: {field.name}"


def test_live_replayed_and_predicted_epochs_are_one_type_and_live_equals_replayed(traced: dict[str, Path]) -> None:
    """Vanilla, PipeGCN and GNNPipe, each run live under the virtual clock, replayed under its own
    cluster and predicted: three EpochTimings; the replay of each epoch equals the run's own
    record in every field (wait, transfer and hidden per category and per kind, compute, each
    rank's epoch and compute, bytes per kind)."""
    for name, run_dir in traced.items():
        run = Traced(run_dir)
        live = [r.timing(run.summary.clock) for r in read_records(run_dir / "metrics.jsonl")]
        replayed = run.under(network_of(run.summary.network, []))
        assert [e.epoch for e in replayed] == [e.epoch for e in live]
        for mine, theirs in zip(live, replayed):
            assert_same_timing(mine, theirs, name)
        if name == "pipegcn":  # its stale exchanges move while it computes
            assert sum(e.hidden_by_kind["halo_fwd"] for e in replayed) > sum(e.exposed("halo_fwd") for e in replayed)
        config = api.check(api.compose([*COMMON, *METHODS[name]]))
        shape = partition_shape(config, method(config.strategy.name).strategy.layout(config, 2).parts)
        prediction = predicted(written(config, shape, Costs(config, shape.features, shape.classes, UNIT)),
                               Topology.of(config.network))
        assert {type(x) for x in (live[-1], replayed[-1], prediction)} == {EpochTiming}
        assert (live[-1].clock, replayed[-1].clock, prediction.clock) == ("virtual", "replayed", "predicted")


@pytest.mark.parametrize("name", [pytest.param(n, marks=[] if n == "vanilla" else pytest.mark.slow)
                                  for n in sorted(METHODS)])
def test_a_replay_under_another_network_equals_a_rerun_there(traced: dict[str, Path], name: str,
                                                             tmp_path: Path) -> None:
    """At 1/1000 of the bandwidth, where most of the epoch is communication (compute varies by
    up to 20% between epochs and runs on this 2-core host): the replayed mean epoch within 3% of a rerun's."""
    slower = ["network.bandwidth_gbps=0.01"]
    run = Traced(traced[name])
    replayed = run.steady(run.under(network_of(run.summary.network, slower))).epoch_time
    rerun = train_records(tmp_path / "rerun", *COMMON, *METHODS[name], *slower)
    steady = [r["epoch_time"] for r in rerun if r["epoch"] > 2]
    assert replayed == pytest.approx(sum(steady) / len(steady), rel=0.03)
    assert replayed > 2 * run.steady(run.under(network_of(run.summary.network, []))).epoch_time


PRESETS = {
    "measured_tcp_0g2": ("vanilla", 2, "modelled link: 0.02 Gbit/s, 10.56 us latency, 26/26 us per message "
                                       "(send/receive); from preset measured_tcp_0g2"),
    "eth25g": ("pipegcn", 2, "modelled link: 0.02 Gbit/s, 10 us latency, 3/3 us per message (send/receive); from "
                             "preset eth25g"),
    "two_level": ("vanilla", 4, "modelled link: 0.02 Gbit/s, 20 us latency, 3/3 us per message (send/receive) between "
                                "nodes; 96 Gbit/s, 5 us within (2 workers per node); from preset two_level"),
}
"""Per cluster preset replay is checked under: the traced method, its ranks and what replay's
console names the cluster by (two_level: its nodes of 2 ranks, the slow level between them)."""


@pytest.mark.parametrize("preset", [pytest.param(p, marks=[] if p == "measured_tcp_0g2" else pytest.mark.slow)
                                    for p in PRESETS])
def test_a_preset_given_to_replay_describes_the_cluster_as_for_a_run(traced: dict[str, Path], tmp_path: Path,
                                                                      capfd: pytest.CaptureFixture,
                                                                      preset: str) -> None:
    """``gnntrain-replay RUN network=<preset> network.bandwidth_gbps=0.02`` of a run traced on
    eth10g: the preset's own links (its latency and host costs, and two_level's second level, not
    the run's eth10g ones), then the override, so the label and the figures are the preset's; equal
    to a fresh virtual run given the same within 3% (at 0.02 Gbit/s between nodes the link
    dominates the epoch). Three presets, one of them two-level (4 ranks on 2 nodes)."""
    name, world, label = PRESETS[preset]
    cluster = [f"network={preset}", "network.bandwidth_gbps=0.02"]
    common = [c for c in COMMON if not c.startswith("cluster.world_size=")] + [f"cluster.world_size={world}"]
    run_dir = traced[name]
    if world != 2:
        run_dir = tmp_path / "traced"
        train_records(run_dir, *common, *METHODS[name], "cluster.trace=true")
    out = tmp_path / "replayed.json"
    replay_main([str(run_dir), *cluster, "--json", str(out)])
    assert label in capfd.readouterr().out
    replayed = json.loads(out.read_text())["replayed"]["epoch_time"]
    rerun = train_records(tmp_path / "rerun", *(c for c in common if not c.startswith("network=")),
                          *METHODS[name], *cluster)
    steady = [r["epoch_time"] for r in rerun if r["epoch"] > 2]
    assert replayed == pytest.approx(sum(steady) / len(steady), rel=0.03)


def test_the_trace_opens_in_perfetto_as_one_track_per_rank(traced: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "trace.json"
    replay_main([str(traced["vanilla"]), "--chrome", str(out)])
    events = json.loads(out.read_text())["traceEvents"]
    assert {e["pid"] for e in events} == {0, 1}
    spans = [e for e in events if e["ph"] == "X"]
    assert {e["name"] for e in spans} >= {"forward layer 0", "forward layer 1", "backward", "optimizer step",
                                          "epoch 10", "halo_fwd (exchange)", "allreduce (ring)"}
    assert all(e["dur"] >= 0 for e in spans)


def test_every_compute_span_is_named_by_layer_direction_and_phase(traced: dict[str, Path], tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture) -> None:
    """A 2-layer model's trace names its forward and backward compute per layer and, inside them,
    the halo exchange's packing; GNNPipe's names the chunk a stage computes; replay's text gives
    the compute per phase."""
    out = tmp_path / "trace.json"
    replay_main([str(traced["vanilla"]), "--chrome", str(out)])
    names = {e["name"] for e in json.loads(out.read_text())["traceEvents"] if e["ph"] == "X"}
    assert {"forward layer 0", "forward layer 1", "backward layer 0", "backward layer 1",
            "forward layer 0: halo pack", "forward layer 1: halo pack", "backward layer 1: halo unpack"} <= names
    assert "backward layer 0: halo unpack" not in names, "the features' halo carries no gradient back"
    replay_main([str(traced["gnnpipe"]), "--chrome", str(out)])
    names = {e["name"] for e in json.loads(out.read_text())["traceEvents"] if e["ph"] == "X"}
    assert any(n.startswith("chunk ") and ": forward layer" in n for n in names)
    assert any(n.startswith("chunk ") and ": backward layer" in n for n in names)
    capsys.readouterr()
    replay_main([str(traced["vanilla"])])
    printed = capsys.readouterr().out
    assert "compute by phase" in printed and "backward layer 1" in printed


def test_a_bandwidth_sweep_gives_a_dense_curve_with_the_share_at_each_point(traced: dict[str, Path],
                                                                            tmp_path: Path) -> None:
    out = tmp_path / "sweep.json"
    replay_main([str(traced["vanilla"]), "--bandwidths", "0.01:100:24", "--baseline", str(traced["pipegcn"]),
                 "--json", str(out), "--plot", str(tmp_path / "curve.png")])
    rows = json.loads(out.read_text())["sweep"]
    assert len(rows) == 24 and (tmp_path / "curve.png").is_file()
    times = [r["epoch_s"] for r in rows]
    assert times == sorted(times, reverse=True)
    assert all(0 <= r["comm_share"] <= 1 for r in rows)
    assert rows[0]["comm_share"] > rows[-1]["comm_share"]


@pytest.mark.parametrize("args, line", [
    (["{untraced}"], "has no trace.jsonl"),
    (["{traced}", "dataset=cora"], "override dataset=cora"),
    (["{traced}", "--bandwidths", "1:2"], "--bandwidths 1:2"),
    (["{traced}", "--plot", "{untraced}/curve.png"], "--plot draws or compares a bandwidth sweep; valid: with"),
    (["{traced}", "--baseline", "{traced}"], "--baseline draws or compares a bandwidth sweep; valid: with"),
    (["{traced}", "--bandwidths", "1:2:3", "--plot", "{untraced}/curve.txt"], "format 'txt'; valid: png, pdf, svg"),
])
def test_bad_replay_input_is_refused_in_one_line(traced: dict[str, Path], tmp_path: Path, args: list[str],
                                                 line: str) -> None:
    """Through the installed command."""
    args = [a.format(untraced=tmp_path, traced=traced["vanilla"]) for a in args]
    done = subprocess.run([str(Path(sys.executable).parent / "gnntrain-replay"), *args], capture_output=True, text=True)
    assert done.returncode == 2
    assert line in done.stderr and done.stderr.count("\n") == 1


def test_a_trace_lists_every_rank_epoch_by_epoch(traced: dict[str, Path]) -> None:
    ranks = trace.read(traced["pipegcn"] / trace.TRACE_FILE)
    assert sorted(ranks) == [0, 1]
    for events in ranks.values():
        assert [e.epoch for e in events if isinstance(e, trace.EpochWindow)] == list(range(1, 11))
        posted = {e.id for e in events if isinstance(e, trace.Post)}
        assert {e.id for e in events if isinstance(e, trace.Wait)} <= posted
        assert all(e.keys for e in events if isinstance(e, trace.Post))


def test_the_share_curve_is_replayed_densely_with_its_bounds(traced: dict[str, Path]) -> None:
    """PipeGCN over vanilla from their two traces: :data:`POINTS` (>= 20) bandwidths from the
    baseline's highest share to within 0.01 of its least, the shares falling as the link speeds
    up, and at each the bounds in order (the all-reduce on the link bounds below hiding all,
    which bounds below removing all)."""
    replayer = Replayer(traced["vanilla"], traced["pipegcn"])
    points = [replayer.point(float(gbps)) for gbps in replayer.span()]
    shares = [p.base.share for p in points]
    assert len(points) == POINTS >= 20 and shares == sorted(shares, reverse=True)
    assert shares[0] == pytest.approx(min(HIGHEST_SHARE, replayer.base_at(SLOWEST).share - MARGIN), abs=1e-3)
    assert shares[-1] == pytest.approx(replayer.base_at(FASTEST).share + MARGIN, abs=1e-3)
    for p in points:
        assert p.base.shared_link_bound <= p.hide_all_bound + 1e-9 <= p.remove_all_bound + 2e-9
    rounds = rounds_curve([(traced["vanilla"], traced["pipegcn"])] * 2)
    assert [p.bandwidth_gbps for p in rounds] == [p.bandwidth_gbps for p in points]
    assert rounds[3].speedup.values == pytest.approx([points[3].speedup] * 2)
    assert at_share(rounds, shares[3], lambda p: p.speedup.median) == pytest.approx(points[3].speedup)
    assert at_share(rounds, 1.0, lambda p: p.speedup.median) is None


def test_a_papers_point_above_the_hide_all_bound_is_said_with_the_measured_parts(traced: dict[str, Path]) -> None:
    points = rounds_curve([(traced["vanilla"], traced["pipegcn"])])
    middle = points[len(points) // 2].share
    curve = Curve((), ("strategy=vanilla",), ("strategy=pipegcn",), ("speed", "speed"), "PipeGCN over vanilla", middle,
                  5.0, "a quote")
    text = paper_point(curve, points)
    assert "above the hide-all bound at its own share" in text and "compute" in text and "allreduce" in text
    within = paper_point(replace(curve, paper_speedup=1.0), points)
    assert "within the hide-all bound" in within
    assert "outside the shares" in paper_point(replace(curve, paper_share=0.999), points)
    assert above_bounds(curve, []) == ""
    removing = paper_point(replace(curve, removes=True, paper_speedup=1 / (1 - middle) + 0.5), points)
    assert "above the remove-all bound at its own share" in removing


def test_a_curve_replays_the_headlines_own_traced_runs(tmp_path: Path) -> None:
    """The curve's two runs are the jobs of the headline's sweeps that compose as its sides, round
    by round; runs built with the curve's own traced sweeps (:data:`SEPARATE`) still replay theirs."""
    curve = Curve(("dataset.num_nodes=300",), ("strategy=vanilla",), ("strategy=pipegcn",), ("speed", "speed"),
                  "PipeGCN over vanilla", None, None, "no point")
    sweeps = {"speed": ["dataset.num_nodes=300", "strategy=pipegcn,vanilla"]}
    assert traced_jobs(curve, sweeps) == (1, 0)
    own = [(tmp_path / "speed" / f"repeat{r}" / "1", tmp_path / "speed" / f"repeat{r}" / "0") for r in range(2)]
    separate = [(tmp_path / SEPARATE[0] / f"repeat{r}" / "0", tmp_path / SEPARATE[1] / f"repeat{r}" / "0")
                for r in range(2)]
    (tmp_path / SEPARATE[0]).mkdir()
    assert traced_runs(curve, sweeps, tmp_path, 2) == separate
    own[0][0].mkdir(parents=True)
    (own[0][0] / "trace.jsonl").write_text("")
    assert traced_runs(curve, sweeps, tmp_path, 2) == own
    with pytest.raises(GnntrainError, match="0 jobs of sweep speed compose as"):
        traced_jobs(curve, {"speed": ["dataset.num_nodes=300", "strategy=bns"]})


def _format_1_trace(path: Path) -> Path:
    """Two ranks exchanging one message each way in one epoch, as gnntrain before the timing
    package wrote it (no header, no keys, no host costs)."""
    lines = []
    for rank, peer in ((0, 1), (1, 0)):
        key = [[0, 1], -1, -1, [0, 0]]
        lines += [{"r": rank, "ev": "post", "id": 1, "shape": "exchange", "kind": "halo_fwd", "post": 0.001,
                   "sent": [[peer, 1000, key]], "received": [[peer, 1000, key]]},
                  {"r": rank, "ev": "wait", "id": 1, "reached": 0.002, "done": 0.002, "resumed": 0.002},
                  {"r": rank, "ev": "epoch", "epoch": 1, "start": 0.0, "end": 0.003}]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def test_a_format_1_trace_replays_and_its_messages_pay_a_clusters_host_costs(tmp_path: Path) -> None:
    ranks = trace.read(_format_1_trace(tmp_path / "trace.jsonl"))
    costless = Topology({"inter": Link(1e12, 0.0)})
    costly = Topology({"inter": Link(1e12, 0.0, 0.5e-3, 0.25e-3)})
    (plain,), (priced,) = replay(ranks, costless), replay(ranks, costly)
    assert plain.epoch_time == pytest.approx(0.003)
    assert priced.epoch_time == pytest.approx(0.003 + 0.5e-3 + 0.25e-3), "one message sent, one received"
    assert priced.exposed("halo_fwd") == pytest.approx(plain.exposed("halo_fwd") + 0.75e-3)


def test_a_trace_without_a_complete_epoch_is_refused_in_one_line(tmp_path: Path) -> None:
    path = tmp_path / "trace.jsonl"
    trace.start(path)
    with pytest.raises(GnntrainError, match="the trace holds no epoch every rank completed"):
        replay(trace.read(path), Topology())


@pytest.mark.parametrize("change, message", [
    (lambda line: {**line, "end": float("nan")} if line["ev"] == "epoch" else line, "end nan is not a time"),
    (lambda line: {**line, "end": 1e300} if line["ev"] == "epoch" else line, "end 1e+300 is not a time"),
    (lambda line: {**line, "start": "x"} if line["ev"] == "epoch" else line, "start 'x' is not a time"),
    (lambda line: {**line, "reached": -0.5} if line["ev"] == "wait" else line, "reached -0.5 is not a time"),
    (lambda line: {**line, "sent": [[1, -8, line["sent"][0][2]]]} if line["ev"] == "post" else line,
     "-8 is not a count"),
    (lambda line: {**line, "sent": [[99, 8, line["sent"][0][2]]]} if line["ev"] == "post" else line,
     "a message to or from rank 99 of a run of 2 ranks"),
    (lambda line: {**line, "r": 3}, "holds the lines of ranks 3 only"),
])
def test_a_damaged_trace_is_refused_in_one_line_naming_what(tmp_path: Path, change, message: str) -> None:
    """Times that are not finite seconds >= 0 (NaN, 1e300, a string, negative), negative bytes, a
    peer outside the run, a trace missing ranks."""
    path = _format_1_trace(tmp_path / "trace.jsonl")
    lines = [change(json.loads(line)) for line in path.read_text().splitlines()]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    with pytest.raises(GnntrainError, match=re.escape(message)) as refused:
        trace.read(path)
    assert "\n" not in str(refused.value)


def test_a_restart_of_a_completed_traced_run_keeps_its_trace(tmp_path: Path) -> None:
    """``train.resume=true`` on a run that completed trains nothing: its trace stays as the run
    wrote it and replays to the same figures."""
    run = [*COMMON, "train.epochs=4", "train.checkpoint_every=2", "cluster.trace=true"]
    train_records(tmp_path, *run)
    written = (tmp_path / trace.TRACE_FILE).read_text()
    before = Traced(tmp_path)
    train_records(tmp_path, *run, "train.resume=true")
    assert (tmp_path / trace.TRACE_FILE).read_text() == written
    after = Traced(tmp_path)
    network = network_of(before.summary.network, [])
    assert after.steady(after.under(network)).epoch_time == before.steady(before.under(network)).epoch_time
