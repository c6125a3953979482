"""AdaQP's bit-width assignment (Sec. 4.2, Eq. 10-12) as a mixed-integer linear program.

One problem per layer and direction. The exchange is the paper's ring all-to-all (Fig. 8): in
round ``k`` (1..W-1) each rank sends to the rank ``k`` places to its right, so the device pairs
``i`` (sender -> receiver) fall into rounds. Within a pair the messages are sorted by their
variance term ``beta_k`` and cut into groups that share a bit-width. With binary ``x[g, b]``
(group ``g`` sent at ``b`` bits) and one auxiliary ``Z_r`` per round (the round's slowest
pair's predicted time, Eq. 10):

    min  lam * sum_g sum_b x[g, b] beta_g / (2^b - 1)^2 / V  +  (1 - lam) * sum_r Z_r / T
    s.t. sum_b x[g, b] = 1                                        for every group g
         theta_i sum_{g in i} sum_b x[g, b] size_g b + gamma_i <= Z_r   for every pair i of round r

``beta_g`` is the sum of its messages' ``beta_k`` (squared feature units), ``size_g`` their
number of values, ``theta_i, gamma_i`` pair ``i``'s alpha-beta cost model (seconds per bit,
seconds, profiled one round at a time, as the round runs). The paper writes one problem per
round (Eq. 12); its rounds share no variable, so the sum over rounds is the same problems
solved together, and ``sum_r Z_r`` is the exchange's time with its rounds back to back: the
messages a rank sends in different rounds share its one link one after another.

Scales. The paper weighs the raw terms (``V = T = 1``: variance in squared feature units, time
in seconds), which is the default; ``normalize=True`` divides each by its worst case (``V``:
every group at the lowest width, ``T``: every group at the highest) so that ``lam`` weighs
comparable numbers (our variant, ``strategy.normalize``). The two ends have their optimum in
closed form and are not solved: ``lam = 1`` minimises the variance alone (every group at the
highest width), ``lam = 0`` the time alone (every group at the lowest). A solver would answer
them only to its tolerances: variance terms of 1e-10 (a gradient's) are zero to HiGHS, which
then sends them at whatever width its path reaches.

A group without variance (``beta_g = 0``: its rows are constant, as zero gradients are) costs the
same variance at every width, so the program leaves its width to the solver's path, which the
profiled times steer. Such a group is sent at the lowest width (our choice; the paper is silent):
any width carries a constant exactly, the lowest moves the fewest bytes and never lengthens a
round, so the objective can only fall, and the choice no longer depends on the timings.

Solved with SciPy's HiGHS (``scipy.optimize.milp``) in two steps, because branch and bound on
the whole program takes seconds to minutes at thousands of groups while its relaxation takes
milliseconds. First the LP relaxation (``0 <= x <= 1``): a vertex of it has at most one
fractional group per pair constraint, and each fractional group is rounded to the lowest
width it uses, which keeps every pair within its relaxed time, so the rounded plan is
feasible. The relaxation's optimum is a lower bound of the MILP's, so ``(rounded - bound) /
rounded`` bounds the rounded plan's relative gap to the MILP optimum. Where that certified gap
exceeds ``gap``, the MILP is solved by branch and bound with HiGHS' relative gap set to
``gap`` (``gap = 0`` solves it exactly) for at most ``time_limit`` seconds; a search cut short
keeps the better of its incumbent and the rounded relaxation (the paper sets no limit; its
solver is Gurobi).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from scipy.optimize import LinearConstraint

WIDTHS = (2, 4, 8)
TIME_LIMITED = 1
"""``scipy.optimize.milp``'s status when a limit (time, iterations) stopped the search."""


@dataclass
class PairGroups:
    """The message groups of one device pair."""

    beta: np.ndarray
    """Variance term of each group (sum over its messages)."""
    size: np.ndarray
    """Values (messages x width) in each group."""
    theta: float
    gamma: float
    round: int = 1
    """The ring round the pair's messages travel in: (receiver - sender) mod W."""


def group_messages(beta: np.ndarray, group_size: int) -> list[np.ndarray]:
    """Indices of one pair's messages, sorted by ``beta`` and cut into groups of ``group_size``."""
    order = np.argsort(beta, kind="stable")
    return [order[i: i + group_size] for i in range(0, len(order), group_size)]


def objective_parts(pairs: list[PairGroups], bits: list[np.ndarray]) -> tuple[float, float]:
    """(variance, the rounds' summed time) of an assignment (bits per group, per pair)."""
    variance = sum(float((p.beta / (2.0 ** b - 1) ** 2).sum()) for p, b in zip(pairs, bits))
    slowest: dict[int, float] = {}
    for p, b in zip(pairs, bits):
        slowest[p.round] = max(slowest.get(p.round, 0.0), p.theta * float((p.size * b).sum()) + p.gamma)
    return variance, sum(slowest.values())


def scales(pairs: list[PairGroups], normalize: bool) -> tuple[float, float]:
    """``V`` and ``T``: 1 (the paper's raw terms), or with ``normalize`` the worst cases."""
    if not normalize:
        return 1.0, 1.0
    low = [np.full(len(p.beta), WIDTHS[0]) for p in pairs]
    high = [np.full(len(p.beta), WIDTHS[-1]) for p in pairs]
    v, t = objective_parts(pairs, low)[0], objective_parts(pairs, high)[1]
    return (v if v > 0 else 1.0), (t if t > 0 else 1.0)


def objective(pairs: list[PairGroups], bits: list[np.ndarray], lam: float, normalize: bool = False) -> float:
    """Eq. 12's scalarised objective of an assignment."""
    v_scale, t_scale = scales(pairs, normalize)
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
    """Whether the bits are the rounded relaxation (False: branch and bound's, or the closed form's)."""
    timed_out: bool = False
    """Whether branch and bound ran into its time limit."""

    @property
    def gap(self) -> float:
        """Relative gap to the MILP optimum, at most: ``(objective - bound) / objective``."""
        return (self.objective - self.bound) / self.objective if self.objective > 0 else 0.0


def assign_bits(pairs: list[PairGroups], lam: float, gap: float = 0.01, time_limit: float | None = None,
                normalize: bool = False) -> Assignment:
    """A bit-width for every group of every pair within ``gap`` of Eq. 12's optimum, or the
    best found in ``time_limit`` seconds of branch and bound."""
    from scipy.optimize import Bounds, milp  # here: a second of import that most jobs never need

    counts = [len(p.beta) for p in pairs]
    n_groups = sum(counts)
    if n_groups == 0:
        return Assignment([np.zeros(0, dtype=np.int64) for _ in pairs], 0.0, 0.0, True)
    if lam in (0.0, 1.0):
        bits = _lowest_without_variance(pairs, [np.full(n, WIDTHS[-1] if lam else WIDTHS[0]) for n in counts])
        value = objective(pairs, bits, lam, normalize)
        return Assignment(bits, value, value, False)
    cost, constraints, n_x = _program(pairs, counts, lam, normalize)
    bounds = Bounds(np.zeros(cost.size), np.r_[np.ones(n_x), np.full(cost.size - n_x, np.inf)])
    relaxation = _solved(milp(cost, constraints=constraints, bounds=bounds))
    weights = relaxation.x[:n_x].reshape(n_groups, len(WIDTHS))
    rounded = _lowest_without_variance(pairs, _split(np.array(WIDTHS)[np.argmax(weights > 1e-9, axis=1)], counts))
    found = Assignment(rounded, objective(pairs, rounded, lam, normalize), relaxation.fun, True)
    if found.gap <= gap:
        return found
    options = {"mip_rel_gap": gap} | ({} if time_limit is None else {"time_limit": time_limit})
    search = milp(cost, constraints=constraints, integrality=np.r_[np.ones(n_x), np.zeros(cost.size - n_x)],
                  bounds=bounds, options=options)
    timed_out = search.status == TIME_LIMITED
    if timed_out and search.x is None:
        found.timed_out = True
        return found
    if not timed_out:
        _solved(search)
    bits = _lowest_without_variance(
        pairs, _split(np.array(WIDTHS)[search.x[:n_x].reshape(n_groups, len(WIDTHS)).argmax(axis=1)], counts))
    branched = Assignment(bits, objective(pairs, bits, lam, normalize), max(search.mip_dual_bound, relaxation.fun),
                          False, timed_out)
    if branched.objective > found.objective:
        found.bound, found.timed_out = branched.bound, timed_out
        return found
    return branched


def _program(pairs: list[PairGroups], counts: list[int], lam: float,
             normalize: bool) -> tuple[np.ndarray, list[LinearConstraint], int]:
    """Eq. 12's cost vector over ``(x, Z_1..Z_R)``, its two families of constraints and the
    number of ``x`` variables."""
    from scipy.optimize import LinearConstraint
    from scipy.sparse import coo_array

    widths = np.array(WIDTHS, dtype=float)
    n_groups = sum(counts)
    v_scale, t_scale = scales(pairs, normalize)
    n_x = n_groups * len(WIDTHS)
    rounds = sorted({p.round for p in pairs})
    z_of_round = {r: n_x + i for i, r in enumerate(rounds)}
    n_vars = n_x + len(rounds)
    beta = np.concatenate([p.beta for p in pairs])
    cost = np.concatenate([lam * np.outer(beta, 1.0 / (2.0 ** widths - 1) ** 2).ravel() / v_scale,
                           np.full(len(rounds), (1.0 - lam) / t_scale)])

    group_of_x = np.repeat(np.arange(n_groups), len(WIDTHS))
    one_width = coo_array((np.ones(n_x), (group_of_x, np.arange(n_x))), shape=(n_groups, n_vars))

    rows, cols, vals, upper = [], [], [], []
    start = 0
    for i, p in enumerate(pairs):
        x = np.arange(start, start + counts[i]) * len(WIDTHS)
        idx = (x[:, None] + np.arange(len(WIDTHS))).ravel()
        rows += [np.full(idx.size + 1, i)]
        cols += [idx, [z_of_round[p.round]]]
        vals += [p.theta * np.outer(p.size, widths).ravel(), [-1.0]]
        upper.append(-p.gamma)
        start += counts[i]
    time = coo_array((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
                     shape=(len(pairs), n_vars))
    return cost, [LinearConstraint(one_width, 1.0, 1.0), LinearConstraint(time, -np.inf, upper)], n_x


def _lowest_without_variance(pairs: list[PairGroups], bits: list[np.ndarray]) -> list[np.ndarray]:
    """``bits`` with every group of ``beta_g = 0`` at the lowest width."""
    return [np.where(p.beta == 0, WIDTHS[0], b) for p, b in zip(pairs, bits)]


def _solved(result):
    if not result.success:
        raise RuntimeError(f"bit-width assignment failed: {result.message}")
    return result


def _split(choice: np.ndarray, counts: list[int]) -> list[np.ndarray]:
    return list(np.split(choice.astype(np.int64), np.cumsum(counts)[:-1]))
