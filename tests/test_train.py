"""The epoch loop's loss and metrics, on one process."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from conftest import make_run
from gnntrain.data.synthetic import generate
from gnntrain.data.partition import partition_stats
from gnntrain.data.job import JobData
from gnntrain.engine.early_stop import EarlyStopping, Stop, selected, time_to_target
from gnntrain.engine import loop as loop_module
from gnntrain.engine.loop import EpochLoop
from gnntrain.engine.metrics import EpochRecord
from gnntrain.parallel.mesh import WorkerContext


def _multilabel_loop() -> tuple[EpochLoop, object]:
    data = generate(400, 6, 4, 8, homophily=0.8)
    labels = torch.rand(data.num_nodes, 3, generator=torch.Generator().manual_seed(0)) < 0.4
    data.y, data.num_classes, data.multilabel = labels.float(), 3, True
    part = torch.zeros(data.num_nodes, dtype=torch.long)
    run = make_run("model.dropout=0", "train.epochs=1")
    job = JobData(data.facts(), {}, False, data=data, part=part)
    return EpochLoop(run, WorkerContext(0, 1, torch.device("cpu")), job), data


def test_multilabel_uses_bce_and_f1_micro() -> None:
    loop, data = _multilabel_loop()
    trainer = loop.strategy.step
    out = trainer.local_outputs(loop.strategy.policy.evaluation_halo())
    mask = data.train_mask
    expected_loss = F.binary_cross_entropy_with_logits(out[mask], data.y[mask])
    torch.testing.assert_close(trainer.local_loss(out), expected_loss)

    counts = loop.strategy.evaluate()
    for i, split in enumerate((data.train_mask, data.val_mask, data.test_mask)):
        pred, true = out[split] > 0, data.y[split] > 0.5
        tp, fp, fn = (pred & true).sum(), (pred & ~true).sum(), (~pred & true).sum()
        assert float(counts[4 * i] / counts[4 * i + 1]) == pytest.approx(float(2 * tp / (2 * tp + fp + fn)))
        assert float(counts[4 * i + 2] / counts[4 * i + 3]) == pytest.approx(
            float(F.binary_cross_entropy_with_logits(out[split], data.y[split])))


def test_single_process_epoch_record_has_no_communication() -> None:
    data = generate(400, 6, 4, 8, homophily=0.8)
    part = torch.zeros(data.num_nodes, dtype=torch.long)
    trainer = EpochLoop(make_run("train.epochs=2"), WorkerContext(0, 1, torch.device("cpu")),
                        JobData(data.facts(), {}, False, data=data, part=part))
    first, second = trainer.records([trainer.run_epoch(1), trainer.run_epoch(2)])
    assert second.val_acc is not None and 0 <= second.val_acc <= 1
    assert first.comm_bytes_by_kind == {"halo_fwd": 0, "halo_bwd": 0, "allreduce": 0}
    assert partition_stats(data, part, 1)["boundary_nodes"] == [0]


def test_an_epochs_peak_memory_covers_its_evaluation(monkeypatch: pytest.MonkeyPatch) -> None:
    """The peak of an evaluated epoch is read after the evaluation, that of the epoch before it
    (not evaluated) after its training: a peak the evaluation alone reaches shows in the first."""
    data = generate(400, 6, 4, 8, homophily=0.8)
    part = torch.zeros(data.num_nodes, dtype=torch.long)
    loop = EpochLoop(make_run("train.epochs=2", "train.eval_every=2", "train.warmup_epochs=0"),
                     WorkerContext(0, 1, torch.device("cpu")), JobData(data.facts(), {}, False, data=data, part=part))
    peak = {"mb": 100.0}
    monkeypatch.setattr(loop_module, "reset_peak_memory", lambda device: peak.update(mb=100.0))
    monkeypatch.setattr(loop_module, "peak_memory_mb", lambda device: (peak["mb"], peak["mb"]))
    evaluate = loop.strategy.evaluate

    def evaluate_at_a_higher_peak() -> torch.Tensor:
        peak["mb"] = 600.0
        return evaluate()

    loop.strategy.evaluate = evaluate_at_a_higher_peak
    first, second = loop.records([loop.run_epoch(1), loop.run_epoch(2)])
    assert (first.val_acc, first.peak_mem_mb) == (None, 100.0)
    assert second.val_acc is not None and second.peak_mem_mb == second.peak_mem_reserved_mb == 600.0


def _record(epoch: int, val: float | None, val_loss: float | None = None) -> EpochRecord:
    return EpochRecord(epoch=epoch, loss=1.0, train_acc=None, val_acc=val, test_acc=val, epoch_time=0.5,
                       compute_time=0.5, comm_time=0.0, comm_total_time=0.0, reduce_time=0.0, eval_time=0.0,
                       comm_bytes=0, val_loss=val_loss)


def test_the_validation_loss_is_the_training_losss_function_over_the_validation_nodes() -> None:
    data = generate(400, 6, 4, 8, homophily=0.8)
    part = torch.zeros(data.num_nodes, dtype=torch.long)
    loop = EpochLoop(make_run("model.dropout=0", "train.epochs=1"), WorkerContext(0, 1, torch.device("cpu")),
                     JobData(data.facts(), {}, False, data=data, part=part))
    record, = loop.records([loop.run_epoch(1)])
    out = loop.strategy.step.local_outputs(loop.strategy.policy.evaluation_halo())
    assert record.val_loss == pytest.approx(float(F.cross_entropy(out[data.val_mask], data.y[data.val_mask])))


def test_the_monitor_picks_the_best_epoch_by_score_loss_or_gats_rule_and_the_patience_follows_it() -> None:
    """Score: epoch 2 (0.8, first reached). Loss: epoch 3 (0.4), and patience 2 fires at 5.
    GAT's rule (score_or_loss): epochs 1, 2 (score), 3 (loss) reset the patience, epoch 4 (score
    0.8 ties the highest, loss 0.4 ties the lowest) both, so it is the best; patience 2 fires at 6."""
    records = [_record(e, v, l) for e, v, l in
               ((1, 0.5, 0.9), (2, 0.8, 0.6), (3, 0.7, 0.4), (4, 0.8, 0.4), (5, 0.6, 0.5), (6, 0.6, 0.5))]
    assert selected(records).epoch == 2 and selected(records, "loss").epoch == 3
    assert selected(records, "score_or_loss").epoch == 4
    loss = EarlyStopping(2, monitor="loss")
    assert [stop for stop in map(loss.update, records) if stop][0] == Stop("patience", 2, 5, 3, 2.5, "loss")
    gat = EarlyStopping(2, monitor="score_or_loss")
    stop = [stop for stop in map(gat.update, records) if stop][0]
    assert (stop.epoch, stop.best_epoch) == (6, 4) and "no better validation score or loss" in stop.describe()
    with pytest.raises(ValueError, match="no validation loss"):
        selected([_record(1, 0.5), _record(2, 0.6)], "loss")


def test_patience_counts_epochs_since_the_first_best_validation_score_at_evaluated_epochs() -> None:
    """Evaluated every 2 epochs, patience 4: the best (0.7, first reached at epoch 4; the tie at 6
    is no better) is 4 epochs old at epoch 8, where the stop fires with the training time so far;
    a resumed run's kept records count; patience 0 never fires."""
    vals = {2: 0.5, 4: 0.7, 6: 0.7, 8: 0.6, 10: 0.9}
    records = [_record(e, vals.get(e)) for e in range(1, 11)]
    stopping = EarlyStopping(4)
    fired = [stop for stop in map(stopping.update, records) if stop]
    assert fired[0] == Stop("patience", 4, 8, 4, 4.0)
    resumed = EarlyStopping(4, kept=records[:6])
    assert resumed.update(records[6]) is None and resumed.update(records[7]) == Stop("patience", 4, 8, 4, 4.0)
    never = EarlyStopping(0)
    assert not any(map(never.update, records))


def test_target_fires_at_the_first_evaluated_epoch_reaching_it_and_times_training_only() -> None:
    """Target 0.7: epoch 4 is the first evaluation at or above it (train time 4 x 0.5 s; the
    evaluation's time is not training); the same rule read back from the records gives the same
    stop; a target never reached returns None; a target fires before a patience that would later."""
    vals = {2: 0.5, 4: 0.7, 6: 0.65, 8: 0.9}
    records = [_record(e, vals.get(e)) for e in range(1, 9)]
    for r in records:
        r.eval_time = 3.0
    stopping = EarlyStopping(patience=6, target=0.7)
    fired = [stop for stop in map(stopping.update, records) if stop]
    assert fired[0] == Stop("target", 0.7, 4, 4, 2.0)
    assert time_to_target(records, 0.7) == fired[0]
    assert time_to_target(records, 0.85) == Stop("target", 0.85, 8, 8, 4.0)
    assert time_to_target(records, 0.95) is None
    assert "reached the target 0.7" in fired[0].describe()
