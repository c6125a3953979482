"""The modelled network (``network=``) on the virtual clock: that a described link selects it,
that transfers wait for it (vanilla exposes it, PipeGCN hides it), that it changes timing only,
and calibration by replaying a traced probe."""

from __future__ import annotations

import json
from dataclasses import replace
from functools import partial
from pathlib import Path

import pytest
import torch

from conftest import make_cfg, make_run
from dist_helpers import exchanges_in_flight
from gnntrain.job import api
from gnntrain.job import calibration
from gnntrain.timing.cluster import GBIT, describe, link_overrides, wire
from gnntrain.timing.epoch import EpochTiming
from gnntrain.errors import ConfigError
from gnntrain.engine.summary import RunSummary

SMALL = ("dataset.num_nodes=1500", "model=sage", "model.hidden=32", "train.eval_every=100")


def test_a_modelled_link_runs_on_the_virtual_clock_and_the_wall_clock_with_it_is_refused() -> None:
    """A described link selects the virtual clock (``cluster.clock=auto``); the real transport, the
    wall clock. Asked for the wall clock under a modelled link, gnntrain stops in one line: the
    sleeping emulator is retired."""
    assert make_run("network=eth10g").cluster.clock == "virtual"
    assert make_run("network=none").cluster.clock == "wall"
    assert make_run("network=eth10g", "network.mode=kernel").cluster.clock == "wall"
    with pytest.raises(ConfigError, match="cluster.clock=wall with network=eth10g .* timed by the virtual clock"):
        api.check(api.compose(["network=eth10g", "cluster.clock=wall"]))


def test_a_rank_of_several_threads_computes_with_the_host_to_itself() -> None:
    """A thread's CPU time counts one thread: a rank of several takes turns with the host."""
    assert make_run("network=eth10g").cluster.virtual_compute == "thread"
    assert make_run("network=eth10g", "cluster.threads_per_worker=2").cluster.virtual_compute == "alone"
    with pytest.raises(ConfigError, match="cluster.virtual_compute=thread is invalid.*threads_per_worker=2"):
        api.check(api.compose(["network=eth10g", "cluster.threads_per_worker=2", "cluster.virtual_compute=thread"]))


def test_all_to_alls_on_gloo_post_receives_first_and_match_in_flight(tmp_path: Path) -> None:
    """gloo, ranks over a network: an all-to-all posts every receive before any send (so its
    receive notices do not queue behind its data, :mod:`gnntrain.comm.communicator`), and three
    all-to-alls in flight at once, waited for in reverse, each deliver their own rows."""
    api.run(make_run("cluster.world_size=3", "dataset.num_nodes=200"),
            partial(exchanges_in_flight, trace_dir=str(tmp_path)))
    rows = lambda p, q, i: (p + 2 * q + i) % 3  # noqa: E731 - as in the helper
    for me in range(3):
        trace = torch.load(tmp_path / f"rank{me}.pt")
        kinds = [kind for kind, _ in trace["posted"]]
        assert kinds == sorted(kinds) and "send" in kinds and "recv" in kinds  # every "recv" before any "send"
        for i, delivered in enumerate(trace["delivered"]):
            expected = torch.cat([torch.full((rows(p, me, i), 2), 100.0 * i + 10 * p + me) for p in range(3)])
            assert torch.equal(delivered, expected)


def run(tmp_path: Path, name: str, *overrides: str) -> tuple[dict, list[dict]]:
    cfg = make_cfg(*overrides)
    cfg["run_dir"] = str(tmp_path / name)
    api.run(cfg)
    records = [json.loads(line) for line in (tmp_path / name / "metrics.jsonl").read_text().splitlines()]
    return RunSummary.read(tmp_path / name), records


def test_vanilla_exposes_the_modelled_transfer_time(tmp_path: Path) -> None:
    """For two workers each halo exchange takes wire(max(halo rows either way)) / bandwidth on both
    ranks, and the host's cost of its one message on each end; vanilla's exposed data
    communication is their sum, within 10% (the ranks' compute differs, so one waits for the
    other at some exchanges)."""
    summary, _ = run(tmp_path, "v", *SMALL, "train.epochs=4", "network=eth10g",
                     "network.bandwidth_gbps=0.01", "network.latency_us=0")
    assert summary.clock == "virtual"
    halo = summary.partition["boundary_nodes"]
    halo_bytes = sum(summary.mean_comm_bytes_by_kind[k] for k in ("halo_fwd", "halo_bwd"))
    exchanges = 2 * 2 - 1  # forward exchanges of both layers, the backward of the second
    expected = wire(halo_bytes * max(halo) / sum(halo)) / (0.01 * GBIT) + exchanges * 6e-6
    assert summary.mean_comm_time == pytest.approx(expected, rel=0.1)
    assert summary.mean_link_busy_time >= (expected - exchanges * 6e-6) * 0.99


def test_pipegcn_hides_a_transfer_that_compute_covers(tmp_path: Path) -> None:
    summary, _ = run(tmp_path, "p", *SMALL, "strategy=pipegcn", "train.epochs=6", "network=eth10g",
                     "network.bandwidth_gbps=0.2", "network.latency_us=0")
    assert summary.mean_link_busy_time > 0
    assert summary.mean_comm_time < 0.1 * summary.mean_link_busy_time


def test_a_modelled_link_changes_timing_only(tmp_path: Path) -> None:
    """Same seed: the same losses, accuracies and bytes with and without a modelled link."""
    _, plain = run(tmp_path, "none", *SMALL, "train.epochs=3", "train.eval_every=1")
    summary, modelled = run(tmp_path, "eth", *SMALL, "train.epochs=3", "train.eval_every=1", "network=eth25g")
    assert summary.network["modelled"] and summary.network["bandwidth_gbps"] == 25
    for a, b in zip(plain, modelled):
        assert (a["loss"], a["val_acc"], a["comm_bytes_by_kind"]) == (b["loss"], b["val_acc"], b["comm_bytes_by_kind"])
        assert a["link_busy_time"] == 0 and b["link_busy_time"] > 0


@pytest.mark.slow
def test_calibration_scales_the_preset_and_is_reused_by_every_seed(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    overrides = (*SMALL, "network=two_level", "network.gpus_per_node=1", "network.calibrate_share=0.8",
                 "network.probe_epochs=3")
    setting = make_run(*overrides)
    first = calibration.calibrated(replace(setting, run_dir=str(tmp_path / "first"))).network
    scale = first.calibration["scale"]
    assert first.bandwidth_gbps == pytest.approx(10 * scale)
    assert first.intra_bandwidth_gbps == pytest.approx(96 * scale)
    assert first.calibration["against"] == "vanilla"
    assert abs(first.calibration["reached_share"] - 0.8) < 0.1
    monkeypatch.setattr(calibration, "_probe", lambda *args: pytest.fail("calibration was not reused"))
    second = calibration.calibrated(replace(setting, run_dir=str(tmp_path / "second"))).network
    assert second.bandwidth_gbps == first.bandwidth_gbps
    other_seed = replace(make_run(*overrides, "seed=3"), run_dir=str(tmp_path / "other_seed"))
    assert calibration.calibrated(other_seed).network.bandwidth_gbps == first.bandwidth_gbps
    again = describe(make_run(*SMALL, *link_overrides(describe(first))).network)
    assert again == {**describe(first), "calibration": None}


@pytest.mark.parametrize("strategy, against, baseline", [
    ("hopgnn", None, {"name": "minibatch", "batch_size": 64, "fanout": 3, "seed": 0}),
    ("p3", None, {"name": "minibatch", "batch_size": 64, "fanout": 3, "seed": 0}),
    ("pipegcn", None, {"name": "vanilla", "halo_dtype": None}),
    ("gnnpipe", None, {"name": "vanilla", "halo_dtype": None}),
    ("data_parallel", None, {"name": "vanilla", "halo_dtype": None}),
    ("hopgnn", "vanilla", {"name": "vanilla", "halo_dtype": None}),
])
def test_calibration_probes_the_family_baseline(strategy: str, against: str | None, baseline: dict) -> None:
    overrides = [f"strategy={strategy}", "network=eth10g", "network.calibrate_share=0.6"]
    if strategy in ("hopgnn", "p3"):
        overrides += ["strategy.batch_size=64", "strategy.fanout=3"]
    if against:
        overrides.append(f"network.calibrate_against={against}")
    assert calibration.probe_strategy(make_run(*overrides)) == baseline


def test_calibration_probes_the_baseline_as_defined_whatever_the_method_knobs() -> None:
    """16-bit halos and the seed are a run's choices, not its setting: the probe, and so the link,
    is the same with or without them."""
    plain = calibration.probe_strategy(make_run("strategy=pipegcn", "network=eth10g", "network.calibrate_share=0.6"))
    knobs = calibration.probe_strategy(make_run("strategy=pipegcn", "strategy.halo_dtype=bfloat16", "seed=4",
                                                "network=eth10g", "network.calibrate_share=0.6"))
    assert knobs == plain == {"name": "vanilla", "halo_dtype": None}


class FakeProbe:
    """A traced probe of a baseline computing ``machine["compute"]`` s an epoch and moving 10 ms of
    data at the preset's bandwidth, exposed (nothing else): its replays at any bandwidth."""

    def __init__(self, machine: dict, scale: float) -> None:
        self.compute, self.scale = machine["compute"], scale
        self.summary = RunSummary(strategy="vanilla", mean_link_busy_time_by_category={"data": 0.010 / scale})

    def under(self, network) -> list[EpochTiming]:
        data = 0.010 * 10.0 / network.bandwidth_gbps
        parts = {"data": data, "sync": 0.0, "control": 0.0}
        return [EpochTiming(2, "replayed", self.compute + data, self.compute, dict.fromkeys(parts, 0.0), parts,
                            dict.fromkeys(parts, 0.0), per_rank_epoch=[self.compute + data] * 2,
                            per_rank_compute=[self.compute] * 2)]

    def steady(self, epochs: list[EpochTiming]) -> EpochTiming:
        return EpochTiming.mean(epochs)


def test_the_link_is_solved_by_replaying_the_probes_trace(monkeypatch: pytest.MonkeyPatch) -> None:
    """The bandwidth at which the probe's trace, replayed, spends the share asked; a share no
    bandwidth reaches is refused in one line."""
    setting = make_run("network=eth10g", "network.calibrate_share=0.6")
    result = calibration._solve(FakeProbe({"compute": 0.040}, 1.0), setting, 1.0)
    data = 0.010 / result["scale"]
    assert data / (0.040 + data) == pytest.approx(0.6) == pytest.approx(result["reached_share"])
    assert result["solved_by"] == "replay"


def test_a_cached_link_is_rechecked_by_each_sweep_and_calibrated_again_when_off(tmp_path: Path,
                                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """A sweep's first job probes the cached link once; where the machine has since slowed so
    that the share is more than 0.03 off, it solves the link again from that probe's trace and
    the cache keeps the new link. The sweep's later jobs (the same process) probe nothing."""
    machine, probed = {"compute": 0.040}, []

    def probe(run, baseline, scale: float, name: str) -> FakeProbe:
        probed.append(scale)
        return FakeProbe(machine, scale)

    monkeypatch.setattr(calibration, "_probe", probe)
    monkeypatch.setattr(calibration, "_CHECKED", set())
    setting = replace(make_run(*SMALL, "network=eth10g", "network.calibrate_share=0.6",
                               f"partition.cache_dir={tmp_path}"), run_dir=str(tmp_path / "run"))
    first = calibration.calibrated(setting).network.calibration
    assert first["reached_share"] == pytest.approx(0.6) and first["rechecks"] == 0 and probed == [1.0]
    calibration.calibrated(setting)
    assert len(probed) == 1, "a sweep's later jobs trust the link its first job checked"

    calibration._CHECKED.clear()  # the next sweep
    calibration.calibrated(setting)
    assert len(probed) == 2 and probed[-1] == first["scale"], "one probe under the cached link, which holds"

    calibration._CHECKED.clear()
    machine["compute"] = 0.080  # the machine is busier: the same link now gives a share of 0.43
    again = calibration.calibrated(setting).network.calibration
    assert len(probed) == 3 and again["rechecks"] == 2
    assert again["reached_share"] == pytest.approx(0.6) and again["scale"] == pytest.approx(first["scale"] / 2)
    assert json.loads(next((tmp_path / "calibration").glob("*.json")).read_text())["scale"] == again["scale"]

    calibration._CHECKED.clear()  # a method's sweep after its baseline's, in the same round of a build
    machine["compute"] = 0.040
    trusted = calibration.calibrated(replace(setting, network=replace(setting.network, recheck=False)))
    assert len(probed) == 3 and trusted.network.calibration["scale"] == again["scale"], \
        "network.recheck=false runs under the cached link as it is"


@pytest.mark.parametrize("overrides, message", [
    (("network.calibrate_share=0.5",), "without a modelled link"),
    (("network=eth10g", "network.calibrate_share=1.5"), "in (0, 1)"),
    (("network=eth10g", "network.bandwidth_gbps=0"), "> 0"),
    (("network=eth10g", "network.gpus_per_node=2"), "intra_bandwidth_gbps"),
    (("network.calibrate_against=dgl",), "network.calibrate_against=dgl is invalid"),
])
def test_bad_network_settings_are_named(overrides: tuple[str, ...], message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        api.check(api.compose(list(overrides)))


@pytest.mark.slow
def test_hopgnn_calibrates_against_minibatch_and_reaches_the_share(tmp_path: Path) -> None:
    setting = make_run("strategy=hopgnn", "dataset.num_nodes=3000", "model.hidden=32", "strategy.batch_size=256",
                       "strategy.fanout=5", "network=eth10g", "network.calibrate_share=0.6", "network.probe_epochs=3")
    result = calibration.calibrated(replace(setting, run_dir=str(tmp_path))).network.calibration
    assert result["against"] == "minibatch"
    assert abs(result["reached_share"] - 0.6) < 0.1


@pytest.mark.parametrize("content, why", [("{", "Expecting property name"), ("[1]", "lacks scale"),
                                          ('{"scale": -1, "reached_share": 0.8, "against": "vanilla", '
                                           '"compute_s": 1, "link_busy_s": 1}', "holds scale -1")])
def test_a_damaged_calibration_cache_is_said_and_measured_again(content: str, why: str, tmp_path: Path,
                                                              capsys: pytest.CaptureFixture) -> None:
    path = tmp_path / "calibration.json"
    path.write_text(content)
    assert calibration._read_cached(path) is None
    line = capsys.readouterr().err.strip()
    assert line.startswith(f"gnntrain: warning: calibration cache {path} is damaged (") and why in line
    assert line.endswith("; calibrating again")
