"""The results contract reports communication per category with one meaning for every
strategy: ``comm_time``/``comm_total_time`` are the exposed and in-flight time of ``data``
traffic, ``reduce_time`` the exposed time of ``sync``, the per-category fields add up, and W&B
gets the same fields."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from conftest import batch_for, train_records
from gnntrain.job import api
from gnntrain.timing.clock import clock_of
from gnntrain.timing import accounting as timeline
from gnntrain.comm.meter import CommMeter
from gnntrain.timing.kinds import by_category, category
from gnntrain.config import one_line
from gnntrain.engine.metrics import EpochRecord
from gnntrain.engine.recorder import JsonlSink, WandbFollower, WandbSink
from gnntrain.engine.summary import RunSummary
from gnntrain.strategies import METHODS

SETTINGS = {
    "pipegcn": ["strategy.track_staleness_error=true"],
    "bns": ["strategy.p=0.5"],
    "adaqp": ["strategy.assign=fixed", "strategy.bits=4"],
    "granndis": ["network=two_level"],
    "pipeqs": ["strategy.threshold=1"],
}
"""Settings that make a strategy send each kind of traffic it has (the others run as they come)."""
FAST = ("vanilla", "pipegcn", "bns", "adaqp", "data_parallel", "hopgnn")
"""The strategies ``make test`` runs the contract for; ``make test-slow`` runs the others."""
BATCH_NORM = ("vanilla", "pipegcn", "bns", "bes", "dropedge", "adaqp", "data_parallel")
"""Strategies whose records must also carry batch-norm statistics as sync traffic."""


def _records(tmp_path, name: str) -> list[dict]:
    norm = ["model.norm=batch"] if name in BATCH_NORM else []
    return train_records(tmp_path, "dataset.num_nodes=400", "dataset.avg_degree=6", "train.epochs=3", "model=sage",
                         f"strategy={name}", *norm, *SETTINGS.get(name, []), *batch_for(name, 240))


def _times_add_up(r: dict) -> None:
    """docs/results.md's identities on one record: per category exposed = wait + transfer and in
    flight = transfer + hidden, every part >= 0 and each at most the epoch; compute plus exposed
    time is the mean epoch (at most the epoch); each rank's own figures likewise."""
    tolerance = 1e-9
    wait, transfer, hidden = (r[f"comm_{part}_time_by_category"] for part in ("wait", "transfer", "hidden"))
    for c in r["comm_time_by_category"]:
        assert min(wait[c], transfer[c], hidden[c]) >= 0
        assert r["comm_time_by_category"][c] == pytest.approx(wait[c] + transfer[c], abs=tolerance)
        assert r["comm_total_time_by_category"][c] == pytest.approx(transfer[c] + hidden[c], abs=tolerance)
        assert max(r["comm_time_by_category"][c], r["comm_total_time_by_category"][c]) <= r["epoch_time"] + tolerance
    ranks = r["per_rank"]
    assert r["compute_time"] + sum(r["comm_time_by_category"].values()) <= r["epoch_time"] + tolerance
    assert r["epoch_time"] == max(ranks["epoch_time"])
    for rank, epoch in enumerate(ranks["epoch_time"]):
        exposed = ranks["comm_wait_time"][rank] + ranks["comm_transfer_time"][rank]
        assert ranks["compute_time"][rank] + exposed <= epoch + tolerance
        assert ranks["comm_transfer_time"][rank] + ranks["comm_hidden_time"][rank] <= epoch + tolerance


@pytest.mark.parametrize("name", [pytest.param(n, marks=[] if n in FAST else pytest.mark.slow) for n in METHODS])
def test_every_strategy_reports_time_and_bytes_per_category(name: str, tmp_path) -> None:
    for r in _records(tmp_path, name):
        exposed, in_flight = r["comm_time_by_category"], r["comm_total_time_by_category"]
        assert set(exposed) == set(in_flight) == {"data", "sync", "control"}
        assert r["comm_time"] == exposed["data"] and r["comm_total_time"] == in_flight["data"]
        assert r["reduce_time"] == exposed["sync"]
        assert 0 <= r["compute_time"] <= r["epoch_time"]
        _times_add_up(r)
        assert r["comm_bytes_by_category"] == {c: int(b) for c, b in by_category(
            {**r["comm_bytes_by_kind"], "eval_halo_fwd": r["eval_comm_bytes"]}).items()}
        training = {c: b for c, b in r["comm_bytes_by_category"].items() if c in exposed}
        assert r["comm_bytes"] == sum(training.values())
        assert (training["sync"] > 0) == (name != "gnnpipe"), \
            "replicas' gradients and batch-norm statistics are sync traffic (a pure pipeline replicates nothing)"
        assert (training["data"] > 0) == (name != "data_parallel"), "what a method moves to compute is data"
        sends_control = (name in ("bns", "bes", "dropedge", "sancus") or METHODS[name].family.name == "minibatch"
                         or name == "pipeqs" and r["epoch"] >= 3)
        assert (training["control"] > 0) == sends_control, \
            "keep masks, the ids of fetched rows, skipped broadcasts' flags and PipeQS's changes are control"
        assert (r["comm_bytes_by_category"]["diag"] > 0) == (name == "pipegcn")


@pytest.mark.parametrize("name", list(METHODS))
def test_every_strategy_refuses_a_misspelt_key_in_one_line(name: str) -> None:
    with pytest.raises(Exception) as refused:
        api.compose([f"strategy={name}", "strategy.no_such_key=1"])
    assert "strategy.no_such_key" in one_line(refused.value)


def test_every_kind_has_a_category() -> None:
    assert [category(k) for k in ("halo_fwd", "pipe_bwd", "allreduce", "bn_stats_grad", "sample_index", "assign",
                                  "eval_halo_fwd", "diag_halo_bwd")] == [
        "data", "data", "sync", "sync", "control", "control", "eval", "diag"]
    with pytest.raises(KeyError, match="declare it"):
        category("mystery")


def _record(epoch: int) -> EpochRecord:
    return EpochRecord(epoch=epoch, loss=1.0, train_acc=None, val_acc=0.5, test_acc=None, epoch_time=1.0,
                       compute_time=0.5, comm_time=0.3, comm_total_time=0.4, reduce_time=0.2, eval_time=0.1,
                       comm_bytes=30, comm_bytes_by_kind={"halo_fwd": 10, "allreduce": 20},
                       comm_bytes_by_category={"data": 10, "sync": 20}, comm_time_by_category={"data": 0.3},
                       comm_total_time_by_category={"data": 0.4}, strategy_metrics={"mean_bits": 4.0})


def _lines(*epochs: int) -> str:
    return "".join(json.dumps(_record(e).to_dict()) + "\n" for e in epochs)


def test_wandb_gets_the_per_category_fields() -> None:
    logged = {}
    sink = WandbSink.__new__(WandbSink)
    sink.wandb_run = SimpleNamespace(log=lambda row, step: logged.update(row))
    sink.log(_record(1))
    assert {"comm_bytes/halo_fwd": 10, "comm_bytes/data": 10, "comm_bytes/sync": 20, "comm_time/data": 0.3,
            "comm_total_time/data": 0.4, "comm_time": 0.3, "reduce_time": 0.2, "mean_bits": 4.0}.items() <= logged.items()


class _RecordingSink:
    """A stand-in for :class:`WandbSink` that keeps what it is given."""

    def __init__(self) -> None:
        self.epochs, self.summaries, self.exit_codes = [], [], []

    def log(self, record: EpochRecord) -> None:
        self.epochs.append(record.epoch)

    def summarize(self, summary: dict) -> None:
        self.summaries.append(summary)

    def close(self, exit_code: int = 0) -> None:
        self.exit_codes.append(exit_code)


def test_the_launchers_wandb_run_gets_each_new_epoch_once(tmp_path) -> None:
    """An earlier run's metrics.jsonl is not read; a resumed run's kept epochs are not logged
    again; a line still being written waits for its end."""
    metrics = tmp_path / "metrics.jsonl"
    metrics.write_text(_lines(1, 2, 3, 4, 5))
    sink = _RecordingSink()
    follower = WandbFollower(sink, tmp_path, first_epoch=3)
    follower.poll()
    assert sink.epochs == []
    JsonlSink(metrics, [_record(1), _record(2)]).log(_record(3))  # rank 0 replaces it, keeping epochs 1-2
    follower.poll()
    assert sink.epochs == [3]
    cut = _lines(4)
    with metrics.open("a") as f:
        f.write(cut[:10])
    follower.poll()
    assert sink.epochs == [3]
    with metrics.open("a") as f:
        f.write(cut[10:] + _lines(5))
    RunSummary(status="completed", epochs=5).write(tmp_path)
    follower.finish(0)
    assert sink.epochs == [3, 4, 5] and sink.summaries == [RunSummary(status="completed", epochs=5)]
    assert sink.exit_codes == [0]


def test_the_launchers_wandb_run_of_a_failed_job_is_finished_without_a_summary(tmp_path) -> None:
    sink = _RecordingSink()
    follower = WandbFollower(sink, tmp_path)
    (tmp_path / "metrics.jsonl").write_text(_lines(1, 2))
    RunSummary(status="failed", epochs=2).write(tmp_path)
    follower.finish(1)
    assert sink.epochs == [1, 2] and sink.summaries == [] and sink.exit_codes == [1]


class _Mark:
    """A stand-in for a CUDA timing event: a time in milliseconds on the device."""

    def __init__(self, ms: float) -> None:
        self.ms = ms

    def query(self) -> bool:
        return True


class _DeviceClock:
    """A stand-in for a CUDA device's clock (:class:`gnntrain.timing.clock.Clock`) over :class:`_Mark` marks."""

    def seconds(self, start: _Mark, end: _Mark) -> float:
        return (end.ms - start.ms) / 1e3

    def host_time(self, mark: _Mark) -> float:
        return mark.ms / 1e3


KEY = ((0, 1), -1, -1, (0, 0))
"""A collective's key on the channel of ranks 0 and 1."""


def _waited(meter: CommMeter, kind: str, clock, started, reached, resumed, completed=None,
            keys=(KEY,)) -> None:
    posting = meter.post(kind, keys, clock, started)
    posting.completed = completed
    meter.record_span(posting, reached, resumed)


def test_device_timed_operations_count_the_stream_stall_as_exposed_and_start_to_completion_as_in_flight() -> None:
    meter, clock = CommMeter(), _DeviceClock()
    meter.record("halo_fwd", 100)
    _waited(meter, "halo_fwd", clock, _Mark(0.0), _Mark(30.0), _Mark(40.0), _Mark(38.0))
    with meter.tagged("eval_"):
        _waited(meter, "halo_fwd", clock, _Mark(50.0), _Mark(50.0), _Mark(55.0), keys=())
    assert meter.wait_s["halo_fwd"] == 0.0  # nothing counted before the device has caught up
    meter.settle()
    assert meter.bytes["halo_fwd"] == 100
    assert meter.wait_s["halo_fwd"] == pytest.approx(0.010) and meter.wait_s["eval_halo_fwd"] == pytest.approx(0.005)
    meter.settle()  # each operation counts once
    assert meter.wait_s["halo_fwd"] == pytest.approx(0.010)
    data = meter.account(meter.close((0.0, 0.045))).categories["data"]
    assert (data.wait, data.transfer, data.hidden) == pytest.approx((0.0, 0.010, 0.030))
    _waited(meter, "allreduce", clock, _Mark(0.0), _Mark(0.0), _Mark(1.0))
    meter.reset()
    meter.settle()
    assert meter.wait_s["allreduce"] == 0.0


def test_host_timed_operations_count_at_once() -> None:
    meter = CommMeter()
    _waited(meter, "halo_fwd", clock_of("cpu"), 1.0, 3.0, 3.5, 2.0)
    assert meter.wait_s["halo_fwd"] == pytest.approx(0.5)
    data = meter.account(meter.close((0.0, 10.0))).categories["data"]
    assert (data.wait, data.transfer, data.hidden) == pytest.approx((0.0, 0.5, 1.0))  # moving 1-2 s, blocked 3-3.5 s


def test_waiting_for_a_later_peer_is_wait_not_transfer() -> None:
    """Rank 0 reaches the exchange at 1 s, its peer's data is ready at 3 s, it completes at 4 s:
    2 s waiting for the peer, 1 s of transfer; nothing hidden."""
    meter, clock = CommMeter(), clock_of("cpu")
    _waited(meter, "halo_fwd", clock, 1.0, 1.0, 4.0, 4.0)
    ledger = meter.close((0.0, 5.0))  # the epoch ends before the peers' starts are learned
    mine = ledger.stamps
    assert mine == {KEY: 1.0} and meter.close((5.0, 6.0)).stamps == {}  # each start is told once
    meter.learn(0, [mine, {KEY: 3.5, ((0, 1), 1, 0, (0, 0)): 9.0, ((2, 3), -1, -1, (0, 0)): 9.0}], [0.0, 0.5])
    data = meter.account(ledger).categories["data"]
    assert (data.wait, data.transfer, data.hidden) == pytest.approx((2.0, 1.0, 0.0))
    assert meter._peer_started == {((0, 1), 1, 0, (0, 0)): 8.5}  # the used start is forgotten, another channel's never kept


def test_a_transfer_across_the_epochs_end_counts_in_each_epoch_for_its_part_inside_it() -> None:
    """Posted at 1 s in an epoch ending at 2 s, completed at 2.5 s, waited for at 3 s in the next
    epoch (2-4 s): 1 s hidden in the first, 0.5 s hidden in the second, and no wait or transfer;
    the same when both epochs are accounted after the second has ended (one record round)."""
    meter, clock = CommMeter(), clock_of("cpu")
    posting = meter.post("halo_fwd", (KEY,), clock, 1.0)
    first_ledger = meter.close((0.0, 2.0))
    posting.completed = 2.5
    meter.record_span(posting, 3.0, 3.0)
    second_ledger = meter.close((2.0, 4.0))
    first, second = meter.account(first_ledger).categories["data"], meter.account(second_ledger).categories["data"]
    assert (first.wait, first.transfer, first.hidden) == pytest.approx((0.0, 0.0, 1.0))
    assert (second.wait, second.transfer, second.hidden) == pytest.approx((0.0, 0.0, 0.5))
    assert meter.account(meter.close((4.0, 6.0))).categories["data"].in_flight == 0.0


def test_overlapping_transfers_count_the_time_covered_once() -> None:
    split = timeline.split([(2.0, 3.0)], [(0.0, 2.5), (1.0, 4.0), (8.0, 12.0)], (0.0, 10.0))
    assert (split.wait, split.transfer, split.hidden) == pytest.approx((0.0, 1.0, 5.0))  # [0, 4] and [8, 10]
    assert split.in_flight <= 10.0
