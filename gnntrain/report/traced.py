"""A traced run (``cluster.clock=virtual cluster.trace=true``): its summary, its trace and the
epochs its summary's means are taken over, timed again under any network by replay
(:mod:`gnntrain.timing.replay`)."""

from __future__ import annotations

from pathlib import Path

from gnntrain.engine.metrics import read_records
from gnntrain.engine.summary import SUMMARY_FILE, RunSummary, steady_records
from gnntrain.errors import GnntrainError
from gnntrain.timing import trace
from gnntrain.timing.links import Topology
from gnntrain.timing.replay import ReplayedEpoch, replay, steady_mean


class Traced:
    """A traced run: its summary, its trace and the network it ran on."""

    def __init__(self, run_dir: Path) -> None:
        path = run_dir / trace.TRACE_FILE
        if not path.is_file():
            raise GnntrainError(f"{run_dir} has no {trace.TRACE_FILE}; valid: the run dir of a run made with "
                                "cluster.clock=virtual cluster.trace=true")
        self.run_dir = run_dir
        self.summary = RunSummary.read(run_dir / SUMMARY_FILE)
        self.ranks = trace.read(path)
        self.steady = {r.epoch for r in steady_records(read_records(run_dir / "metrics.jsonl"),
                                                       self.summary.warmup_epochs_excluded)}
        """The epochs the run's summary took its means over."""

    def under(self, network) -> list[ReplayedEpoch]:
        return replay(self.ranks, Topology.of(network))

    def mean_epoch(self, epochs: list[ReplayedEpoch]) -> float:
        return steady_mean(epochs, self.steady, lambda e: e.epoch_time)

    def share(self, epochs: list[ReplayedEpoch]) -> float:
        """The communication share (exposed ``data`` over the epoch, as ``comm_share``)."""
        return steady_mean(epochs, self.steady, lambda e: e.mean_exposed("data")) / self.mean_epoch(epochs)
