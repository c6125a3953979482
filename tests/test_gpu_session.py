"""``make gpu-session`` where CI runs (no GPU): its plan fits one call with two minutes to spare,
a section is cut at its budget and the session goes on, and every section's wiring runs on CPU
tensors (``--device cpu`` at small sizes, writing apart from the committed GPU figures)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from budget import run_within
from gpu_session import CALL_LIMIT_S, PLAN_LIMIT_S, SECTIONS

REPO = Path(__file__).resolve().parents[1]

ENV = {**os.environ, "WANDB_MODE": "disabled"}


@pytest.mark.slow
def test_the_default_plan_fits_one_call_with_two_minutes_to_spare() -> None:
    assert sum(s.budget_s for s in SECTIONS) <= PLAN_LIMIT_S == CALL_LIMIT_S - 120
    out = subprocess.run([sys.executable, "scripts/gpu_session.py", "--dry-run"], cwd=REPO, env=ENV,
                         capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr
    lines = {line.split()[0]: line for line in out.stdout.splitlines()[2:]}
    for name in [s.name for s in SECTIONS] + ["scale_prepare", "total"]:
        budget, estimate = lines[name].split()[1:3]
        assert budget.endswith("s") and estimate.endswith("s") and float(estimate[:-1]) > 0, lines[name]
    assert "fits 480 s" in lines["total"]


def test_a_command_past_its_budget_is_cut_and_its_group_ended() -> None:
    start = time.monotonic()
    code, seconds = run_within([sys.executable, "-c", "import subprocess; subprocess.run(['sleep', '60'])"], 1.0)
    assert code is None and 1.0 <= seconds < 25 and time.monotonic() - start < 25


@pytest.mark.slow
def test_the_session_runs_every_section_on_a_cpu(tmp_path) -> None:
    results, copies = tmp_path / "results", tmp_path / "out"
    out = subprocess.run(
        [sys.executable, "scripts/gpu_session.py", "--device", "cpu", "--results", str(results), "--copy-to", str(copies),
         "--bench-args", "--nodes 3000 --strategy-nodes 2000 --models gcn sage --repeats 1",
         "--scale-args", f"--nodes 3000 --avg-degree 10 --epochs 1 --cache {tmp_path / 'cache'}"],
        cwd=REPO, env=ENV, capture_output=True, text=True, check=False, timeout=600)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    session = json.loads((results / "gpu_session.json").read_text())
    statuses = {name: row["status"] for name, row in session["sections"].items()}
    assert statuses == {"setup": "skipped (no .whl/: the machine's own packages)", "cuda_tests": "skipped (--device cpu)",
                        "device_profile": "skipped (--device cpu)", "bench": "done", "scale_prepare": "done", "gpu_scale": "done"}
    bench = json.loads((results / "bench_gpu.json").read_text())
    assert set(bench["strategies_2_ranks_sharing_the_gpu"]) >= {"vanilla", "minibatch", "hopgnn", "neutrontp"}
    assert {"layers_vs_pyg", "determinism"} <= set(bench)
    scale = json.loads((results / "gpu_scale.json").read_text())
    assert set(scale["ranks"]) == {"vanilla", "pipegcn", "bns", "adaqp", "gnnpipe"}
    assert "ours" in scale["single"] and "pyg_csr" in scale["single"] and scale["published"]["pipegcn_4_v100_epoch_s"]
    assert sorted(p.name for p in copies.iterdir()) == ["bench_gpu.json", "gpu_scale.json", "gpu_session.json"]
