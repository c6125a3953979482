"""Reproduce a paper's headline table and figures in shape: ``make repro-<paper>``.

Each sweep runs through ``gnntrain -m`` (Hydra multirun, so it runs unchanged under a cluster
launcher) into ``multirun/repro/<paper>/<sweep>/``; the tables are then built from the runs'
own ``summary.json`` and ``metrics.jsonl`` (:mod:`gnntrain.report`) and written to
``results/<paper>/``: ``table.md`` (the paper's rows and columns, the paper's figure beside
ours, the setting and the git commit), PNG figures and ``runs.csv`` (every run's figures).

``--scale small`` (default) uses the CPU-sized presets (``conf/experiment/<table>.yaml``: links
emulated and calibrated to the paper's communication share; accuracy on Cora);
``--scale paper`` the paper-sized ones (``<table>_paper.yaml``) on a GPU cluster, where the
accuracy columns come from the same runs. ``runs.csv`` gives each job's wall time (``wall_s``);
``--dry-run`` lists the sweeps, their jobs and the wall time those records suggest, and starts
nothing (:mod:`sweep_plan`).
Usage: ``python scripts/repro.py pipegcn|bns|adaqp|gnnpipe|hopgnn [--scale small|paper] [--only SWEEP,...]
[--dry-run]``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from check_tables import write_manifest  # noqa: E402
from jobs import git_commit  # noqa: E402
from repro_tables import PIPEGCN_TABLE2, TABLES  # noqa: E402
from share_curves import UNREACHABLE, curve_section, curve_sweeps, failed_errors, link_sources  # noqa: E402
from sweep_plan import Sweep, dry_run, launch, run_summaries, timed_rows  # noqa: E402

from gnntrain.comm.network import link_overrides  # noqa: E402
from gnntrain.report import Run, find_runs, markdown, write_csv  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "datasets" / "pyg"
"""Where the real graphs are read from when ``GNNTRAIN_DATA`` is unset (as the tests do)."""

ADAQP_SPEED = ["experiment=adaqp_table4"]
ADAQP_2M2D = ["cluster.world_size=4", "network=two_level", "network.calibrate_share=0.75"]
ADAQP_CORA = ["experiment=accuracy", "seed=0,1,2"]
ADAQP_VANILLA = ["strategy=vanilla", "strategy.halo_dtype=null,bfloat16"]
ADAQP_METHODS = ["strategy.assign=fixed,uniform,adaptive", "strategy.bits=2", "strategy.overlap=true"]
"""The rows of AdaQP's tables: vanilla with float32 and bfloat16 halos, and AdaQP with its
central/marginal overlap (the paper's AdaQP) at fixed 2 bits, uniform and adaptive widths."""

BNS_ACCURACY = ["experiment=bns_accuracy", "seed=0,1,2"]

GNNPIPE_ACCURACY = ["experiment=gnnpipe_accuracy", "seed=0,1,2"]

HOPGNN_FIG13 = ["experiment=hopgnn_fig13"]
HOPGNN_ACCURACY = ["experiment=hopgnn_accuracy", "seed=0,1,2", "dataset=cora,synthetic"]

SWEEPS: dict[str, dict[str, list[str]]] = {
    # each partition count's link calibrated to PipeGCN Table 2's share for Reddit (the preset's default: 2 parts,
    # conf/experiment/pipegcn_table4.yaml)
    "pipegcn": {
        "speed_2parts": ["experiment=pipegcn_table4", "cluster.world_size=2", "strategy=vanilla,pipegcn"],
        "speed_4parts": ["experiment=pipegcn_table4", "cluster.world_size=4", f"network.calibrate_share={PIPEGCN_TABLE2[4]}",
                         "strategy=vanilla,pipegcn"],
        "accuracy_vanilla": ["experiment=accuracy", "strategy=vanilla"],
        "accuracy_pipegcn": ["experiment=accuracy", "strategy=pipegcn", "strategy.smooth=none,g,f,gf"],
    },
    # bes and dropedge run at their preset p = 0.1 (their config dataclass, gnntrain/strategies/graph_parallel/sampled.py)
    "bns": {
        "speed_bns": ["experiment=bns_table4", "strategy.p=1,0.1,0.01,0"],
        "speed_edges": ["experiment=bns_table4", "strategy=bes,dropedge"],
        "accuracy_bns": [*BNS_ACCURACY, "dataset=cora,citeseer,squirrel", "strategy.p=1,0.1,0.01,0"],
        "accuracy_edges": [*BNS_ACCURACY, "strategy=bes,dropedge"],
    },
    # Tables 4, 6 and 9 from the same runs (3 seeds each); Cora's accuracy on 4 workers under the
    # very link the 2M-2D rows were calibrated to (SAME_LINK), so adaptive picks the widths it would
    "adaqp": {
        "2m1d_vanilla": [*ADAQP_SPEED, *ADAQP_VANILLA],
        "2m1d_adaqp": [*ADAQP_SPEED, *ADAQP_METHODS],
        "2m2d_vanilla": [*ADAQP_SPEED, *ADAQP_2M2D, *ADAQP_VANILLA],
        "2m2d_adaqp": [*ADAQP_SPEED, *ADAQP_2M2D, *ADAQP_METHODS],
        "cora_vanilla": [*ADAQP_CORA, *ADAQP_VANILLA],
        "cora_adaqp": [*ADAQP_CORA, "strategy=adaqp", *ADAQP_METHODS],
    },
    "gnnpipe": {
        "volume_graph": ["experiment=gnnpipe_table4", "model=gcn,sage,gcnii", "strategy=vanilla"],
        "volume_pipe": ["experiment=gnnpipe_table4", "model=gcn,sage,gcnii", "strategy=gnnpipe",
                        "strategy.graph_parallel=1"],
        # SAGE's hybrid at 32 x 1000 on 8 CPU workers outgrows a 24 GiB machine; GPU clusters may add it
        "volume_hybrid": ["experiment=gnnpipe_table4", "model=gcn,gcnii", "strategy=gnnpipe",
                          "strategy.graph_parallel=2"],
        "time_graph": ["experiment=gnnpipe_table3", "model=gcn,sage,gcnii", "strategy=vanilla"],
        "time_pipe": ["experiment=gnnpipe_table3", "model=gcn,sage,gcnii", "strategy=gnnpipe",
                      "strategy.graph_parallel=1,2"],
        "accuracy_graph": [*GNNPIPE_ACCURACY, "dataset=cora,squirrel", "strategy=vanilla"],
        "tricks_all": [*GNNPIPE_ACCURACY, "dataset=cora,squirrel", "strategy=gnnpipe"],
        "tricks_none": [*GNNPIPE_ACCURACY, "dataset=cora,squirrel", "strategy=gnnpipe", "strategy.shuffle=false",
                        "strategy.detach_history=false", "strategy.fixed_history=false"],
        "tricks_no_shuffle": [*GNNPIPE_ACCURACY, "dataset=cora", "strategy=gnnpipe", "strategy.shuffle=false"],
        "tricks_no_detach": [*GNNPIPE_ACCURACY, "dataset=cora", "strategy=gnnpipe", "strategy.detach_history=false"],
        "tricks_no_fixed": [*GNNPIPE_ACCURACY, "dataset=cora", "strategy=gnnpipe", "strategy.fixed_history=false"],
    },
    # Fig. 13's ablation for GAT (the paper's: GAT on Products): DGL (minibatch), +MG (micrographs),
    # +PG (pre-gathering), All (merging, with its examination epochs)
    "hopgnn": {
        "fig13_dgl": [*HOPGNN_FIG13, "model=gat", "strategy=minibatch"],
        "fig13_mg": [*HOPGNN_FIG13, "model=gat", "strategy=hopgnn", "strategy.pregather=false", "strategy.merge=false"],
        "fig13_pg": [*HOPGNN_FIG13, "model=gat", "strategy=hopgnn", "strategy.pregather=true", "strategy.merge=false"],
        "fig13_all": [*HOPGNN_FIG13, "model=gat", "strategy=hopgnn", "strategy.merge=true"],
        # Fig. 11: DGL, P3, Naive and HopGNN at hidden 16 (GAT's DGL and All from Fig. 13) and 128;
        # HopGNN's runs apart, so that a change to HopGNN alone reruns them alone (--only)
        "fig11_hidden16": [*HOPGNN_FIG13, "model=gcn,sage", "strategy=minibatch,p3,naive"],
        "fig11_hidden16_hopgnn": [*HOPGNN_FIG13, "model=gcn,sage", "strategy=hopgnn"],
        "fig11_gat_baselines": [*HOPGNN_FIG13, "model=gat", "strategy=p3,naive"],
        "fig11_hidden128": [*HOPGNN_FIG13, "model=gcn,gat", "model.hidden=128", "strategy=minibatch,p3,naive"],
        "fig11_hidden128_hopgnn": [*HOPGNN_FIG13, "model=gcn,gat", "model.hidden=128", "strategy=hopgnn"],
        "accuracy_vanilla": [*HOPGNN_ACCURACY, "strategy=vanilla"],
        # a one-value sweep: Hydra composes a multirun's fixed overrides before the strategy is chosen
        "accuracy_minibatch": [*HOPGNN_ACCURACY, "strategy=minibatch,p3,hopgnn,naive,lo", "strategy.batch_size=choice(64)"],
    },
}
REPEATS = 3
"""How many times each speed sweep runs (seeds 0, 1, ...), in interleaved rounds (:func:`planned`)."""
SPEED: dict[str, tuple[str, ...]] = {
    "pipegcn": ("speed_2parts", "speed_4parts"),
    "bns": ("speed_bns", "speed_edges"),
    "adaqp": ("2m1d_vanilla", "2m1d_adaqp", "2m2d_vanilla", "2m2d_adaqp"),
    "gnnpipe": ("time_graph", "time_pipe"),
    "hopgnn": ("fig13_dgl", "fig13_mg", "fig13_pg", "fig13_all", "fig11_hidden16", "fig11_hidden16_hopgnn",
               "fig11_gat_baselines", "fig11_hidden128", "fig11_hidden128_hopgnn"),
}
"""The sweeps whose runs give a table's speed figures: each runs :data:`REPEATS` times (and so do
the share curve's, :mod:`share_curves`)."""


def sweeps_of(paper: str, scale: str = "small") -> dict[str, list[str]]:
    """The paper's sweeps: :data:`SWEEPS`, and at ``scale=small`` its share curve's (whose links
    are calibrated; a paper-sized build runs on its cluster's one network)."""
    return {**SWEEPS[paper], **(curve_sweeps(paper) if scale == "small" else {})}


def speed_sweeps(paper: str) -> set[str]:
    """The paper's sweeps that run in interleaved rounds: :data:`SPEED` and its curve's."""
    return {*SPEED[paper], *curve_sweeps(paper)}
TRUSTING = {
    "bns": ("speed_edges",),
    "adaqp": ("2m1d_adaqp", "2m2d_adaqp"),
    "gnnpipe": ("time_pipe",),
    "hopgnn": ("fig13_mg", "fig13_pg", "fig13_all", "fig11_hidden16_hopgnn", "fig11_gat_baselines",
               "fig11_hidden128_hopgnn"),
}
"""Speed sweeps that run under the cached links as they are (``network.recheck=false``): each
after the sweep of its round that re-checked the same links (its baseline's, earlier in
:data:`SPEED`), so that the systems a ratio compares share one link in every round."""
SAME_LINK = {"adaqp": {"cora_vanilla": "2m2d_vanilla", "cora_adaqp": "2m2d_vanilla"}}
"""Sweeps run under exactly the (calibrated) link of another sweep's runs, passed as numbers."""
ACCURACY_PRESETS = ("experiment=accuracy", "experiment=bns_accuracy", "experiment=gnnpipe_accuracy", "experiment=hopgnn_accuracy")


def paper_sized(overrides: list[str]) -> list[str] | None:
    """A small sweep's paper-sized form: the ``_paper`` preset where there is one (a preset
    without one is paper-sized already); None for the CPU-sized accuracy sweeps (paper-sized
    runs report their own accuracy)."""
    if any(preset in overrides for preset in ACCURACY_PRESETS):
        return None
    sized = []
    for o in overrides:
        if o.startswith("experiment=") and (REPO / "conf" / "experiment" / f"{o.split('=')[1]}_paper.yaml").is_file():
            o = f"{o}_paper"
        if not o.startswith("network"):
            sized.append(o)
    return sized


def planned(paper: str, scale: str, only: list[str] | None, tables_only: bool) -> list[Sweep]:
    """The paper's sweeps at ``scale``, in the order they run: the others first, then the speed
    sweeps (:data:`SPEED`) in :data:`REPEATS` rounds, each round running every one of them once
    at its seed (``<sweep>/repeat<r>``), so that the systems a speed-up compares run side by
    side, interleaved, whatever the machine does meanwhile, and under one link per round
    (:data:`TRUSTING`); last the :data:`SAME_LINK` sweeps,
    whose link (that of their source's first run) is added only when they run. Skipped: all with
    ``tables_only``, those ``only`` leaves out."""
    steady, rounds, after = [], [], []
    for name, overrides in sweeps_of(paper, scale).items():
        if scale == "paper":
            overrides = paper_sized(overrides)
            if overrides is None:
                continue
        skipped = ("--tables-only: its runs are read" if tables_only
                   else "--only: its existing runs are read" if only is not None and name not in only else None)
        if name in speed_sweeps(paper):
            trusted = ["network.recheck=false"] if name in TRUSTING.get(paper, ()) else []
            rounds += [(r, Sweep(f"{name}/repeat{r}", [*overrides, *trusted, f"seed={r}"],
                                 linked(paper, f"{name}/repeat{r}"), skipped)) for r in range(REPEATS)]
        elif name in SAME_LINK.get(paper, {}):
            after.append(Sweep(name, overrides, linked(paper, name), skipped))
        else:
            steady.append(Sweep(name, overrides, None, skipped))
    return steady + [sweep for _, sweep in sorted(rounds, key=lambda pair: pair[0])] + after


def link_source(paper: str, sweep: str) -> str | None:
    """The sweep whose first run's link ``sweep`` runs under: a :data:`SAME_LINK` sweep's source,
    a curve method's baseline in the same round (:func:`share_curves.link_sources`); None for a
    sweep that calibrates its own."""
    name, _, repeat = sweep.partition("/")
    curve = link_sources(paper).get(name)
    return f"{curve}/{repeat}" if curve else SAME_LINK.get(paper, {}).get(name)


def linked(paper: str, sweep: str) -> str | None:
    """How :func:`planned` names the link of a sweep that takes another's."""
    source = link_source(paper, sweep)
    return f"the link of {source}'s runs" if source else None


def unreached_only(sweep_dir: Path) -> bool:
    """Whether every run of a sweep failed because no link gave its share (a curve's point)."""
    summaries = run_summaries(sweep_dir)
    return bool(summaries) and all(s.get("status") == "failed" and UNREACHABLE in (s.get("error") or "")
                                   for s in summaries)


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
            return link_overrides(own[0].summary["network"])
    found = find_runs(runs_root / source) if (runs_root / source).is_dir() else []
    if found:
        return link_overrides(found[0].summary["network"])
    if sweep.skipped is not None:
        return []
    raise SystemExit(f"repro: {sweep.name} runs under the link of {source}, which has no completed run under "
                     f"{runs_root / source}; run it too (--only {source},{sweep.name.split('/')[0]})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paper", choices=list(SWEEPS))
    parser.add_argument("--scale", choices=["small", "paper"], default="small")
    parser.add_argument("--out", type=Path, default=None, help="default: results/<paper> (small), "
                                                                 "results/<paper>/paper (paper)")
    parser.add_argument("--tables-only", action="store_true", help="rebuild the tables from existing runs")
    parser.add_argument("--only", default=None, help="comma-separated sweep names to run again; the tables read "
                                                     "the others' existing runs")
    parser.add_argument("--dry-run", action="store_true", help="list the sweeps, their jobs and the wall time the "
                                                             "recorded runs suggest; start nothing")
    args = parser.parse_args()
    if "GNNTRAIN_DATA" not in os.environ and SHARED_DATA.is_dir():
        os.environ["GNNTRAIN_DATA"] = str(SHARED_DATA)  # the sweeps' jobs and the tables' own reads
    only = args.only.split(",") if args.only else None
    known = sweeps_of(args.paper, args.scale)
    unknown = set(only or []) - set(known)
    if unknown:
        parser.error(f"--only names {', '.join(sorted(unknown))}; valid for {args.paper}: {', '.join(known)}")
    runs_root = REPO / "multirun" / "repro" / args.paper / args.scale
    out = args.out or REPO / "results" / args.paper / ("" if args.scale == "small" else "paper")
    plan = planned(args.paper, args.scale, only, args.tables_only)
    if args.dry_run:
        print(dry_run(f"make repro-{args.paper} (scale={args.scale})", plan, runs_root, out / "runs.csv"))
        return
    out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    sweeps = {}
    for sweep in plan:
        source = link_source(args.paper, sweep.name)
        if source and (runs_root / source).is_dir() and unreached_only(runs_root / source):
            print(f"== {sweep.name}: not run: no link reached its baseline's share ({source})", flush=True)
            continue
        sweeps[sweep.name] = [*sweep.overrides, *link_taken(sweep, source, runs_root)]
        if sweep.skipped is None:
            on_curve = sweep.name.split("/")[0] in curve_sweeps(args.paper)
            launch(sweep.name, sweeps[sweep.name], runs_root / sweep.name, check=not on_curve)
            failed = [e for e in failed_errors(runs_root / sweep.name) if UNREACHABLE not in e] if on_curve else []
            if failed:
                raise SystemExit(f"repro: {sweep.name}: {len(failed)} job(s) failed: {failed[0]}")
    runs: dict[str, list[Run]] = {name: find_runs(runs_root / name) for name in known
                                  if (runs_root / name).is_dir() and not unreached_only(runs_root / name)}
    every = [run for name in runs for run in runs[name]]
    rows = timed_rows(every, runs_root)
    write_csv(rows, out / "runs.csv")
    (out / "runs.md").write_text(markdown(rows))
    elapsed = time.perf_counter() - start
    header = (f"Built by `make repro-{args.paper}` (scale={args.scale}) at commit {git_commit()} on "
              f"{os.cpu_count()} CPU cores; every figure below is read from the runs' summary.json / "
              f"metrics.jsonl (all runs: runs.csv). Sweeps: "
              + "; ".join(f"`gnntrain -m {' '.join(o)}`" for o in sweeps.values())
              + (f". Wall time {elapsed / 60:.1f} min." if not args.tables_only else "."))
    text = TABLES[args.paper](runs, out, args.scale) + "\n" + curve_section(args.paper, runs, out, runs_root)
    (out / "table.md").write_text(f"{header}\n\n{text}")
    write_manifest(out / "table.md", every)
    print(text)
    print(f"wrote {out / 'table.md'}, {out / 'runs.csv'} and the figures in {out}")


if __name__ == "__main__":
    main()
