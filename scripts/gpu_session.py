"""``make gpu-session``: everything a session lent a GPU runs, in one command that fits one
10-minute call with 2 minutes to spare (``results/gpu_session.json``).

The sections run in order, each under a hard budget (:mod:`budget`: interrupted at it, killed
20 s later), each writing its results as it finishes, so a section cut at its budget keeps what
it measured and the session goes on to the next:

1. ``setup``: the wheels ``scripts/gpu_wheels.sh`` fetched into ``.whl/`` and this checkout,
   installed with no index (``scripts/gpu_setup.sh``; skipped where ``.whl/`` is absent: the
   machine has its packages);
2. ``cuda_tests``: ``tests/test_cuda.py`` in parallel workers (``scripts/gpu_check.py
   --no-bench``: ``results/bench_gpu.json``'s ``cuda_tests``, with the tests a cut run did not
   reach), and beside them, on the cores the tests leave, ``scale_prepare``: the
   products-size graph drawn, saved and partitioned (``scripts/gpu_scale.py --prepare``; CPU
   only, nothing timed);
3. ``device_profile``: the kernel prices the predictor needs (``gnntrain-predict
   --measure-profile cluster.device=cuda``: ``results/device_profiles/<card>.json``);
4. ``bench``: ``scripts/bench_gpu.py``'s three sections (our layers against PyG's on a 1M-node
   graph, every strategy on 2 ranks sharing the GPU, ``cluster.deterministic`` off and on)
   at the session's sizes;
5. ``gpu_scale``: ``scripts/gpu_scale.py``'s two sections on the prepared graph
   (``results/gpu_scale.json``).

``--dry-run`` runs nothing on a GPU: it prints each section's budget and its time estimate with
what the estimate rests on, and exits 1 if the budgets add up past the plan's limit. Estimates
come from the last session's measured seconds (``results/gpu_session.json``) where there is
one; otherwise from the figures recorded before (the CUDA tests' seconds in
``results/bench_gpu.json`` scaled to today's count, the products-size draw and partition in
``results/scale.json``) and a probe run here: a small job's start-up, which every bench job
pays; what has neither is a stated prior. ``--sections`` runs only the named ones (a second
call finishing what a first one cut); ``--copy-to`` (default ``$OUT`` where it is set) receives
each result file as soon as it is written, for a machine whose checkout does not come back.
``--device cpu`` tries every section but the CUDA tests and the profile on a CPU, at the sizes
``--bench-args`` and ``--scale-args`` give, writing under ``/tmp/gnntrain-gpu-session``.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from budget import REPO, Budgeted, run_within

RESULTS = REPO / "results"
SESSION = RESULTS / "gpu_session.json"
CALL_LIMIT_S = 600.0
"""One command on a lent machine."""
PLAN_LIMIT_S = 480.0
"""The plan's budgets together: one call with 2 minutes to spare."""
DEVICE_CORES = 16
"""The lent machine's cores (docs/testing.md)."""
TEST_WORKERS = DEVICE_CORES - 3
"""Test workers: the cores but three, two of them left to the graph preparation beside the tests."""
BENCH_ARGS = ["--nodes", "1000000", "--epochs", "3", "--strategy-epochs", "3", "--repeats", "3"]
"""The bench at the session's sizes: the layers on 1M nodes (the check's 2M ran past its limit),
every strategy and each determinism setting for 1 warm-up and 2 timed epochs."""


@dataclass(frozen=True)
class Section:
    name: str
    budget_s: float
    results: tuple[str, ...]
    """The files (or folders of them) it writes, relative to the results folder."""
    what: str


SECTIONS = [
    Section("setup", 25, (), "carried wheels and the checkout installed (scripts/gpu_setup.sh)"),
    Section("cuda_tests", 240, ("bench_gpu.json",),
            f"tests/test_cuda.py on {TEST_WORKERS} workers; beside them scale_prepare (CPU)"),
    Section("device_profile", 15, ("device_profiles",), "the predictor's kernel prices on the card"),
    Section("bench", 70, ("bench_gpu.json",),
            "layers against PyG (1M nodes), every strategy on 2 ranks, determinism off/on"),
    Section("gpu_scale", 130, ("gpu_scale.json",),
            "products-size: one rank ours against PyG; 5 methods on 4 ranks, eth10g, virtual clock"),
]
BY_NAME = {s.name: s for s in SECTIONS}
PREPARE_BUDGET_S = BY_NAME["cuda_tests"].budget_s
"""The graph preparation runs beside the tests, within their budget."""


def python() -> str:
    return sys.executable


def commands(device: str, results: Path, bench_args: list[str], scale_args: list[str]) -> dict[str, list[str]]:
    """Each section's command (``device``: cuda, or cpu to try the session's wiring without a GPU;
    ``results``: where the bench and gpu_scale write; ``bench_args`` and ``scale_args`` replace or
    extend their sizes)."""
    py = python()
    return {
        "setup": ["bash", "scripts/gpu_setup.sh"],
        "cuda_tests": [py, "scripts/gpu_check.py", "--no-bench", "--workers", str(TEST_WORKERS),
                       "--tests-timeout", str(BY_NAME["cuda_tests"].budget_s - 10)],
        "scale_prepare": [py, "scripts/gpu_scale.py", "--prepare", *scale_args],
        "device_profile": [py, "-m", "gnntrain.commands.predict", "--measure-profile", f"cluster.device={device}"],
        "bench": [py, "scripts/bench_gpu.py", "--device", device, "--out", str(results / "bench_gpu.json"),
                  *BENCH_ARGS, *bench_args],
        "gpu_scale": [py, "scripts/gpu_scale.py", "--device", device, "--out", str(results / "gpu_scale.json"),
                      *scale_args],
    }


# -- the plan's estimates ----------------------------------------------------------------------


def _json(path: Path) -> dict:
    return json.loads(path.read_text()) if path.exists() else {}


def collected_cuda_tests() -> int:
    listing = subprocess.run([python(), "-m", "pytest", "tests/test_cuda.py", "--collect-only", "-q", "-p",
                              "no:cacheprovider"], cwd=REPO, capture_output=True, text=True, check=False).stdout
    return sum("::" in line for line in listing.splitlines())


def probe_job_start_s() -> float:
    """Seconds a small 2-rank job takes here after the first (the fork server warm): what every
    bench job pays beside its epochs."""
    code = ("import time\nfrom gnntrain.repro.jobs import run_job\n"
            "def main():\n"
            "    job = ['dataset.num_nodes=2000', 'model.layers=2', 'model.hidden=16', 'cluster.world_size=2',\n"
            "           'train.epochs=1', 'train.eval_every=1']\n"
            "    run_job(job)\n"
            "    start = time.monotonic()\n"
            "    run_job(job)\n"
            "    print('PROBE', time.monotonic() - start)\n"
            "if __name__ == '__main__':\n    main()\n")
    env = {**os.environ, "WANDB_MODE": "disabled"}
    out = subprocess.run([python(), "-c", code], cwd=REPO, env=env, capture_output=True, text=True, check=False)
    lines = [line for line in out.stdout.splitlines() if line.startswith("PROBE")]
    if not lines:
        raise SystemExit(f"gpu-session: error: the start-up probe failed:\n{out.stderr[-2000:]}")
    return float(lines[-1].split()[1])


def estimates() -> dict[str, tuple[float, str]]:
    """Each section's estimated seconds and what the estimate rests on (module docstring)."""
    from gnntrain.strategies import METHODS  # after setup: only the dry run reads the registry here
    last = _json(SESSION).get("sections", {})
    out: dict[str, tuple[float, str]] = {}
    bench = _json(RESULTS / "bench_gpu.json")
    tests_now = collected_cuda_tests()
    start_s = probe_job_start_s()
    recorded = bench.get("cuda_tests", {})
    if recorded.get("tests"):
        per_test = recorded["seconds"] * recorded["workers"] / recorded["tests"]
        out["cuda_tests"] = (per_test * tests_now / TEST_WORKERS,
                             f"{recorded['seconds']} s for {recorded['tests']} tests on {recorded['workers']} workers "
                             f"({bench.get('card')}), scaled to {tests_now} tests on {TEST_WORKERS}")
    scale = _json(RESULTS / "scale.json")
    top = next((s for s in scale.get("steps", []) if s["nodes"] == scale.get("products", {}).get("nodes")), None)
    if top:
        four = top["partitions"]["4"]
        out["scale_prepare"] = (four["wall_s"] + 10.0,
                                f"results/scale.json on this machine: the 4-part gnntrain-partition at products' size "
                                f"{four['wall_s']:.0f} s (draw {four['generate_s']} s, METIS {four['partition_s']} s, "
                                "part files) + 10 s saving the graph (prior)")
    strategies = bench.get("strategies_2_ranks_sharing_the_gpu", {})
    if "vanilla" in strategies:
        vanilla = strategies["vanilla"]["epoch_s"]["median"]
        epochs = sum(3 * strategies.get(name, {"epoch_s": {"median": vanilla}})["epoch_s"]["median"] for name in METHODS)
        jobs = len(METHODS) + 6
        out["bench"] = (jobs * start_s + epochs + 6 * 3 * vanilla + 30.0,
                        f"{jobs} jobs x {start_s:.1f} s start-up (probed here) + 3 epochs each at the recorded "
                        f"medians ({epochs:.0f} s; the sampling ones from before they sampled on the GPU, unrecorded "
                        "ones at vanilla's) + 30 s for the layers (prior)")
    out["gpu_scale"] = (5 * start_s + 5 * 20.0 + 40.0,
                        f"5 jobs x ({start_s:.1f} s start-up probed here + 20 s of loading parts and 4 epochs, prior) "
                        "+ 40 s for the one-rank comparison (prior: loading 3 GB, 2 ways x 4 epochs)")
    out.setdefault("setup", (20.0, "prior: pip installs 4 wheels and the checkout"))
    out["device_profile"] = (15.0, "prior: seconds of micro-benchmarks")
    for name, row in last.items():
        if "seconds" in row and row.get("status") == "done":
            out[name] = (row["seconds"], f"measured in the last session ({_json(SESSION).get('card')})")
    return out


def dry_run() -> int:
    guesses = estimates()
    print(f"gpu-session plan (limit {PLAN_LIMIT_S:.0f} s: one {CALL_LIMIT_S:.0f} s call with "
          f"{(CALL_LIMIT_S - PLAN_LIMIT_S) / 60:.0f} minutes to spare)")
    print(f"{'section':16s} {'budget':>7s} {'estimate':>9s}  rests on")
    rows = [(s.name, s.budget_s) for s in SECTIONS]
    rows.insert(2, ("scale_prepare", PREPARE_BUDGET_S))
    for name, budget in rows:
        estimate, basis = guesses.get(name, (float("nan"), "no estimate"))
        beside = " (beside cuda_tests)" if name == "scale_prepare" else ""
        flag = "  [may be cut at its budget]" if estimate > budget else ""
        print(f"{name:16s} {budget:6.0f}s {estimate:8.0f}s  {basis}{beside}{flag}")
    total = sum(s.budget_s for s in SECTIONS)
    estimated = sum(guesses.get(s.name, (0.0, ""))[0] for s in SECTIONS if s.name != "cuda_tests") + max(
        guesses.get("cuda_tests", (0.0, ""))[0], guesses.get("scale_prepare", (0.0, ""))[0])
    print(f"{'total':16s} {total:6.0f}s {estimated:8.0f}s  budgets bound the call; "
          f"{'fits' if total <= PLAN_LIMIT_S else 'does NOT fit'} {PLAN_LIMIT_S:.0f} s")
    return 0 if total <= PLAN_LIMIT_S else 1


# -- the session --------------------------------------------------------------------------------


def card() -> str:
    probe = subprocess.run([python(), "-c", "import torch; print(torch.cuda.get_device_name(0) "
                            "if torch.cuda.is_available() else 'no GPU')"], capture_output=True, text=True, check=False)
    return probe.stdout.strip() or "unknown"


class Session:
    def __init__(self, results: Path, copy_to: Path | None) -> None:
        self.results, self.copy_to = results, copy_to
        self.file = results / SESSION.name
        self.record = {"card": "unknown", "started": time.strftime("%Y-%m-%d %H:%M:%S"), "sections": {}}

    def keep(self, name: str, status: str, seconds: float, **extra) -> None:
        self.record["sections"][name] = {"status": status, "seconds": round(seconds, 1),
                                         "budget_s": BY_NAME[name].budget_s if name in BY_NAME else PREPARE_BUDGET_S,
                                         **extra}
        self.results.mkdir(parents=True, exist_ok=True)
        self.file.write_text(json.dumps(self.record, indent=2) + "\n")
        files = [self.file] + [self.results / f for f in (BY_NAME[name].results if name in BY_NAME else ())]
        self.copy(files)
        print(f"gpu-session: {name}: {status} in {seconds:.0f} s", flush=True)

    def copy(self, files: list[Path]) -> None:
        if self.copy_to is None:
            return
        self.copy_to.mkdir(parents=True, exist_ok=True)
        for path in files:
            for file in (sorted(path.glob("*.json")) if path.is_dir() else [path] if path.exists() else []):
                shutil.copy(file, self.copy_to / file.name)


def status_of(code: int | None) -> str:
    return "cut_at_budget" if code is None else "done" if code == 0 else f"failed (exit {code})"


def run_session(args) -> int:
    results = args.results or (RESULTS if args.device == "cuda" else Path("/tmp/gnntrain-gpu-session"))
    session = Session(results, args.copy_to)
    run = commands(args.device, results, shlex.split(args.bench_args), shlex.split(args.scale_args))
    env = {**os.environ, "WANDB_MODE": "disabled", "PYTHONUNBUFFERED": "1"}
    wanted = args.sections
    if "setup" in wanted:
        if (REPO / ".whl").is_dir():
            code, seconds = run_within(run["setup"], BY_NAME["setup"].budget_s, env)
            session.keep("setup", status_of(code), seconds)
            if code != 0:
                return 1
        else:
            session.keep("setup", "skipped (no .whl/: the machine's own packages)", 0.0)
    session.record["card"] = card()
    print(f"gpu-session on {session.record['card']}", flush=True)
    preparing = Budgeted(run["scale_prepare"], env) if "gpu_scale" in wanted else None
    failed = False
    for section in SECTIONS[1:]:
        if section.name not in wanted:
            continue
        if section.name == "gpu_scale" and preparing is not None:
            code, seconds = preparing.wait(PREPARE_BUDGET_S)
            session.keep("scale_prepare", status_of(code), seconds)
            if code != 0:
                session.keep("gpu_scale", "skipped (the graph was not prepared)", 0.0)
                failed = True
                continue
        if section.name in ("cuda_tests", "device_profile") and args.device == "cpu":
            session.keep(section.name, "skipped (--device cpu)", 0.0)  # a CPU's profile is measured on first use
            continue
        code, seconds = run_within(run[section.name], section.budget_s, env)
        session.keep(section.name, status_of(code), seconds)
        failed |= code != 0
    return 1 if failed else 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dry-run", action="store_true", help="print the plan with each section's estimate")
    parser.add_argument("--sections", nargs="+", choices=list(BY_NAME), default=list(BY_NAME))
    parser.add_argument("--device", choices=["cuda", "cpu"], default="cuda",
                        help="cpu: try the session's wiring where there is no GPU (its figures mean nothing)")
    parser.add_argument("--copy-to", type=Path, default=Path(os.environ["OUT"]) if os.environ.get("OUT") else None,
                        help="a folder that receives each result file as it is written (default: $OUT if set)")
    parser.add_argument("--results", type=Path, default=None,
                        help="where the bench, gpu_scale and the session write (default: results/; with --device "
                             "cpu /tmp/gnntrain-gpu-session, never over a GPU's figures); the CUDA tests and the "
                             "profile write to results/ on a GPU")
    parser.add_argument("--bench-args", default="", help="options added to scripts/bench_gpu.py's, one string")
    parser.add_argument("--scale-args", default="", help="options for scripts/gpu_scale.py, one string")
    args = parser.parse_args()
    sys.exit(dry_run() if args.dry_run else run_session(args))


if __name__ == "__main__":
    main()
