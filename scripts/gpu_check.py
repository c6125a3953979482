"""``make gpu-check``: on one GPU, the CUDA tests (``tests/test_cuda.py``) and then the GPU bench
(``scripts/bench_gpu.py``), in one run of at most 10 minutes by default (one command on a lent
GPU machine may run 10).

The tests run first, in parallel workers where pytest-xdist is installed (jobs share the GPU;
each is one or a few processes); their outcome (counts, the failed tests' names, seconds) goes
into ``results/bench_gpu.json`` at once and again beside the bench's figures, which the bench
writes section by section: a run stopped at its time limit keeps what it measured. Exits 1 if
a test failed or timed out or the bench did not finish, 2 where no GPU is visible.

A lease too short for the whole check can finish it in parts: ``--rerun-failed`` runs only the
tests the results file lists as failed or not reached (and any ``--tests`` named), keeps the earlier outcome
and records this one beside it (``cuda_tests_rerun``); ``--sections`` (passed on to the bench)
measures only the named sections, keeping the others' figures.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import torch

from bench_gpu import SECTIONS
from budget import run_within
from gnntrain.strategies import METHODS

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "results" / "bench_gpu.json"
ALL_TESTS = "tests/test_cuda.py"


def node_id(junit_name: str) -> str:
    """A pytest node id from a failed test's name as the results file keeps it
    (``tests.test_cuda::name[param]``)."""
    module, _, name = junit_name.partition("::")
    return f"{module.replace('.', '/')}.py::{name}"


def run_tests(workers: int, timeout_s: float, tests: list[str]) -> dict:
    """Run the CUDA tests ``tests`` (pytest node ids) for at most ``timeout_s`` seconds; their
    outcome, with the tests a run cut at its budget did not reach (``not_run``)."""
    if tests != [ALL_TESTS]:
        workers = min(workers, len(tests))
    parallel = ["-n", str(workers)] if workers > 1 and importlib.util.find_spec("xdist") else []
    env = {**os.environ, "WANDB_MODE": "disabled", "PYTHONUNBUFFERED": "1"}
    with tempfile.TemporaryDirectory() as tmp:
        junit = Path(tmp) / "junit.xml"
        status, seconds = run_within([sys.executable, "-m", "pytest", *tests, "-q", "-p", "no:cacheprovider",
                                      *parallel, f"--junitxml={junit}"], timeout_s, env)
        if not junit.exists():
            return {"error": f"pytest wrote no report ({'cut at' if status is None else 'exit'} "
                             f"{timeout_s if status is None else status})", "passed": False}
        suite = ElementTree.parse(junit).getroot()
        suite = suite if suite.tag == "testsuite" else suite.find("testsuite")
    cases = list(suite.iter("testcase"))
    failed = [f"{c.get('classname')}::{c.get('name')}" for c in cases
              if c.find("failure") is not None or c.find("error") is not None]
    skipped = sum(c.find("skipped") is not None for c in cases)
    outcome = {"tests": len(cases), "failed": failed, "skipped": skipped, "seconds": round(seconds, 1),
               "workers": max(workers, 1) if parallel else 1, "passed": not failed and skipped < len(cases)}
    if status is None:
        ran = {node_id(f"{c.get('classname')}::{c.get('name')}") for c in cases}
        outcome.update(cut_at_budget_s=timeout_s, passed=False,
                       not_run=[t for t in collected(tests) if t not in ran])
    return outcome


def collected(tests: list[str]) -> list[str]:
    """The pytest node ids ``tests`` name (collected, not run)."""
    listing = subprocess.run([sys.executable, "-m", "pytest", *tests, "--collect-only", "-q", "-p", "no:cacheprovider"],
                             cwd=REPO, capture_output=True, text=True, check=False).stdout
    return [line for line in listing.splitlines() if "::" in line]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=max(1, (os.cpu_count() or 1) - 2),
                        help="parallel test workers (pytest-xdist; default: the cores but two)")
    parser.add_argument("--tests-timeout", type=float, default=300.0, help="seconds the tests may take")
    parser.add_argument("--bench-timeout", type=float, default=240.0, help="seconds the bench may take")
    parser.add_argument("--rerun-failed", action="store_true",
                        help="run only the tests the results file lists as failed (and --tests), kept beside them")
    parser.add_argument("--tests", nargs="*", default=[], help="pytest node ids run with --rerun-failed")
    parser.add_argument("--no-bench", action="store_true", help="run the tests only (make gpu-session benches apart)")
    parser.add_argument("bench_args", nargs=argparse.REMAINDER, help="options passed on to scripts/bench_gpu.py")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("gpu-check: error: no CUDA GPU is visible to torch "
              f"{torch.__version__}; run it on a GPU machine (docs/testing.md)", file=sys.stderr)
        sys.exit(2)
    print(f"gpu-check on {torch.cuda.get_device_name(0)} ({torch.cuda.device_count()} visible), "
          f"torch {torch.__version__}", flush=True)
    card = torch.cuda.get_device_name(0)
    if args.rerun_failed:
        earlier = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
        if earlier.get("card") != card:
            print(f"gpu-check: error: --rerun-failed needs {RESULTS} from a run on {card}; it holds "
                  f"{earlier.get('card', 'nothing')}", file=sys.stderr)
            sys.exit(2)
        names = ([node_id(n) for n in earlier["cuda_tests"].get("failed", [])] + earlier["cuda_tests"].get("not_run", [])
                 + args.tests)
        tests = {"ran": names, **run_tests(args.workers, args.tests_timeout, names)} if names else {"ran": []}
        result, key = earlier, "cuda_tests_rerun"
    else:
        tests = run_tests(args.workers, args.tests_timeout, [ALL_TESTS])
        result, key = {"card": card}, "cuda_tests"
    print(f"CUDA tests: {json.dumps(tests)}", flush=True)
    result[key] = tests
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    if args.no_bench:
        sys.exit(0 if tests.get("passed", True) else 1)
    env = {**os.environ, "WANDB_MODE": "disabled", "PYTHONUNBUFFERED": "1"}
    bench_args = args.bench_args[1:] if args.bench_args[:1] == ["--"] else args.bench_args
    status, _ = run_within([sys.executable, "scripts/bench_gpu.py", *bench_args], args.bench_timeout, env)
    bench_ok = status == 0
    if status is None:
        print(f"gpu-check: the bench ran past {args.bench_timeout:.0f} s and was stopped", file=sys.stderr)
    result = json.loads(RESULTS.read_text())
    result[key] = tests
    result["bench_completed"] = bench_ok
    result["bench_sections_missing"] = [section for section in SECTIONS if section not in result]
    measured = result.get("strategies_2_ranks_sharing_the_gpu", {})
    result["bench_strategies_missing"] = [name for name in METHODS if name not in measured]
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {RESULTS}")
    sys.exit(0 if tests.get("passed", True) and bench_ok else 1)


if __name__ == "__main__":
    main()
