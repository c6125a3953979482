"""The emulated network (``network=``): its cost model, that transfers really wait for it
(vanilla exposes it, PipeGCN hides it), that it changes timing only, and calibration."""

from __future__ import annotations

import json
from dataclasses import replace
from functools import partial
from pathlib import Path

import pytest
import torch

from conftest import make_cfg, make_run
from dist_helpers import exchanges_in_flight, late_one_sided_send, timed_transfers
from gnntrain.job import api
from gnntrain.job import calibration
from gnntrain.comm.network import GBIT, EmulatedNetwork, describe, link_overrides, wire
from gnntrain.config.schema import NetworkConfig
from gnntrain.errors import ConfigError
from gnntrain.engine.summary import RunSummary

SMALL = ("dataset.num_nodes=1500", "model=sage", "model.hidden=32", "train.eval_every=100")


def network_config(**keys) -> NetworkConfig:
    base = {"name": "test", "bandwidth_gbps": 1.0, "latency_us": 100.0, "gpus_per_node": None,
            "intra_bandwidth_gbps": None, "intra_latency_us": 0.0}
    return NetworkConfig(**{**base, **keys})


def test_exchange_costs_latency_plus_the_larger_direction_over_bandwidth() -> None:
    net = EmulatedNetwork(network_config(), rank=0)
    hold = net.exchange(10.0, sent={1: 1_000_000, 2: 1_000_000}, received={1: 500_000})
    assert hold.busy_s == pytest.approx(wire(2_000_000) / GBIT)
    assert hold.ready_at == pytest.approx(10.0 + wire(2_000_000) / GBIT + 100e-6)
    queued = net.exchange(10.0, sent={1: 1_000_000}, received={})
    assert queued.ready_at == pytest.approx(10.0 + wire(3_000_000) / GBIT + 100e-6), "a busy link queues the next transfer"


def test_ring_all_reduce_cost() -> None:
    net = EmulatedNetwork(network_config(), rank=0)
    hold = net.all_reduce(0.0, 4_000_000, [0, 1, 2, 3])
    assert hold.ready_at == pytest.approx(2 * 3 / 4 * wire(4_000_000) / GBIT + 2 * 3 * 100e-6)


def test_two_levels_split_peers_by_node() -> None:
    net = EmulatedNetwork(network_config(gpus_per_node=2, intra_bandwidth_gbps=10.0, intra_latency_us=0.0), rank=0)
    assert net.level(1) == "intra" and net.level(2) == "inter"
    hold = net.exchange(0.0, sent={1: 10_000_000, 2: 1_000_000}, received={})
    assert hold.ready_at == pytest.approx(max(wire(10_000_000) / (10 * GBIT), wire(1_000_000) / GBIT + 100e-6))
    within = net.all_reduce(0.0, 1_000_000, [0, 1])
    assert within.latency_s == 0.0, "a group inside one node uses the intra-node link"


def test_measured_waits_match_the_formula(tmp_path: Path) -> None:
    """Two workers, 0.01 Gbit/s (slow enough that a loaded scheduler's milliseconds stay within
    10%): the all-to-all completes latency + wire(max(sent, received)) / bandwidth after it
    starts, never sooner and within 10%, and the meter counts as blocked the time from the call
    to ``wait`` to its return (posting, before that call, is the rank's own work); the
    all-reduce, blocking from its start, waits the ring cost within 10%."""
    api.run(make_run("network=eth10g", "network.bandwidth_gbps=0.01", "network.latency_us=1000"),
            partial(timed_transfers, trace_dir=str(tmp_path), rows_to=[[0, 60], [90, 0]], reduce_floats=250_000))
    bandwidth, latency = 0.01 * GBIT, 1e-3
    expected_exchange = latency + wire(90 * 1024 * 4) / bandwidth
    expected_reduce = 2 * 1 / 2 * wire(250_000 * 4) / bandwidth + 2 * latency
    for rank in range(2):
        trace = torch.load(tmp_path / f"rank{rank}.pt")
        assert expected_exchange <= trace["exchange_span"] <= 1.1 * expected_exchange
        assert trace["wait"]["halo_fwd"] == pytest.approx(trace["exchange_blocked"], rel=0.1)
        assert trace["wait"]["halo_fwd"] <= trace["exchange_blocked"]
        assert trace["wait"]["allreduce"] == pytest.approx(expected_reduce, rel=0.1)


def test_one_sided_transfer_arrives_a_link_time_after_it_is_sent(tmp_path: Path) -> None:
    """A pipeline stage posts its receive early and its neighbour sends late: the emulated
    arrival counts from the send (the sender's clock travels with the payload), not from the
    receive."""
    api.run(make_run("network=eth10g", "network.bandwidth_gbps=0.1", "network.latency_us=0"),
            partial(late_one_sided_send, trace_dir=str(tmp_path), floats=625_000,
                    delay_s=0.3))  # 2.5 MB: 0.2 s at 0.1 Gbit/s
    assert torch.load(tmp_path / "rank1.pt")["waited"] >= 0.95 * (0.3 + 0.2)


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


def test_vanilla_exposes_the_emulated_transfer_time(tmp_path: Path) -> None:
    """For two workers each halo exchange takes wire(max(halo rows either way)) / bandwidth on both
    ranks; vanilla's exposed data communication equals their sum within 10%. The link is slow
    enough (0.01 Gbit/s) that the rank's own time posting each exchange, before it waits, stays
    well inside that on a loaded machine."""
    summary, _ = run(tmp_path, "v", *SMALL, "train.epochs=4", "network=eth10g",
                     "network.bandwidth_gbps=0.01", "network.latency_us=0")
    halo = summary.partition["boundary_nodes"]
    halo_bytes = sum(summary.mean_comm_bytes_by_kind[k] for k in ("halo_fwd", "halo_bwd"))
    expected = wire(halo_bytes * max(halo) / sum(halo)) / (0.01 * GBIT)
    assert summary.mean_comm_time == pytest.approx(expected, rel=0.1)
    assert summary.mean_link_busy_time >= expected * 0.99


def test_pipegcn_hides_a_transfer_that_compute_covers(tmp_path: Path) -> None:
    summary, _ = run(tmp_path, "p", *SMALL, "strategy=pipegcn", "train.epochs=6", "network=eth10g",
                     "network.bandwidth_gbps=0.2", "network.latency_us=0")
    assert summary.mean_link_busy_time > 0
    assert summary.mean_comm_time < 0.1 * summary.mean_link_busy_time


def test_emulation_changes_timing_only(tmp_path: Path) -> None:
    """Same seed: the same losses, accuracies and bytes with and without an emulated network."""
    _, plain = run(tmp_path, "none", *SMALL, "train.epochs=3", "train.eval_every=1")
    summary, emulated = run(tmp_path, "eth", *SMALL, "train.epochs=3", "train.eval_every=1", "network=eth25g")
    assert summary.network["emulated"] and summary.network["bandwidth_gbps"] == 25
    for a, b in zip(plain, emulated):
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


def test_solve_inverts_the_share() -> None:
    """A probe with compute C, data's exposed time X (busy B of it) and all-reduces' Y (busy B'):
    with every bandwidth scaled, data's exposed time is the share s of the epoch."""
    setting = make_run("network=eth10g", "network.calibrate_share=0.6", "network.bandwidth_gbps=10.0")
    compute, data, data_busy, sync, sync_busy = 0.1, 0.003, 0.002, 0.0015, 0.001
    probe = RunSummary(mean_compute_time=compute, mean_epoch_time=compute + data + sync, world_size=2,
                       mean_comm_time_by_category={"data": data, "sync": sync, "control": 0.0},
                       mean_link_busy_time_by_category={"data": data_busy, "sync": sync_busy, "control": 0.0})
    scale = calibration._solve(probe, setting)["scale"]
    exposed = (data - data_busy) + data_busy / scale
    reduced = (sync - sync_busy) + sync_busy / scale
    assert exposed / (compute + exposed + reduced) == pytest.approx(0.6)
    every = replace(setting, network=replace(setting.network, calibrate_traffic="training"))
    scale = calibration._solve(probe, every)["scale"]
    exposed = (data - data_busy) + data_busy / scale + (sync - sync_busy) + sync_busy / scale
    assert exposed / (compute + exposed) == pytest.approx(0.6), "GNNPipe's share counts the all-reduces too"


def _fake_probe(machine: dict, probed: list[float]):
    """A probe of a baseline computing ``machine["compute"]`` s an epoch and moving 10 ms of data
    at the preset bandwidth (nothing else): its summary at each bandwidth scale, which it records."""
    def probe(run, baseline, scale: float, name: str) -> RunSummary:
        probed.append(scale)
        compute, data = machine["compute"], 0.010 / scale
        return RunSummary(mean_compute_time=compute, mean_epoch_time=compute + data, comm_share=data / (compute + data),
                          mean_comm_time_by_category={"data": data}, mean_link_busy_time_by_category={"data": data},
                          strategy="vanilla", world_size=2)
    return probe


def test_a_cached_link_is_rechecked_by_each_sweep_and_calibrated_again_when_off(tmp_path: Path,
                                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """A sweep's first job probes the cached link once; where the machine has since slowed so
    that the share is more than 0.03 off, it calibrates again and the cache keeps the new link.
    The sweep's later jobs (the same process) probe nothing."""
    machine, probed = {"compute": 0.040}, []
    monkeypatch.setattr(calibration, "_probe", _fake_probe(machine, probed))
    monkeypatch.setattr(calibration, "_CHECKED", set())
    setting = replace(make_run(*SMALL, "network=eth10g", "network.calibrate_share=0.6",
                               f"partition.cache_dir={tmp_path}"), run_dir=str(tmp_path / "run"))
    first = calibration.calibrated(setting).network.calibration
    assert first["reached_share"] == pytest.approx(0.6) and first["rechecks"] == 0 and len(probed) == 2
    calibration.calibrated(setting)
    assert len(probed) == 2, "a sweep's later jobs trust the link its first job checked"

    calibration._CHECKED.clear()  # the next sweep
    calibration.calibrated(setting)
    assert len(probed) == 3 and probed[-1] == first["scale"], "one probe under the cached link, which holds"

    calibration._CHECKED.clear()
    machine["compute"] = 0.080  # the machine is busier: the same link now gives a share of 0.43
    again = calibration.calibrated(setting).network.calibration
    assert len(probed) == 5 and again["rechecks"] == 2 and again["corrections"] == 1
    assert again["reached_share"] == pytest.approx(0.6) and again["scale"] == pytest.approx(first["scale"] / 2)
    assert json.loads(next((tmp_path / "calibration").glob("*.json")).read_text())["scale"] == again["scale"]

    calibration._CHECKED.clear()  # a method's sweep after its baseline's, in the same round of a build
    machine["compute"] = 0.040
    trusted = calibration.calibrated(replace(setting, network=replace(setting.network, recheck=False)))
    assert len(probed) == 5 and trusted.network.calibration["scale"] == again["scale"], \
        "network.recheck=false runs under the cached link as it is"


@pytest.mark.parametrize("overrides, message", [
    (("network.calibrate_share=0.5",), "without an emulated network"),
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
