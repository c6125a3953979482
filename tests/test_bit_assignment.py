"""AdaQP's bit-width assignment MILP (Eq. 12): optimal against brute force on small instances
when solved exactly, within the asked gap otherwise, the certified gap a true bound, the
rounded relaxation enough on large instances, and lam = 0 / lam = 1 reduce to the single
objectives."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from gnntrain.strategies.graph_parallel.bit_assignment import (
    WIDTHS, PairGroups, assign_bits, group_messages, objective, objective_parts,
)


def _instance(seed: int) -> list[PairGroups]:
    rng = np.random.default_rng(seed)
    return [PairGroups(beta=rng.uniform(0.1, 10.0, n), size=rng.integers(64, 4096, n).astype(float),
                       theta=rng.uniform(1e-9, 4e-9), gamma=rng.uniform(1e-5, 1e-4))
            for n in (3, 2, 2)]


def _brute_force(pairs: list[PairGroups], lam: float) -> float:
    counts = [len(p.beta) for p in pairs]
    best = np.inf
    for combo in itertools.product(WIDTHS, repeat=sum(counts)):
        bits = np.split(np.array(combo), np.cumsum(counts)[:-1])
        best = min(best, objective(pairs, bits, lam))
    return best


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("lam", [0.0, 0.25, 0.5, 0.9, 1.0])
def test_optimum_matches_brute_force(seed: int, lam: float) -> None:
    pairs = _instance(seed)
    best = _brute_force(pairs, lam)
    exact = assign_bits(pairs, lam, gap=0.0)
    assert [len(b) for b in exact.bits] == [len(p.beta) for p in pairs]
    assert all(set(b.tolist()) <= set(WIDTHS) for b in exact.bits)
    assert objective(pairs, exact.bits, lam) == pytest.approx(best, rel=1e-6, abs=1e-9)
    near = assign_bits(pairs, lam, gap=0.01)
    assert near.objective == pytest.approx(objective(pairs, near.bits, lam), rel=1e-12)
    assert near.bound <= best * (1 + 1e-9) + 1e-12 and best <= near.objective * (1 + 1e-9) + 1e-12
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
    rounded = assign_bits(pairs, lam, gap=0.01)
    assert rounded.relaxed and rounded.gap <= 0.01
    branched = assign_bits(pairs, lam, gap=1e-4)
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


def test_groups_follow_beta_order() -> None:
    beta = np.array([5.0, 1.0, 3.0, 2.0, 4.0])
    assert [g.tolist() for g in group_messages(beta, 2)] == [[1, 3], [2, 4], [0]]


def test_no_messages() -> None:
    empty = PairGroups(beta=np.zeros(0), size=np.zeros(0), theta=1e-9, gamma=1e-5)
    assert [b.tolist() for b in assign_bits([empty, empty], 0.5).bits] == [[], []]
