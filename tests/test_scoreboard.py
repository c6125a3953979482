"""The scoreboard that opens docs/reproducing.md: generated from the committed runs, each row's
verdict by the interval, its cause measured, and the page equal to what the runs say."""

from __future__ import annotations

import pytest

from gnntrain.report.stats import Ratio
from gnntrain.repro import scoreboard
from gnntrain.repro.papers import PAPERS


def test_a_row_judges_by_the_interval_and_measures_the_bound_at_both_shares() -> None:
    pipegcn = scoreboard.Score(PAPERS["pipegcn"], Ratio([1.30, 1.38, 1.45]), 0.66)
    assert pipegcn.claimed == 1.91 and pipegcn.ours.met(pipegcn.claimed) == "**missed**"
    cause = pipegcn.cause()
    assert "baseline share 0.66: at most 1.52x by hiding it" in cause
    assert "the paper's 1.91x at its share 0.6583 is above its bound 1.52x" in cause
    sylvie = scoreboard.Score(PAPERS["sylvie"], Ratio([3.6, 4.0, 4.5]), 0.83)
    assert sylvie.claimed == 1.0 and sylvie.claim_text().startswith('"boost the training throughput by up to 28.1x"')
    assert "at most 5.88x by removing it" in sylvie.cause() and "the paper's" not in sylvie.cause()


def test_the_page_lists_every_paper_between_its_markers() -> None:
    text = scoreboard.DOCS.read_text()
    assert text.index(scoreboard.BEGIN) < text.index("## Targets"), "the scoreboard opens the page"
    shown = text.split(scoreboard.BEGIN, 1)[1].split(scoreboard.END, 1)[0]
    assert all(f"| {scoreboard.NAMES[name]} |" in shown for name in PAPERS)
    assert "[-" not in shown, "no interval below zero"


@pytest.mark.slow
def test_the_committed_scoreboard_is_what_the_committed_runs_say() -> None:
    """15 s here: every paper's runs unpacked and read."""
    assert not scoreboard.differs(), "run python -m gnntrain.repro.scoreboard"
