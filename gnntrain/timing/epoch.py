"""One epoch timed: the one result a live run (:mod:`gnntrain.engine.loop`), a replay
(:mod:`gnntrain.timing.replay`) and a prediction (:mod:`gnntrain.predict`) all give, so that the
three can be set side by side field by field.

From every rank's :class:`~gnntrain.timing.accounting.RankAccount`: the epoch is the slowest
rank's; compute and each part of the communication (per training category and per kind: wait,
transfer, hidden) the mean over ranks, so that compute plus exposed communication is the mean
rank's epoch; bytes the sum over ranks (payload bytes as the meter counts them at the call site).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from statistics import fmean

from gnntrain.timing.accounting import RankAccount
from gnntrain.timing.kinds import TRAINING_CATEGORIES, category

PARTS = ("wait", "transfer", "hidden")
"""How communication time splits (:class:`gnntrain.timing.accounting.Split`)."""
FIGURES = ("wait_by_category", "transfer_by_category", "hidden_by_category", "wait_by_kind", "transfer_by_kind",
           "hidden_by_kind", "bytes_by_kind")
"""The per-category and per-kind figures of an :class:`EpochTiming`."""


@dataclass(frozen=True)
class EpochTiming:
    """One epoch's time and its parts (module docstring), seconds and bytes."""

    epoch: int
    clock: str
    """What it was timed on: a live run's ``wall`` or ``virtual`` clock, a replay of a trace
    (``replayed``), a prediction's written trace replayed (``predicted``)."""
    epoch_time: float
    """The slowest rank's epoch."""
    compute_time: float
    """Mean over ranks."""
    wait_by_category: dict[str, float]
    """Per training category (``data``, ``sync``, ``control``), mean over ranks: blocked while
    none of the category's transfers could move (a peer not there yet)."""
    transfer_by_category: dict[str, float]
    """Blocked while a transfer moved."""
    hidden_by_category: dict[str, float]
    """Moving while the rank computed."""
    wait_by_kind: dict[str, float] = field(default_factory=dict)
    transfer_by_kind: dict[str, float] = field(default_factory=dict)
    hidden_by_kind: dict[str, float] = field(default_factory=dict)
    bytes_by_kind: dict[str, float] = field(default_factory=dict)
    """Payload bytes per kind, summed over ranks."""
    per_rank_epoch: list[float] = field(default_factory=list)
    per_rank_compute: list[float] = field(default_factory=list)

    @classmethod
    def of_ranks(cls, epoch: int, clock: str, ranks: list[RankAccount],
                 bytes_by_kind: dict[str, float] | None = None) -> EpochTiming:
        """The epoch from every rank's account."""
        def mean(figure) -> float:
            return fmean(figure(r) for r in ranks)

        kinds = sorted({k for r in ranks for k in r.kinds if category(k) in TRAINING_CATEGORIES})
        parts = {part: ({c: mean(lambda r, c=c, p=part: getattr(r.categories[c], p)) for c in TRAINING_CATEGORIES},
                        {k: mean(lambda r, k=k, p=part: getattr(r.kinds[k], p) if k in r.kinds else 0.0) for k in kinds})
                 for part in PARTS}
        return cls(epoch=epoch, clock=clock, epoch_time=max(r.epoch_time for r in ranks),
                   compute_time=mean(lambda r: r.compute_time),
                   wait_by_category=parts["wait"][0], transfer_by_category=parts["transfer"][0],
                   hidden_by_category=parts["hidden"][0], wait_by_kind=parts["wait"][1],
                   transfer_by_kind=parts["transfer"][1], hidden_by_kind=parts["hidden"][1],
                   bytes_by_kind=dict(bytes_by_kind or {}),
                   per_rank_epoch=[r.epoch_time for r in ranks], per_rank_compute=[r.compute_time for r in ranks])

    @classmethod
    def mean(cls, epochs: list[EpochTiming]) -> EpochTiming:
        """The mean epoch of ``epochs`` (every figure averaged; the slowest rank's epoch too, as
        the summaries' ``mean_epoch_time``); epoch 0."""
        def average(name: str) -> dict[str, float]:
            keys = sorted({k for e in epochs for k in getattr(e, name)})
            return {k: fmean(getattr(e, name).get(k, 0.0) for e in epochs) for k in keys}

        ranks = len(epochs[0].per_rank_epoch)
        return cls(epoch=0, clock=epochs[0].clock, epoch_time=fmean(e.epoch_time for e in epochs),
                   compute_time=fmean(e.compute_time for e in epochs),
                   **{name: average(name) for name in FIGURES},
                   per_rank_epoch=[fmean(e.per_rank_epoch[r] for e in epochs) for r in range(ranks)],
                   per_rank_compute=[fmean(e.per_rank_compute[r] for e in epochs) for r in range(ranks)])

    def scaled(self, factor: float) -> EpochTiming:
        """Every time and byte count times ``factor`` (an epoch of ``factor`` times the work written)."""
        if factor == 1:
            return self
        def times(values: dict[str, float]) -> dict[str, float]:
            return {k: v * factor for k, v in values.items()}

        return replace(self, epoch_time=self.epoch_time * factor, compute_time=self.compute_time * factor,
                       **{name: times(getattr(self, name)) for name in FIGURES},
                       per_rank_epoch=[v * factor for v in self.per_rank_epoch],
                       per_rank_compute=[v * factor for v in self.per_rank_compute])

    def split(self, category: str) -> dict[str, float]:
        """A training category's seconds waiting, in transfer and hidden (0 where it has none)."""
        return {part: getattr(self, f"{part}_by_category").get(category, 0.0) for part in PARTS}

    def exposed(self, name: str) -> float:
        """Exposed seconds (wait plus transfer) of a training category or a kind."""
        if name in self.wait_by_category:
            return self.wait_by_category[name] + self.transfer_by_category[name]
        return self.wait_by_kind.get(name, 0.0) + self.transfer_by_kind.get(name, 0.0)

    def in_flight(self, name: str) -> float:
        """In-flight seconds (transfer plus hidden) of a training category or a kind."""
        if name in self.hidden_by_category:
            return self.transfer_by_category[name] + self.hidden_by_category[name]
        return self.transfer_by_kind.get(name, 0.0) + self.hidden_by_kind.get(name, 0.0)

    @property
    def exposed_time(self) -> float:
        """Exposed communication of every training category, mean over ranks."""
        return sum(self.exposed(c) for c in TRAINING_CATEGORIES)

    def share(self, categories: tuple[str, ...] = ("data",)) -> float:
        """The communication share: exposed time of ``categories`` over the epoch."""
        return sum(self.exposed(c) for c in categories) / self.epoch_time if self.epoch_time > 0 else 0.0

    @property
    def comm_bytes(self) -> float:
        """Training bytes (categories ``data``, ``sync``, ``control``), summed over ranks."""
        return sum(b for k, b in self.bytes_by_kind.items() if category(k) in TRAINING_CATEGORIES)

    def breakdown(self) -> str:
        """One line: the epoch, its compute and each category's exposed time (ms)."""
        parts = ", ".join(f"{c} {self.exposed(c) * 1e3:.2f}" for c in TRAINING_CATEGORIES)
        return (f"{self.epoch_time * 1e3:.2f} ms per epoch ({self.clock} clock; compute {self.compute_time * 1e3:.2f}, "
                f"exposed {parts} ms; means over ranks)")

    def to_dict(self) -> dict:
        return {**asdict(self), "exposed_time": self.exposed_time, "comm_bytes": self.comm_bytes}
