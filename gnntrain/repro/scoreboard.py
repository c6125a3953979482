"""The scoreboard that opens ``docs/reproducing.md``: one row per reproduced paper — its headline
claim, our speed-up for the same comparison with its interval, the verdict, and the measured
cause of the gap — and one figure of all of them (``results/scoreboard.png``), generated from the
committed runs (each paper's ``results/<paper>/runs.tar.gz``), so that ``make check-tables``
fails where the page says other than the runs do.

A row compares what the paper's share curve compares (:class:`~gnntrain.repro.paper.Curve`): its
baseline's and its method's runs of the headline's speed sweeps, one pair per interleaved round,
timed from the first epoch neither warms up or examines in (:func:`gnntrain.repro.tables.timed_from`).
The claim is the paper's point where the curve has one (:attr:`Curve.paper_speedup`), else its
headline in words and the least speed-up that implies (:attr:`~gnntrain.repro.paper.Paper.claim`).
The verdict is :meth:`~gnntrain.report.stats.Ratio.met`: met only where the whole interval is
past the claim. The cause is measured from the same runs: the baseline's communication share
``s`` (the paper's definition, :func:`gnntrain.repro.tables.share`) and the most a method can gain
there — ``1 / (1 - s)`` for one that removes communication, ``1 / max(s, 1 - s)`` for one that
hides it — beside the same bound at the paper's own share, where the paper gives it: a claim
above its own bound was not won by communication alone, one below ours is within reach.

Usage: ``python -m gnntrain.repro.scoreboard`` writes the block between the markers of
``docs/reproducing.md`` and the figure; ``--check`` only says whether they differ (exit 1).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from statistics import mean

from gnntrain.report import markdown
from gnntrain.report.runs import load_run
from gnntrain.report.stats import Ratio
from gnntrain.repro import CHECKOUT
from gnntrain.repro.archive import extract_runs_archive
from gnntrain.repro.build import REPEATS
from gnntrain.repro.paper import Paper
from gnntrain.repro.papers import PAPERS
from gnntrain.repro.replayed import traced_jobs
from gnntrain.repro.tables import error_bars, share, speedup, timed_from
from gnntrain.storage.files import save_figure, write_atomically

DOCS = CHECKOUT / "docs" / "reproducing.md"
FIGURE = CHECKOUT / "results" / "scoreboard.png"
BEGIN, END = "<!-- scoreboard: python -m gnntrain.repro.scoreboard writes this block -->", "<!-- /scoreboard -->"
NAMES = {"pipegcn": "PipeGCN", "bns": "BNS-GCN", "adaqp": "AdaQP", "gnnpipe": "GNNPipe", "hopgnn": "HopGNN",
         "neutrontp": "NeutronTP", "sancus": "Sancus", "sylvie": "Sylvie", "pipeqs": "PipeQS", "granndis": "GraNNDis"}


@dataclass(frozen=True)
class Score:
    """One paper's row."""

    paper: Paper
    ours: Ratio
    share: float
    """The baseline's communication share in our runs, mean over the rounds."""

    @property
    def claimed(self) -> float:
        curve = self.paper.curve
        return curve.paper_speedup if curve.paper_speedup is not None else self.paper.claim[1]

    def claim_text(self) -> str:
        curve = self.paper.curve
        if curve.paper_speedup is not None:
            return f"{curve.paper_speedup:g}x ({curve.paper_source})"
        return self.paper.claim[0]

    def bound(self, s: float) -> float:
        return 1 / (1 - s) if self.paper.curve.removes else 1 / max(s, 1 - s)

    def cause(self) -> str:
        """What the runs measure of the gap: the share, the bound there, and the paper's point
        against its own bound."""
        curve, ours = self.paper.curve, self.bound(self.share)
        text = (f"baseline share {self.share:.2f}: at most {ours:.2f}x by {'removing' if curve.removes else 'hiding'} "
                f"it; ours is {self.ours.median / ours:.0%} of that")
        if curve.paper_share is not None and curve.paper_speedup is not None:
            theirs = self.bound(curve.paper_share)
            text += (f"; the paper's {curve.paper_speedup:g}x at its share {curve.paper_share:g} is "
                     + (f"above its bound {theirs:.2f}x (not from communication alone)" if curve.paper_speedup > theirs
                        else f"within its bound {theirs:.2f}x"))
        return text


def score(paper: Paper, runs_root: Path) -> Score:
    """The paper's row from its runs unpacked under ``runs_root``."""
    curve = paper.curve
    base_job, method_job = traced_jobs(curve, paper.sweeps)
    pairs = [(load_run(runs_root / curve.traced[0] / f"repeat{r}" / str(base_job)),
              load_run(runs_root / curve.traced[1] / f"repeat{r}" / str(method_job))) for r in range(REPEATS)]
    base, method = [b for b, _ in pairs], [m for _, m in pairs]
    return Score(paper, speedup(base, method, timed_from(base + method)), mean(share(run) for run in base))


def scores() -> list[Score]:
    """Every paper's row, from its committed runs."""
    found = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, paper in PAPERS.items():
            runs = extract_runs_archive(CHECKOUT / "results" / name / "runs.tar.gz", Path(tmp) / name)
            found.append(score(paper, runs))
    return found


def block(rows: list[Score]) -> str:
    """The markdown between :data:`BEGIN` and :data:`END`."""
    table = [{"paper": NAMES[s.paper.name], "compares": s.paper.curve.label, "claim": s.claim_text(),
              "ours (virtual clock)": str(s.ours), "verdict": s.ours.met(s.claimed), "measured cause": s.cause()}
             for s in rows]
    met = sum(s.ours.met(s.claimed) == "met" for s in rows)
    return (f"{BEGIN}\n\n## Scoreboard: which claims hold here, and by how much\n\nEach paper's headline speed-up "
            f"beside ours for the same comparison, from the committed runs of its table (3 interleaved rounds, "
            f"median [95% interval of the geometric mean], on the virtual clock at ogbn-arxiv's size; "
            f"`results/<paper>/table.md` has the setting). {met} of {len(rows)} claims are met (the whole interval "
            f"at or past the claim). The tables are older than the code they measure until they are rebuilt on one "
            f"cluster each (`make check-tables`).\n\n{markdown(table)}\n![scoreboard](../results/scoreboard.png)\n\n{END}")


def plot(rows: list[Score], path: Path) -> None:
    """Ours (median, interval) beside each claim, one row per paper, on a log axis."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.5, 0.45 * len(rows) + 1.6))
    ys = list(range(len(rows)))[::-1]
    ax.errorbar([s.ours.median for s in rows], ys, xerr=error_bars([s.ours for s in rows]),
                fmt="o", capsize=3, label="ours: median, 95% interval")
    ax.plot([s.claimed for s in rows], ys, "*", markersize=11, label="the paper's claim (its least, for an 'up to')")
    ax.axvline(1.0, color="grey", linewidth=0.8)
    ax.set_xscale("log")
    ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda value, _: f"{value:g}x"))
    ax.xaxis.set_minor_formatter(matplotlib.ticker.FuncFormatter(
        lambda value, _: f"{value:g}x" if value in (1.5, 3.0, 5.0) else ""))
    ax.set_yticks(ys, [NAMES[s.paper.name] for s in rows])
    ax.set_xlabel("speed-up over the paper's baseline (log scale)")
    ax.set_title("The papers' headline speed-ups and ours\nogbn-arxiv-sized graphs, virtual clock, 3 interleaved rounds",
                 fontsize="medium")
    ax.legend(fontsize="small", loc="lower right")
    fig.tight_layout()
    save_figure(fig, path, dpi=110)
    plt.close(fig)


def with_block(text: str, new: str) -> str:
    """``text`` (the page) with its scoreboard block replaced by ``new``."""
    if BEGIN not in text or END not in text:
        raise ValueError(f"{DOCS} has no scoreboard markers")
    head, rest = text.split(BEGIN, 1)
    return head + new + rest.split(END, 1)[1]


def differs() -> bool:
    """Whether the page's scoreboard says other than the committed runs do."""
    text = DOCS.read_text()
    return with_block(text, block(scores())) != text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only say whether the page differs (exit 1 if so)")
    args = parser.parse_args(argv)
    if args.check:
        stale = differs()
        print(f"{DOCS.relative_to(CHECKOUT)}: the scoreboard " + ("differs from the committed runs; write it: python -m "
                                                                  "gnntrain.repro.scoreboard" if stale else
                                                                  "matches the committed runs"))
        return 1 if stale else 0
    rows = scores()
    write_atomically(DOCS, with_block(DOCS.read_text(), block(rows)))
    plot(rows, FIGURE)
    print(f"wrote the scoreboard into {DOCS} and {FIGURE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
