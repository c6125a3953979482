"""AdaQP's bit-width assignment MILP (Eq. 12): optimal against brute force on small instances
(pairs in two ring rounds, the paper's raw terms and the normalised variant) when solved
exactly, within the asked gap otherwise, the certified gap a true bound, the rounded
relaxation enough on large instances, branch and bound bounded in time, and lam = 0 /
lam = 1 reduce to the single objectives."""

from __future__ import annotations

import itertools
import time

import numpy as np
import pytest

from gnntrain.strategies.graph_parallel.bit_assignment import (
    WIDTHS, PairGroups, assign_bits, group_messages, objective, objective_parts,
)


def _instance(seed: int) -> list[PairGroups]:
    """Three pairs in two ring rounds; variance terms scaled so that the raw terms trade off."""
    rng = np.random.default_rng(seed)
    return [PairGroups(beta=rng.uniform(0.1, 10.0, n) * 1e-4, size=rng.integers(64, 4096, n).astype(float),
                       theta=rng.uniform(1e-9, 4e-9), gamma=rng.uniform(1e-5, 1e-4), round=r)
            for n, r in ((3, 1), (2, 2), (2, 1))]


def _brute_force(pairs: list[PairGroups], lam: float, normalize: bool) -> float:
    counts = [len(p.beta) for p in pairs]
    best = np.inf
    for combo in itertools.product(WIDTHS, repeat=sum(counts)):
        bits = np.split(np.array(combo), np.cumsum(counts)[:-1])
        best = min(best, objective(pairs, bits, lam, normalize))
    return best


def test_rounds_add_up_and_pairs_of_a_round_wait_for_the_slowest() -> None:
    pairs = _instance(0)
    bits = [np.full(len(p.beta), 4) for p in pairs]
    times = [p.theta * float((p.size * 4).sum()) + p.gamma for p in pairs]
    assert objective_parts(pairs, bits)[1] == pytest.approx(max(times[0], times[2]) + times[1], rel=1e-12)


@pytest.mark.parametrize("normalize", [False, True])
@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("lam", [0.0, 0.25, 0.5, 0.9, 1.0])
def test_optimum_matches_brute_force(seed: int, lam: float, normalize: bool) -> None:
    pairs = _instance(seed)
    best = _brute_force(pairs, lam, normalize)
    exact = assign_bits(pairs, lam, gap=0.0, normalize=normalize)
    assert [len(b) for b in exact.bits] == [len(p.beta) for p in pairs]
    assert all(set(b.tolist()) <= set(WIDTHS) for b in exact.bits)
    assert objective(pairs, exact.bits, lam, normalize) == pytest.approx(best, rel=1e-6, abs=1e-12)
    near = assign_bits(pairs, lam, gap=0.01, normalize=normalize)
    assert near.objective == pytest.approx(objective(pairs, near.bits, lam, normalize), rel=1e-12)
    assert near.bound <= best * (1 + 1e-9) + 1e-15 and best <= near.objective * (1 + 1e-9) + 1e-15
    assert near.gap <= 0.01


def _large_instance(seed: int, pairs: int = 12, messages: int = 2000, group_size: int = 20) -> list[PairGroups]:
    """A 4-worker exchange's pairs with heavy-tailed traces, as AdaQP sees them."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(pairs):
        beta = rng.lognormal(0.0, 2.0, messages) * rng.uniform(0.1, 10.0)
        groups = group_messages(beta, group_size)
        out.append(PairGroups(np.array([beta[g].sum() for g in groups]), np.array([len(g) * 256.0 for g in groups]),
                              theta=rng.uniform(0.5e-10, 2e-10), gamma=rng.uniform(1e-5, 1e-4)))
    return out


@pytest.mark.parametrize("lam", [0.1, 0.5, 0.9])
def test_rounded_relaxation_is_within_one_percent_on_large_instances(lam: float) -> None:
    pairs = _large_instance(5)
    rounded = assign_bits(pairs, lam, gap=0.01, normalize=True)
    assert rounded.relaxed and rounded.gap <= 0.01
    assert len({int(b) for bits in rounded.bits for b in bits}) > 1  # a real trade-off, not one width
    branched = assign_bits(pairs, lam, gap=1e-4, normalize=True)
    assert rounded.objective <= branched.objective / (1 - 0.01)
    assert rounded.bound <= branched.objective * (1 + 1e-9)


def test_single_objective_limits() -> None:
    pairs = _instance(3)
    assert all((b == WIDTHS[-1]).all() for b in assign_bits(pairs, 1.0).bits)  # least variance
    lowest = [np.full(len(p.beta), WIDTHS[0]) for p in pairs]
    fastest = objective_parts(pairs, lowest)[1]
    assert objective_parts(pairs, assign_bits(pairs, 0.0).bits)[1] == pytest.approx(fastest, rel=1e-9)


def test_mid_lambda_trades_variance_for_time() -> None:
    pairs = _instance(4)
    balanced = objective_parts(pairs, assign_bits(pairs, 0.5).bits)
    precise = objective_parts(pairs, assign_bits(pairs, 1.0).bits)
    fast = objective_parts(pairs, assign_bits(pairs, 0.0).bits)
    assert fast[1] <= balanced[1] <= precise[1]
    assert precise[0] <= balanced[0] <= fast[0]


def test_branch_and_bound_stops_at_its_time_limit_with_a_feasible_plan() -> None:
    pairs = _large_instance(7, pairs=12, messages=4000, group_size=10)
    start = time.perf_counter()
    cut = assign_bits(pairs, 0.5, gap=1e-9, time_limit=0.2, normalize=True)
    assert time.perf_counter() - start < 10
    assert cut.timed_out
    assert all(set(b.tolist()) <= set(WIDTHS) for b in cut.bits)
    rounded = assign_bits(pairs, 0.5, gap=1.0, normalize=True)
    assert cut.objective <= rounded.objective * (1 + 1e-12)
    assert cut.bound <= cut.objective


def test_groups_follow_beta_order() -> None:
    beta = np.array([5.0, 1.0, 3.0, 2.0, 4.0])
    assert [g.tolist() for g in group_messages(beta, 2)] == [[1, 3], [2, 4], [0]]


def test_no_messages() -> None:
    empty = PairGroups(beta=np.zeros(0), size=np.zeros(0), theta=1e-9, gamma=1e-5)
    assert [b.tolist() for b in assign_bits([empty, empty], 0.5).bits] == [[], []]


@pytest.mark.parametrize("lam", [0.5, 1.0])
def test_a_group_without_variance_goes_at_the_lowest_width_whatever_the_timings(lam: float) -> None:
    """A constant group's width costs no variance, so the program alone leaves it to the solver's
    path, which the profiled times steer: it is sent at the lowest width, and two runs that
    profiled different link speeds choose the same widths where ``lam = 1``."""
    rng = np.random.default_rng(1)
    for _ in range(30):
        shapes = [(int(rng.integers(1, 30)), int(rng.integers(1, 4))) for _ in range(int(rng.integers(1, 7)))]
        betas = [np.where(rng.random(n) < 0.4, 0.0, rng.lognormal(-15, 3, n)) for n, _ in shapes]
        sizes = [rng.integers(16, 800, n).astype(float) for n, _ in shapes]
        plans = []
        for timing in range(2):
            pairs = [PairGroups(beta, size, theta=10 ** rng.uniform(-15, -7), gamma=10 ** rng.uniform(-7, -2), round=r)
                     for beta, size, (_, r) in zip(betas, sizes, shapes)]
            found = assign_bits(pairs, lam)
            assert all((b[p.beta == 0] == WIDTHS[0]).all() for p, b in zip(pairs, found.bits))
            plans.append([b.tolist() for b in found.bits])
        if lam == 1.0:
            assert plans[0] == plans[1] == [np.where(b > 0, WIDTHS[-1], WIDTHS[0]).tolist() for b in betas]
