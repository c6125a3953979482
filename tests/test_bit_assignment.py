"""AdaQP's bit-width assignment MILP (Eq. 12): optimal against brute force on small instances,
constraints respected, and lam = 0 / lam = 1 reduce to the single objectives."""

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
    bits = assign_bits(pairs, lam)
    assert [len(b) for b in bits] == [len(p.beta) for p in pairs]
    assert all(set(b.tolist()) <= set(WIDTHS) for b in bits)
    assert objective(pairs, bits, lam) == pytest.approx(_brute_force(pairs, lam), rel=1e-6, abs=1e-9)


def test_single_objective_limits() -> None:
    pairs = _instance(3)
    assert all((b == WIDTHS[-1]).all() for b in assign_bits(pairs, 1.0))  # least variance
    lowest = [np.full(len(p.beta), WIDTHS[0]) for p in pairs]
    fastest = objective_parts(pairs, lowest)[1]
    assert objective_parts(pairs, assign_bits(pairs, 0.0))[1] == pytest.approx(fastest, rel=1e-9)


def test_mid_lambda_trades_variance_for_time() -> None:
    pairs = _instance(4)
    balanced = objective_parts(pairs, assign_bits(pairs, 0.5))
    precise = objective_parts(pairs, assign_bits(pairs, 1.0))
    fast = objective_parts(pairs, assign_bits(pairs, 0.0))
    assert fast[1] <= balanced[1] <= precise[1]
    assert precise[0] <= balanced[0] <= fast[0]


def test_groups_follow_beta_order() -> None:
    beta = np.array([5.0, 1.0, 3.0, 2.0, 4.0])
    assert [g.tolist() for g in group_messages(beta, 2)] == [[1, 3], [2, 4], [0]]


def test_no_messages() -> None:
    empty = PairGroups(beta=np.zeros(0), size=np.zeros(0), theta=1e-9, gamma=1e-5)
    assert [b.tolist() for b in assign_bits([empty, empty], 0.5)] == [[], []]
