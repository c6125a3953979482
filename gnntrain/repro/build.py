"""Reproduce a paper's headline table and figures in shape: ``make repro-<paper>`` (its
declaration: :mod:`gnntrain.repro.papers`).

Each sweep runs through ``gnntrain -m`` (Hydra multirun, so it runs unchanged under a cluster
launcher) into ``multirun/repro/<paper>/<sweep>/``; the tables are then built from the runs'
own ``summary.json`` and ``metrics.jsonl`` (:mod:`gnntrain.report`) and written to
``results/<paper>/``: ``table.md`` (the paper's rows and columns, the paper's figure beside
ours, the setting and the git commit), PNG figures, ``runs.csv`` (every run's figures) and
``runs.tar.gz`` (the files of the runs it read, :mod:`gnntrain.repro.archive`: ``--tables-only
--runs <them unpacked>`` rebuilds the table from them).

``--scale small`` (default) uses the CPU-sized presets (``conf/experiment/<table>.yaml``: described
links, timed on the virtual clock and calibrated to the paper's communication share; accuracy on Cora);
``--scale paper`` the paper-sized ones (``<table>_paper.yaml``) on a GPU cluster, where the
accuracy columns come from the same runs. ``runs.csv`` gives each job's wall time (``wall_s``);
``--dry-run`` lists the sweeps, their jobs and the wall time those records suggest, and starts
nothing (:mod:`gnntrain.repro.plan`).
Usage: ``python -m gnntrain.repro pipegcn|bns|adaqp|gnnpipe|hopgnn [--scale small|paper] [--only SWEEP,...]
[--dry-run]``.
"""

from __future__ import annotations

import argparse
import os
import re
import time
from pathlib import Path

from gnntrain.data.phases import quiet
from gnntrain.errors import GnntrainError, command_errors
from gnntrain.timing.cluster import link_overrides
from gnntrain.job.api import compose
from gnntrain.job.composition import typed_run
from gnntrain.report import markdown, write_csv
from gnntrain.report.runs import Run, find_runs
from gnntrain.repro import CHECKOUT, use_shared_data
from gnntrain.repro.archive import write_runs_archive
from gnntrain.repro.jobs import git_commit
from gnntrain.repro.paper import Paper
from gnntrain.repro.papers import PAPERS
from gnntrain.repro.plan import Countdown, Sweep, dry_run, expand, launch, timed_rows
from gnntrain.repro.replayed import SEPARATE, TRACING, replayed_curve, replayed_section, traced_runs
from gnntrain.repro.staleness import write_manifest
from gnntrain.storage.files import write_atomically

REPEATS = 3
"""How many times each speed sweep runs (seeds 0, 1, ...), in interleaved rounds (:func:`planned`)."""


ACCURACY_PRESETS = ("experiment=accuracy", "experiment=bns_accuracy", "experiment=gnnpipe_accuracy", "experiment=hopgnn_accuracy")


def paper_sized(overrides: list[str]) -> list[str] | None:
    """A small sweep's paper-sized form: the ``_paper`` preset where there is one (a preset
    without one is paper-sized already); None for the CPU-sized accuracy sweeps (paper-sized
    runs report their own accuracy)."""
    if any(preset in overrides for preset in ACCURACY_PRESETS):
        return None
    sized = []
    for o in overrides:
        if o.startswith("experiment=") and (CHECKOUT / "conf" / "experiment" / f"{o.split('=')[1]}_paper.yaml").is_file():
            o = f"{o}_paper"
        if not o.startswith("network"):
            sized.append(o)
    return sized


def planned(paper: Paper, scale: str, only: list[str] | None, tables_only: bool) -> list[Sweep]:
    """The paper's sweeps at ``scale``, in the order they run: the others first, then the speed
    sweeps (:attr:`Paper.speed`) in :data:`REPEATS` rounds, each round running every one of them
    once at its seed (``<sweep>/repeat<r>``), so that the systems a speed-up compares run side by
    side, interleaved, whatever the machine does meanwhile, and under one link per round
    (:attr:`Paper.trusting`), the share curve's two traced where they run on the virtual clock
    (:mod:`gnntrain.repro.replayed`); last the :attr:`Paper.same_link` sweeps,
    whose link (that of their source's first run) is added only when they run. Skipped: all with
    ``tables_only``, those ``only`` leaves out."""
    steady, rounds, after = [], [], []
    for name, overrides in paper.sweeps.items():
        if scale == "paper":
            overrides = paper_sized(overrides)
            if overrides is None:
                continue
        skipped = ("--tables-only: its runs are read" if tables_only
                   else "--only: its existing runs are read" if only is not None and name not in only else None)
        if name in paper.speed:
            held = on_virtual_clock(overrides)
            traced = [TRACING] if held and name in paper.curve.traced else []
            rounds += [(r, Sweep(f"{name}/repeat{r}", [*overrides, *traced,
                                                       *trusted(name in paper.trusting or (held and r > 0)),
                                                       f"seed={r}"],
                                 linked(paper, f"{name}/repeat{r}"), skipped)) for r in range(REPEATS)]
        elif name in paper.same_link:
            after.append(Sweep(name, overrides, linked(paper, name), skipped))
        else:
            steady.append(Sweep(name, overrides, None, skipped))
    return steady + [sweep for _, sweep in sorted(rounds, key=lambda pair: pair[0])] + after


def on_virtual_clock(overrides: list[str]) -> bool:
    """Whether a sweep's jobs run on the virtual clock (its first job's config, ``auto`` resolved)."""
    return typed_run(compose(expand(overrides)[0])).cluster.clock == "virtual"


def trusted(holds: bool) -> list[str]:
    """The override that takes a cached link as it is, where it ``holds``."""
    return ["network.recheck=false"] if holds else []


def link_source(paper: Paper, sweep: str) -> str | None:
    """The sweep whose first run's link ``sweep`` runs under (a :attr:`Paper.same_link` sweep's
    source); None for a sweep that calibrates its own."""
    return paper.same_link.get(sweep)


def linked(paper: Paper, sweep: str) -> str | None:
    """How :func:`planned` names the link of a sweep that takes another's."""
    source = link_source(paper, sweep)
    return f"the link of {source}'s runs" if source else None


def link_taken(sweep: Sweep, source: str | None, runs_root: Path) -> list[str]:
    """The link overrides of a sweep that runs under another's (:func:`link_source`): those of
    the source's first run; for a sweep the build skips, those its own first run ran under (the
    source may have no runs left, as after a build stopped part-way). [] for a sweep that
    calibrates its own, or a skipped one with no runs either."""
    if source is None:
        return []
    if sweep.skipped is not None:
        own = find_runs(runs_root / sweep.name) if (runs_root / sweep.name).is_dir() else []
        if own:
            return link_overrides(own[0].summary.network)
    found = find_runs(runs_root / source) if (runs_root / source).is_dir() else []
    if found:
        return link_overrides(found[0].summary.network)
    if sweep.skipped is not None:
        return []
    raise SystemExit(f"gnntrain.repro: {sweep.name} runs under the link of {source}, which has no completed run under "
                     f"{runs_root / source}; run it too (--only {source},{sweep.name.split('/')[0]})")


def rendered_header(table: Path, swept: str, declared: list[str], paper: str) -> str:
    """The header of a table drawn again from its build's runs (``--tables-only``): the build's
    own, which names the commit its runs ran at, with the commit the tables are drawn at added
    (:mod:`gnntrain.repro.staleness` checks each part against its own); where no earlier table
    is there, one that names only the drawing. A build whose sweeps the paper no longer declares
    (``declared``: each sweep's command as the paper declares it, a link taken from another
    sweep's runs aside) is refused: its runs are not what the tables now say they are."""
    drawn = (f"Tables rendered again from these runs at commit {git_commit()} (`python -m gnntrain.repro {paper} "
             "--tables-only`).")
    first = table.read_text().split("\n", 1)[0] if table.is_file() else ""
    if not first.startswith("Built by"):
        return f"Rendered by `python -m gnntrain.repro {paper} --tables-only` from runs built elsewhere. {swept}. {drawn}"
    kept = RENDERED_AGAIN.sub("", first).rstrip()
    if not all(command in kept for command in declared):
        raise GnntrainError(f"{table}: its build ran other sweeps than {paper} declares now; valid: rebuild it "
                            f"(make repro-{paper}) rather than drawing its tables again")
    return f"{kept} {drawn}"


RENDERED_AGAIN = re.compile(r" Tables rendered again from these runs at commit .*$")
"""The part of a header a drawing again adds (:func:`rendered_header`), replaced by the next one."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paper", choices=list(PAPERS))
    parser.add_argument("--scale", choices=["small", "paper"], default="small")
    parser.add_argument("--out", type=Path, default=None, help="default: results/<paper> (small), "
                                                                 "results/<paper>/paper (paper)")
    parser.add_argument("--tables-only", action="store_true", help="rebuild the tables from existing runs")
    parser.add_argument("--only", default=None, help="comma-separated sweep names to run again; the tables read "
                                                     "the others' existing runs")
    parser.add_argument("--dry-run", action="store_true", help="list the sweeps, their jobs and the wall time the "
                                                             "recorded runs suggest; start nothing")
    parser.add_argument("--quiet", action="store_true", help="no progress lines (sweeps done, jobs left, estimate)")
    parser.add_argument("--runs", type=Path, default=None, help="the folder of the runs (default: "
                                                                "multirun/repro/<paper>/<scale>), e.g. a committed "
                                                                "runs.tar.gz unpacked")
    args = parser.parse_args()
    with command_errors("python -m gnntrain.repro"), quiet(args.quiet):
        use_shared_data()
        only = args.only.split(",") if args.only else None
        paper = PAPERS[args.paper]
        unknown = set(only or []) - set(paper.sweeps)
        if unknown:
            parser.error(f"--only names {', '.join(sorted(unknown))}; valid for {args.paper}: {', '.join(paper.sweeps)}")
        if args.runs is not None and not args.runs.is_dir():
            raise GnntrainError(f"--runs {args.runs}: not a folder; valid: the folder of a paper's runs (make "
                                "repro-<paper> makes it; a committed runs.tar.gz unpacks into one)")
        runs_root = args.runs or CHECKOUT / "multirun" / "repro" / args.paper / args.scale
        out = args.out or CHECKOUT / "results" / args.paper / ("" if args.scale == "small" else "paper")
        if out.exists() and not out.is_dir():
            raise GnntrainError(f"--out {out}: not a folder; valid: a folder, or a path to make one at")
        plan = planned(paper, args.scale, only, args.tables_only)
        if args.dry_run:
            print(dry_run(f"make repro-{args.paper} (scale={args.scale})", plan, runs_root, out / "runs.csv"))
            return
        start = time.perf_counter()
        sweeps = {}
        countdown = Countdown(plan, args.quiet) if any(sweep.skipped is None for sweep in plan) else None
        for sweep in plan:
            sweeps[sweep.name] = [*sweep.overrides, *link_taken(sweep, link_source(paper, sweep.name), runs_root)]
            if sweep.skipped is None:
                launch(sweep.name, sweeps[sweep.name], runs_root / sweep.name, check=True, countdown=countdown)
        read = [*paper.sweeps, *SEPARATE]
        runs: dict[str, list[Run]] = {name: find_runs(runs_root / name) for name in read if (runs_root / name).is_dir()}
        missing = [name for name in paper.sweeps if not runs.get(name)]
        if missing:
            raise GnntrainError(f"{runs_root}: no completed run of sweep {missing[0]} ({len(missing)} of "
                                f"{len(paper.sweeps)} sweeps have none); valid: make repro-{args.paper} first, or "
                                "--runs <the folder a committed runs.tar.gz unpacks into>")
        every = [run for name in runs for run in runs[name]]
        rows = timed_rows(every, runs_root)
        traced = traced_runs(paper.curve, paper.sweeps, runs_root, REPEATS)
        replayed = replayed_curve(traced)  # read, and checked, before anything is written
        elapsed = time.perf_counter() - start
        swept = "Sweeps: " + "; ".join(f"`gnntrain -m {' '.join(o)}`" for o in sweeps.values())
        declared = [f"`gnntrain -m {' '.join(sweep.overrides)}" for sweep in plan]
        header = (rendered_header(out / "table.md", swept, declared, args.paper) if args.tables_only else
                  f"Built by `make repro-{args.paper}` (scale={args.scale}) at commit {git_commit()} on "
                  f"{os.cpu_count()} CPU cores; every figure below is read from the runs' summary.json / "
                  f"metrics.jsonl (all runs: runs.csv). {swept}. Wall time {elapsed / 60:.1f} min.")
        out.mkdir(parents=True, exist_ok=True)
        write_csv(rows, out / "runs.csv")
        write_atomically(out / "runs.md", markdown(rows))
        text = (f"Paper: {paper.reference}\n\n" + paper.tables(runs, out, args.scale) + "\n"
                + replayed_section(paper.curve, replayed, out))
        write_atomically(out / "table.md", f"{header}\n\n{text}")
        own = paper.tables.__module__
        write_manifest(out / "table.md", every, frozenset(p.tables.__module__ for p in PAPERS.values()) - {own})
        write_runs_archive(runs_root, read, out / "runs.tar.gz", tuple(p for pair in traced for p in pair))
        print(text)
        print(f"wrote {out / 'table.md'}, {out / 'runs.csv'}, the runs it read ({out / 'runs.tar.gz'}) and the figures "
              f"in {out}")


if __name__ == "__main__":
    main()
