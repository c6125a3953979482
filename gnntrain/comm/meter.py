"""Byte and time accounting for everything a rank sends.

Every transfer goes through :class:`gnntrain.comm.communicator.Communicator`, which records
at the call site the payload bytes this rank hands to the network (rows x width x element
size, plus any metadata) and the seconds the rank spent blocked on it, under a *kind*
(``halo_fwd``, ``allreduce``, ...). ``wait_s`` is exposed communication: time a rank could not
compute. ``total_s`` is the time the operation was in flight, which differs from ``wait_s`` once
operations overlap with compute. Both come from marks on the device's timeline
(:mod:`gnntrain.clock`; :meth:`CommMeter.record_span`): on a CUDA device the device's times,
read once the device has passed them (:meth:`CommMeter.settle`).

Every kind belongs to one *category*, declared once, so that a time or byte count means the
same thing whichever strategy produced it: the kinds of the shared mechanisms (halo exchange,
pipeline stages, feature fetching, model migration, gradient all-reduce) in
:data:`KIND_CATEGORIES`, a method's own kinds in its registration
(:class:`gnntrain.strategies.registry.Method`), which :func:`declare` adds:

* ``data`` — what a method moves to compute: halo rows and their gradients, activations and
  their gradients between pipeline stages, remote features and labels of sampled nodes,
  migrating models (parameters and accumulated gradients), projections of input features
  and their gradients (P3's partial activations, Naive's intermediate data), the topology of
  subgraphs that travel to where the features are (P3's and Naive's ``topology``);
* ``sync`` — keeping replicas consistent: gradient all-reduces, cross-rank statistics (batch
  norm), assembling weights split over ranks;
* ``control`` — agreeing on what to send: sampling masks, bit-width plans and their traces,
  the ids of fetched rows, the epoch times that micrograph merging decides on;
* ``eval`` — any kind recorded during evaluation (recorded as ``eval_<kind>``);
* traffic that fills historical embeddings before the first epoch trains (GNNPipe's warm-up
  pass, recorded as ``history_<kind>``) and the one exchange of the input's halo rows that
  ``model.precompute_first`` makes before training (``precompute_<kind>``) is ``data``: the
  method moves it to compute;
* ``diag`` — extra traffic for diagnostics (recorded as ``diag_<kind>``), never part of
  training's ``comm_bytes``.
"""

from __future__ import annotations

import contextlib
from collections import defaultdict
from typing import Any, Iterator

KIND_CATEGORIES: dict[str, str] = {
    "halo_fwd": "data",
    "halo_bwd": "data",
    "pipe_fwd": "data",
    "pipe_bwd": "data",
    "feat_fetch": "data",
    "label_fetch": "data",
    "model_migrate": "data",
    "allreduce": "sync",
    "bn_stats": "sync",
    "bn_stats_grad": "sync",
    "fetch_ids": "control",
}
PREFIX_CATEGORIES = {"eval_": "eval", "diag_": "diag", "history_": "data", "precompute_": "data"}
CATEGORIES = ("data", "sync", "control", "eval", "diag")
TRAINING_CATEGORIES = ("data", "sync", "control")


def declare(kinds: dict[str, str]) -> None:
    """Add kinds and their categories (a method's own, at its registration); a kind keeps the
    category it was first declared with."""
    for kind, name in kinds.items():
        if name not in TRAINING_CATEGORIES:
            raise ValueError(f"kind {kind!r} declared with category {name!r}; valid: {', '.join(TRAINING_CATEGORIES)}")
        if KIND_CATEGORIES.setdefault(kind, name) != name:
            raise ValueError(f"kind {kind!r} is already declared as {KIND_CATEGORIES[kind]!r}, not {name!r}")


def category(kind: str) -> str:
    """The category of a recorded kind (prefix included); unknown kinds are an error, so every
    new kind is declared (:func:`declare`)."""
    for prefix, name in PREFIX_CATEGORIES.items():
        if kind.startswith(prefix):
            return name
    if kind not in KIND_CATEGORIES:
        raise KeyError(f"communication kind {kind!r} has no category; declare it with the method that sends it "
                       "(Method.kinds) or in gnntrain.comm.meter")
    return KIND_CATEGORIES[kind]


def by_category(per_kind: dict[str, float], categories: tuple[str, ...] = CATEGORIES) -> dict[str, float]:
    """Sum per-kind figures into ``categories`` (every one present, 0 where nothing was recorded)."""
    sums = dict.fromkeys(categories, 0.0)
    for kind, value in per_kind.items():
        name = category(kind)
        if name in sums:
            sums[name] += value
    return sums


class CommMeter:
    def __init__(self) -> None:
        self.bytes: dict[str, int] = defaultdict(int)
        self.wait_s: dict[str, float] = defaultdict(float)
        self.total_s: dict[str, float] = defaultdict(float)
        self.link_busy_s: dict[str, float] = defaultdict(float)
        self.link_latency_s: dict[str, float] = defaultdict(float)
        self._prefix = ""
        self._spans: list[tuple] = []

    def record(self, kind: str, nbytes: int, wait_s: float, total_s: float | None = None) -> None:
        key = self._prefix + kind
        category(key)
        self.bytes[key] += int(nbytes)
        self.wait_s[key] += wait_s
        self.total_s[key] += wait_s if total_s is None else total_s

    def record_span(self, kind: str, clock: Any, started: Any, reached: Any, resumed: Any,
                    completed: Any = None, not_before: float = 0.0) -> None:
        """An operation timed by marks of ``clock`` (:class:`gnntrain.clock.Clock`): its data
        was ready at ``started``, the rank (its stream, on CUDA) reached its wait at ``reached``
        and went on at ``resumed``; the backend completed it at ``completed`` (None: at
        ``resumed``), no earlier than the host time ``not_before`` (an emulated link's
        completion). Exposed: ``reached -> resumed``; in flight: ``started -> completed``.
        Counted now where every mark is a host time (a CPU), by :meth:`settle` otherwise."""
        key = self._prefix + kind
        self.record(kind, 0, 0.0, 0.0)  # a kind only received is listed, as every rank lists the same kinds
        self._spans.append((key, clock, started, reached, resumed, completed, not_before))
        if all(isinstance(m, float) for m in (started, reached, resumed, completed) if m is not None):
            self.settle()

    def settle(self) -> None:
        """Add the times of the operations recorded since the last call; on a device, waits
        until the device has passed their marks."""
        for key, clock, started, reached, resumed, completed, not_before in self._spans:
            self.wait_s[key] += clock.seconds(reached, resumed)
            done = max(clock.host_time(resumed if completed is None else completed), not_before)
            self.total_s[key] += max(done - clock.host_time(started), 0.0)
        self._spans.clear()

    def record_link(self, kind: str, busy_s: float, latency_s: float) -> None:
        """What a transfer cost on an emulated network's links (:mod:`gnntrain.comm.network`):
        seconds of bytes on the wire / bandwidth and of latency."""
        key = self._prefix + kind
        self.link_busy_s[key] += busy_s
        self.link_latency_s[key] += latency_s

    @contextlib.contextmanager
    def tagged(self, prefix: str) -> Iterator[None]:
        """Record under ``prefix + kind`` inside the block (``eval_`` or ``diag_``)."""
        saved, self._prefix = self._prefix, prefix
        try:
            yield
        finally:
            self._prefix = saved

    def reset(self) -> None:
        self.bytes.clear()
        self.wait_s.clear()
        self.total_s.clear()
        self.link_busy_s.clear()
        self.link_latency_s.clear()
        self._spans.clear()
