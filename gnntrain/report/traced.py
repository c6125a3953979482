"""A traced run (``cluster.clock=virtual cluster.trace=true``): its summary, its trace and the
epochs its summary's means are taken over, timed again under any network by replay
(:mod:`gnntrain.timing.replay`)."""

from __future__ import annotations

from pathlib import Path

from gnntrain.engine.metrics import read_records
from gnntrain.engine.summary import SUMMARY_FILE, RunSummary, steady_records
from gnntrain.errors import GnntrainError, first_line
from gnntrain.timing import trace
from gnntrain.timing.cluster import Topology
from gnntrain.timing.epoch import EpochTiming
from gnntrain.timing.replay import replay, steady_mean


class Traced:
    """A traced run: its summary, its trace and the network it ran on."""

    def __init__(self, run_dir: Path) -> None:
        path = run_dir / trace.TRACE_FILE
        if not path.is_file():
            raise GnntrainError(f"{run_dir} has no {trace.TRACE_FILE}; valid: the run dir of a run made with "
                                "cluster.clock=virtual cluster.trace=true")
        if not (run_dir / "metrics.jsonl").is_file():
            raise GnntrainError(f"{run_dir} has no metrics.jsonl, whose records say which epochs the run's means "
                                "take (its warm-up left out); valid: a traced run's dir as the run left it")
        self.run_dir = run_dir
        try:
            self.summary = RunSummary.read(run_dir / SUMMARY_FILE)
            network = self.summary.network
            if not isinstance(network, dict):
                raise TypeError(f"its network is {type(network).__name__}, not a mapping")
        except (OSError, ValueError, TypeError, KeyError, AttributeError) as exc:
            raise GnntrainError(f"{run_dir / SUMMARY_FILE}: not a run's summary ({first_line(exc)}); valid: the "
                                "summary.json gnntrain wrote") from None
        self.ranks = trace.read(path)
        self.steady_epochs = {r.epoch for r in steady_records(read_records(run_dir / "metrics.jsonl"),
                                                              self.summary.warmup_epochs_excluded)}
        """The epochs the run's summary took its means over."""

    def under(self, network) -> list[EpochTiming]:
        """Every epoch of the trace replayed under ``network`` (a typed network section)."""
        return replay(self.ranks, Topology.of(network))

    def steady(self, epochs: list[EpochTiming]) -> EpochTiming:
        """The mean of the run's steady epochs among ``epochs`` (as its summary's means)."""
        return steady_mean(epochs, self.steady_epochs)
