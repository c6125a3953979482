"""``python -m gnntrain.repro <paper> --dry-run`` and ``python -m gnntrain.repro.compare --dry-run``
list every sweep's command and jobs, count the jobs and estimate the wall time from the ``wall_s``
that ``runs.csv`` records, starting nothing and in seconds; a build's ``runs.csv`` rows record each
job's wall time."""

from __future__ import annotations

import csv
import multiprocessing
import re
import os
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from gnntrain.engine.summary import RunSummary
from gnntrain.report import write_csv
from gnntrain.report.runs import find_runs
from gnntrain.repro import CHECKOUT as REPO
from gnntrain.repro import build, compare, plan, replayed
from gnntrain.repro.papers import PAPERS

SECONDS = 10
"""A dry run's limit here, imports aside: it only expands the sweeps' overrides."""


def snapshot(*folders: Path) -> dict[Path, int]:
    """Every file under ``folders`` with its modification time."""
    return {path: path.stat().st_mtime_ns for folder in folders for path in folder.rglob("*")}


def dry_run(monkeypatch, capsys, script, *args: str) -> tuple[str, float]:
    """``script``'s output for ``args --dry-run`` and the seconds it took; starting a process fails."""
    def refuse(*args, **kwargs):
        raise AssertionError(f"a dry run started {args}")

    monkeypatch.setattr(plan, "present_load", lambda: 1.0)  # the load probe has tests of its own below
    monkeypatch.setattr(subprocess, "run", refuse)
    monkeypatch.setattr(subprocess, "Popen", refuse)
    monkeypatch.setattr(multiprocessing.Process, "start", refuse)
    monkeypatch.setattr(sys, "argv", [script.__file__, *args, "--dry-run"])
    start = time.perf_counter()
    script.main()
    return capsys.readouterr().out, time.perf_counter() - start


def listed(out: str) -> tuple[dict[str, int], list[str], int]:
    """Of a dry run's output: each running sweep's job count, the jobs named, and the total stated."""
    sweeps = {name: int(n) for name, n in re.findall(r"^== (\S+): gnntrain -m .* \((\d+) jobs?\)$", out, re.M)}
    jobs = re.findall(r"^   (\S+): ", out, re.M)
    total = re.search(r"^(\d+) jobs? in \d+ sweeps?; ", out, re.M)
    return sweeps, jobs, int(total.group(1))


def repro_order(paper: str) -> list[str]:
    """The folders a build runs, in order: the sweeps that give no speed figure, then each speed
    sweep (the share curve's two among them) once per round, round after round (interleaved
    repeats), then the sweeps run under another sweep's link (which exists only then)."""
    declared = PAPERS[paper]
    speed, sweeps, same = declared.speed, declared.sweeps, declared.same_link
    assert set(declared.curve.traced) <= set(speed)
    return ([name for name in sweeps if name not in speed and name not in same]
            + [f"{name}/repeat{r}" for r in range(build.REPEATS) for name in sweeps if name in speed]
            + [name for name in sweeps if name in same])


@pytest.mark.parametrize("paper", list(PAPERS))
def test_repro_dry_run_lists_every_sweep_and_job_and_starts_nothing(paper, monkeypatch, capsys) -> None:
    folders = (REPO / "results" / paper, REPO / "multirun" / "repro" / paper)
    before = snapshot(*folders)
    out, seconds = dry_run(monkeypatch, capsys, build, paper)
    sweeps, jobs, total = listed(out)
    assert list(sweeps) == repro_order(paper)
    assert total == len(jobs) == sum(sweeps.values())
    assert all(job.rsplit("/", 1)[0] in sweeps for job in jobs)
    assert "estimated wall time" in out
    assert snapshot(*folders) == before
    assert seconds < SECONDS


def test_the_estimate_sums_the_recorded_wall_times_and_names_the_jobs_without_one(tmp_path, monkeypatch,
                                                                                   capsys) -> None:
    write_csv([{"run": "speed_2parts/repeat0/0", plan.WALL: 72.0},
               {"run": "speed_2parts/repeat0/1", plan.WALL: None},
               {"run": "accuracy_vanilla/0", plan.WALL: 3.0}], tmp_path / "runs.csv")
    out, _ = dry_run(monkeypatch, capsys, build, "pipegcn", "--out", str(tmp_path),
                     "--only", "speed_2parts,accuracy_vanilla")
    assert "   speed_2parts/repeat0/0: strategy=vanilla: 1m12s recorded" in out
    assert "   speed_2parts/repeat0/1: strategy=pipegcn: no recorded time" in out
    assert "== speed_4parts/repeat0: not run (--only: its existing runs are read)" in out
    assert "9 jobs in 4 sweeps; estimated wall time 1m15s" in out  # accuracy_vanilla: 3 seeds
    assert "for 2 of 9 jobs" in out and "no recorded time for 7 of 9 jobs" in out
    assert [path.name for path in tmp_path.iterdir()] == ["runs.csv"]


def test_compare_dry_run_lists_tuning_and_final_sweeps_and_starts_nothing(monkeypatch, capsys) -> None:
    folders = (REPO / "results" / "compare", REPO / "multirun" / "compare")
    before = snapshot(*folders)
    # --fresh: the plan as on a clean checkout, whatever runs an earlier `make compare` left
    out, seconds = dry_run(monkeypatch, capsys, compare, "--strategies", "vanilla", "bns", "--fresh")
    named = re.findall(r"^== (\S+): ", out, re.M)
    rounds = [f"runs/{link}/{strategy}/seed{seed}" for seed in compare.SEEDS for strategy in ("vanilla", "bns")
              for link in ("fast", "slow")]
    assert named == ["tune/fast/vanilla/0", "tune/fast/vanilla/edge1", "tune/slow/vanilla/0", "tune/slow/vanilla/edge1",
                     "tune/fast/bns/0", "tune/fast/bns/1", "tune/fast/bns/2", "tune/fast/bns/edge1",
                     "tune/slow/bns/0", "tune/slow/bns/1", "tune/slow/bns/2", "tune/slow/bns/edge1", *rounds], \
        "every tuning sweep first (each grid, then its extension past an edge), then the final runs in " \
        "interleaved rounds, one seed each"
    assert f"<up to {compare.EDGE_STEPS} learning rates, one at a time, where the chosen one sits on an edge>" in out
    assert len(compare.SEEDS) >= 3
    sweeps, jobs, total = listed(out)
    assert total == len(jobs) == sum(sweeps.values())
    tuned = {name: n for name, n in sweeps.items() if name.startswith("tune/") and "/edge" not in name}
    assert sum(n for name, n in tuned.items() if "/vanilla/" in name) == 2 * compare.TUNING_BUDGET
    assert sum(n for name, n in tuned.items() if "/bns/" in name) == 2 * compare.TUNING_BUDGET, \
        "every strategy gets the same tuning budget under each link"
    assert f"seed={compare.TUNING_SEED}" in out and compare.TUNING_SEED not in range(3)
    assert "<the setting tuning chooses there>" in out
    assert snapshot(*folders) == before
    assert seconds < SECONDS


def test_a_builds_rows_record_each_jobs_wall_time(tmp_path) -> None:
    overrides = ["dataset.num_nodes=200", "train.epochs=1", "cluster.world_size=1"]
    start = time.perf_counter()
    plan.launch("tiny", overrides, tmp_path / "tiny", check=True)
    elapsed = time.perf_counter() - start
    write_csv(plan.timed_rows(find_runs(tmp_path / "tiny"), tmp_path), tmp_path / "runs.csv")
    with open(tmp_path / "runs.csv", newline="") as f:
        row, = csv.DictReader(f)
    assert row["run"] == "tiny/0"
    assert 0 < float(row[plan.WALL]) < elapsed
    text = plan.dry_run("tiny", [plan.Sweep("tiny", overrides)], tmp_path, tmp_path / "runs.csv")
    assert "1 job in 1 sweep; estimated wall time" in text and "for 1 of 1 jobs" in text


@pytest.mark.parametrize("paper", list(PAPERS))
def test_a_curve_replays_its_headlines_own_runs_traced_under_one_link_per_round(paper) -> None:
    """The curve costs no run of its own: its baseline and its method are one job each of the
    headline's speed sweeps, which trace in every round; the method's sweep is the baseline's, or
    runs after it in each round under the link that sweep checked, so that each round's ratio
    compares one link (and a method that decides on timings decides under it)."""
    declared = PAPERS[paper]
    rounds = build.planned(declared, "small", None, False)
    names = [sweep.name for sweep in rounds]
    base, method = declared.curve.traced
    assert method == base or method in declared.trusting
    for r in range(build.REPEATS):
        for side in (base, method):
            assert replayed.TRACING in rounds[names.index(f"{side}/repeat{r}")].overrides
        assert names.index(f"{base}/repeat{r}") <= names.index(f"{method}/repeat{r}")
    assert not any(replayed.TRACING in sweep.overrides for sweep in rounds
                   if sweep.name.split("/")[0] not in declared.curve.traced), "only the curve's sweeps trace"
    replayed.traced_jobs(declared.curve, declared.sweeps)  # one job of each sweep is the curve's side


def test_a_skipped_sweep_takes_its_own_runs_link_and_a_run_one_needs_its_sources(tmp_path, monkeypatch) -> None:
    """With ``--only`` or ``--tables-only`` on a tree whose curve baseline lost a round's runs
    (a build stopped part-way), the skipped method sweep reads the link it ran under; a sweep
    that is to run under a source without runs stops with a one-line error naming both."""
    runs_of = {"curve_30_method/repeat1": [{"link": "own"}], "curve_30_base/repeat2": [{"link": "source"}]}
    monkeypatch.setattr(build, "find_runs", lambda root: [SimpleNamespace(summary=RunSummary(network=n))
                                                          for n in runs_of.get(str(root.relative_to(tmp_path)), [])])
    monkeypatch.setattr(build, "link_overrides", lambda network: [f"network={network['link']}"])
    for name in ("curve_30_method/repeat1", "curve_30_base/repeat1", "curve_30_base/repeat2"):
        (tmp_path / name).mkdir(parents=True)
    skipped = lambda name: plan.Sweep(name, [], None, "--only: its existing runs are read")  # noqa: E731
    to_run = lambda name: plan.Sweep(name, [], None, None)  # noqa: E731
    assert build.link_taken(skipped("curve_30_method/repeat1"), "curve_30_base/repeat1", tmp_path) == ["network=own"]
    assert build.link_taken(skipped("curve_30_method/repeat0"), "curve_30_base/repeat0", tmp_path) == []
    assert build.link_taken(to_run("curve_30_method/repeat2"), "curve_30_base/repeat2", tmp_path) == [
        "network=source"]
    assert build.link_taken(to_run("curve_30_method/repeat0"), None, tmp_path) == []
    with pytest.raises(SystemExit, match="curve_30_method/repeat1 runs under the link of curve_30_base/repeat1, "
                                         "which has no completed run"):
        build.link_taken(to_run("curve_30_method/repeat1"), "curve_30_base/repeat1", tmp_path)


def test_the_estimate_says_it_assumes_an_idle_machine_and_scales_by_the_present_load(tmp_path, monkeypatch) -> None:
    write_csv([{"run": "a/0", plan.WALL: 420.0}], tmp_path / "runs.csv")
    monkeypatch.setattr(plan, "present_load", lambda: 1.0)
    idle = plan.estimate([420.0], 1, tmp_path / "runs.csv")
    assert "estimated wall time 7m00s" in idle and "on a machine that ran nothing else" in idle
    assert "present load" not in idle
    monkeypatch.setattr(plan, "present_load", lambda: 3.6)
    loaded = plan.estimate([420.0], 1, tmp_path / "runs.csv")
    assert "at this machine's present load (a 0.5 s probe: 3.6x slower than idle) about 25m12s" in loaded


@pytest.mark.slow
def test_the_load_probe_counts_the_processes_that_want_the_cores() -> None:
    """Two busy processes on this machine's cores make it about (2 + cores) / cores times slower."""
    cores = len(os.sched_getaffinity(0))
    busy = [subprocess.Popen([sys.executable, "-c", "import time\nend = time.monotonic() + 3\n"
                              "while time.monotonic() < end:\n    pass\n"]) for _ in range(2)]
    time.sleep(0.5)
    try:
        assert plan.present_load() >= 1 + 1.5 / cores
    finally:
        for process in busy:
            process.wait()


def test_on_the_virtual_clock_only_round_0_rechecks_a_link() -> None:
    """Virtual time does not move with the machine's load: the later rounds take round 0's link as
    it is, so every round times one link; a paper-sized (wall-clock) build re-checks every round."""
    small = {s.name: s.overrides for s in build.planned(PAPERS["pipegcn"], "small", None, False)}
    assert "network.recheck=false" not in small["speed_2parts/repeat0"]
    assert all("network.recheck=false" in small[f"speed_2parts/repeat{r}"] for r in range(1, build.REPEATS))
    paper = {s.name: s.overrides for s in build.planned(PAPERS["pipegcn"], "paper", None, False)}
    assert not any("network.recheck=false" in paper[f"speed_2parts/repeat{r}"] for r in range(build.REPEATS))


def test_a_build_counts_its_sweeps_and_jobs_and_estimates_what_is_left(monkeypatch) -> None:
    from gnntrain.repro import plan as plan_module
    from gnntrain.repro.plan import Countdown, Sweep

    sweeps = [Sweep("a", ["strategy=vanilla,pipegcn"]), Sweep("b", ["strategy=bns"]),
              Sweep("c", ["strategy=adaqp"], skipped="--only")]
    countdown = Countdown(sweeps)
    now = countdown.begun
    monkeypatch.setattr(plan_module.time, "perf_counter", lambda: now)
    assert countdown.start(2) == "[sweep 1/2, 0/3 jobs done, 0.0 min]"
    countdown.finish(2)
    now += 60
    assert countdown.start(1) == "[sweep 2/2, 2/3 jobs done, 1.0 min, about 0.5 min left]"
    countdown.finish(1)
    now += 60
    assert countdown.start(4) == "[sweep 3/3, 3/7 jobs done, 2.0 min, about 2.7 min left]", "a sweep found late"
    assert Countdown(sweeps, quiet=True).start(2) is None
