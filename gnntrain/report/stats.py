"""The statistics every table gives: a mean with its 95% Student-t interval (:func:`interval`),
and a speed-up measured in interleaved rounds or paired seeds (:class:`Ratio`, :func:`paired_ratio`),
whose interval is taken on the log scale: a ratio's spread is multiplicative, and its interval
never reaches 0."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass


def interval(values: list[float]) -> tuple[float | None, float | None]:
    """Mean and the half-width of its 95% Student-t interval (None with fewer than 2 values)."""
    if not values:
        return None, None
    mean = statistics.fmean(values)
    if len(values) < 2:
        return mean, None
    from scipy.stats import t

    return mean, float(t.ppf(0.975, len(values) - 1)) * statistics.stdev(values) / math.sqrt(len(values))


def paired_ratio(base: list[dict], rows: list[dict], key: str) -> Ratio | None:
    """``base``'s ``key`` over that of ``rows``, one ratio per seed both have a value at (a
    time: above 1, ``rows`` are faster); None where no seed pairs them."""
    by_seed = {row["seed"]: row[key] for row in base if row.get(key) is not None}
    ratios = [by_seed[row["seed"]] / row[key] for row in rows
              if row.get(key) is not None and row["seed"] in by_seed and row[key] > 0]
    return Ratio(ratios) if ratios else None


WIDE = 2.0
"""An interval whose upper end exceeds this multiple of its lower end decides little: more rounds
are needed (:attr:`Ratio.wide`)."""


@dataclass
class Ratio:
    """A speed-up measured in several interleaved rounds: one ratio per round."""

    values: list[float]

    @property
    def median(self) -> float:
        return statistics.median(self.values)

    @property
    def bounds(self) -> tuple[float, float] | None:
        """The 95% interval of the ratios' geometric mean: the Student-t interval of the mean of
        their logarithms, exponentiated (None with one round). A ratio ``r`` and ``1 / r`` are
        equally far from 1 on this scale, and no end can be 0 or below."""
        centre, half = interval([math.log(value) for value in self.values])
        return None if half is None else (math.exp(centre - half), math.exp(centre + half))

    @property
    def wide(self) -> bool:
        """Whether the interval spans more than a factor of :data:`WIDE`."""
        return self.bounds is not None and self.bounds[1] > WIDE * self.bounds[0]

    def met(self, target: float) -> str:
        """``met`` where the interval lies at or above ``target``, ``missed`` where it lies below,
        else ``undecided`` (the spread straddles it)."""
        low, high = self.bounds or (self.median, self.median)
        return "met" if low >= target else "**missed**" if high < target else "undecided (within the spread)"

    def verdict(self) -> str:
        """``ahead`` where the interval lies above 1, ``behind`` where below, else ``undecided``
        (one round gives no interval: undecided)."""
        if self.bounds is None:
            return "undecided (1 pair)"
        low, high = self.bounds
        return "ahead" if low > 1 else "behind" if high < 1 else "undecided"

    def __str__(self) -> str:
        if self.bounds is None:
            return f"{self.median:.2f}x (1 round)"
        return (f"{self.median:.2f}x [{self.bounds[0]:.2f}, {self.bounds[1]:.2f}]"
                + (f" (spans more than {WIDE:g}x: more rounds needed)" if self.wide else ""))
