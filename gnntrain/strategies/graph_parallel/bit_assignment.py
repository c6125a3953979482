"""AdaQP's bit-width assignment (Sec. 4.2, Eq. 10-12) as a mixed-integer linear program.

One problem per layer and direction. Messages travel over device pairs ``i`` (sender ->
receiver); within a pair they are sorted by their variance term ``beta_k`` and cut into groups
that share a bit-width. With binary ``x[g, b]`` (group ``g`` sent at ``b`` bits) and the
auxiliary ``Z`` (the slowest pair's predicted time):

    min  lam * sum_g sum_b x[g, b] beta_g / (2^b - 1)^2 / V  +  (1 - lam) * Z / T
    s.t. sum_b x[g, b] = 1                                   for every group g
         theta_i sum_{g in i} sum_b x[g, b] size_g b + gamma_i <= Z   for every pair i

``beta_g`` is the sum of its messages' ``beta_k``, ``size_g`` their number of values,
``theta_i, gamma_i`` pair ``i``'s alpha-beta cost model (seconds per bit, seconds). The paper
leaves the scales of the two objectives open; we divide them by their worst cases so that
``lam`` weighs comparable numbers: ``V`` is the variance with every group at the lowest width,
``T`` the slowest pair's time with every group at the highest. ``lam = 1`` minimises the
variance alone (every group at the highest width), ``lam = 0`` the slowest pair's time alone.

Solved with SciPy's HiGHS (``scipy.optimize.milp``) in two steps, because branch and bound on
the whole program takes seconds to minutes at thousands of groups while its relaxation takes
milliseconds. First the LP relaxation (``0 <= x <= 1``): a vertex of it has at most one
fractional group per pair constraint, and each fractional group is rounded to the lowest
width it uses, which keeps every pair within its relaxed time, so the rounded plan is
feasible. The relaxation's optimum is a lower bound of the MILP's, so ``(rounded - bound) /
rounded`` bounds the rounded plan's relative gap to the MILP optimum. Where that certified gap
exceeds ``gap`` (few groups, where one rounding weighs much), the MILP is solved by branch and
bound with HiGHS' relative gap set to ``gap``; ``gap = 0`` solves it exactly.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.optimize import Bounds, LinearConstraint, milp
from scipy.sparse import coo_array

WIDTHS = (2, 4, 8)


@dataclass
class PairGroups:
    """The message groups of one device pair."""

    beta: np.ndarray
    """Variance term of each group (sum over its messages)."""
    size: np.ndarray
    """Values (messages x width) in each group."""
    theta: float
    gamma: float


def group_messages(beta: np.ndarray, group_size: int) -> list[np.ndarray]:
    """Indices of one pair's messages, sorted by ``beta`` and cut into groups of ``group_size``."""
    order = np.argsort(beta, kind="stable")
    return [order[i: i + group_size] for i in range(0, len(order), group_size)]


def objective_parts(pairs: list[PairGroups], bits: list[np.ndarray]) -> tuple[float, float]:
    """(variance, slowest pair's time) of an assignment (bits per group, per pair)."""
    variance = sum(float((p.beta / (2.0 ** b - 1) ** 2).sum()) for p, b in zip(pairs, bits))
    time = max((p.theta * float((p.size * b).sum()) + p.gamma for p, b in zip(pairs, bits)), default=0.0)
    return variance, time


def scales(pairs: list[PairGroups]) -> tuple[float, float]:
    """The worst cases ``V`` and ``T`` that normalise the two objectives."""
    low = [np.full(len(p.beta), WIDTHS[0]) for p in pairs]
    high = [np.full(len(p.beta), WIDTHS[-1]) for p in pairs]
    v, t = objective_parts(pairs, low)[0], objective_parts(pairs, high)[1]
    return (v if v > 0 else 1.0), (t if t > 0 else 1.0)


def objective(pairs: list[PairGroups], bits: list[np.ndarray], lam: float) -> float:
    """Eq. 12's scalarised objective of an assignment."""
    v_scale, t_scale = scales(pairs)
    variance, time = objective_parts(pairs, bits)
    return lam * variance / v_scale + (1.0 - lam) * time / t_scale


@dataclass
class Assignment:
    """A bit-width per group of every pair, with its objective and a certified bound."""

    bits: list[np.ndarray]
    objective: float
    bound: float
    """A lower bound of the MILP optimum (the LP relaxation's, or HiGHS' dual bound)."""
    relaxed: bool
    """Whether the bits are the rounded relaxation (False: branch and bound ran)."""

    @property
    def gap(self) -> float:
        """Relative gap to the MILP optimum, at most: ``(objective - bound) / objective``."""
        return (self.objective - self.bound) / self.objective if self.objective > 0 else 0.0


def assign_bits(pairs: list[PairGroups], lam: float, gap: float = 0.01) -> Assignment:
    """A bit-width for every group of every pair within ``gap`` of Eq. 12's optimum."""
    counts = [len(p.beta) for p in pairs]
    n_groups = sum(counts)
    if n_groups == 0:
        return Assignment([np.zeros(0, dtype=np.int64) for _ in pairs], 0.0, 0.0, True)
    cost, constraints = _program(pairs, counts, lam)
    n_x = n_groups * len(WIDTHS)
    bounds = Bounds(np.zeros(n_x + 1), np.r_[np.ones(n_x), np.inf])
    relaxation = _solved(milp(cost, constraints=constraints, bounds=bounds))
    weights = relaxation.x[:n_x].reshape(n_groups, len(WIDTHS))
    rounded = _split(np.array(WIDTHS)[np.argmax(weights > 1e-9, axis=1)], counts)
    found = Assignment(rounded, objective(pairs, rounded, lam), relaxation.fun, True)
    if found.gap <= gap:
        return found
    exact = _solved(milp(cost, constraints=constraints, integrality=np.r_[np.ones(n_x), 0.0], bounds=bounds,
                         options={"mip_rel_gap": gap}))
    bits = _split(np.array(WIDTHS)[exact.x[:n_x].reshape(n_groups, len(WIDTHS)).argmax(axis=1)], counts)
    return Assignment(bits, objective(pairs, bits, lam), max(exact.mip_dual_bound, relaxation.fun), False)


def _program(pairs: list[PairGroups], counts: list[int], lam: float) -> tuple[np.ndarray, list[LinearConstraint]]:
    """Eq. 12's cost vector over ``(x, Z)`` and its two families of constraints."""
    widths = np.array(WIDTHS, dtype=float)
    n_groups = sum(counts)
    v_scale, t_scale = scales(pairs)
    n_x = n_groups * len(WIDTHS)
    beta = np.concatenate([p.beta for p in pairs])
    cost = np.concatenate([lam * np.outer(beta, 1.0 / (2.0 ** widths - 1) ** 2).ravel() / v_scale,
                           [(1.0 - lam) / t_scale]])

    group_of_x = np.repeat(np.arange(n_groups), len(WIDTHS))
    one_width = coo_array((np.ones(n_x), (group_of_x, np.arange(n_x))), shape=(n_groups, n_x + 1))

    rows, cols, vals, upper = [], [], [], []
    start = 0
    for i, p in enumerate(pairs):
        x = np.arange(start, start + counts[i]) * len(WIDTHS)
        idx = (x[:, None] + np.arange(len(WIDTHS))).ravel()
        rows += [np.full(idx.size + 1, i)]
        cols += [idx, [n_x]]
        vals += [p.theta * np.outer(p.size, widths).ravel(), [-1.0]]
        upper.append(-p.gamma)
        start += counts[i]
    time = coo_array((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
                     shape=(len(pairs), n_x + 1))
    return cost, [LinearConstraint(one_width, 1.0, 1.0), LinearConstraint(time, -np.inf, upper)]


def _solved(result):
    if not result.success:
        raise RuntimeError(f"bit-width assignment failed: {result.message}")
    return result


def _split(choice: np.ndarray, counts: list[int]) -> list[np.ndarray]:
    return list(np.split(choice.astype(np.int64), np.cumsum(counts)[:-1]))
