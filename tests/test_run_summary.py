"""``summary.json`` is one typed object (:class:`~gnntrain.engine.summary.RunSummary`): a summary of
the format written before it reads and writes back unchanged, and no code reads a summary by
string key."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from gnntrain.engine.summary import RunSummary

REPO = Path(__file__).resolve().parents[1]
BEFORE = sorted((REPO / "tests" / "data").glob("summary_*_before_runsummary.json"))
"""Summaries written by the code before :class:`RunSummary`: a completed PipeGCN run and a run
whose rank 1 died at epoch 3."""
READERS = ("gnntrain", "scripts")


def _is_summary(node: ast.expr) -> bool:
    """Whether ``node`` names a summary: a variable called ``summary``, or an attribute ``.summary``
    (a report run's)."""
    return (isinstance(node, ast.Name) and node.id == "summary") or (
        isinstance(node, ast.Attribute) and node.attr == "summary")


def string_keyed_summary_reads(path: Path) -> list[str]:
    """``line: expression`` of every read of a summary by a string key in ``path``: a subscript
    or a ``.get`` with a string."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if (isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) and _is_summary(node.value)
                and isinstance(node.slice, (ast.Constant, ast.JoinedStr))):
            found.append(f"{node.lineno}: {ast.unparse(node)}")
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
                and _is_summary(node.func.value)):
            found.append(f"{node.lineno}: {ast.unparse(node)}")
    return found


ADDED_SINCE = {"clock": "wall", "selected_by": "score", "mean_comm_wait_time_by_kind": {}, "mean_comm_transfer_time_by_kind": {},
               "mean_comm_hidden_time_by_kind": {}}
"""Fields added after those files were written, with the value an older summary reads with."""


@pytest.mark.parametrize("path", BEFORE, ids=lambda p: p.stem)
def test_a_summary_of_the_previous_format_reads_and_writes_back_unchanged(path: Path, tmp_path: Path) -> None:
    """Every field it had, with its value, in its order; the fields added since with their
    defaults."""
    saved = json.loads(path.read_text())
    summary = RunSummary.read(path)
    assert summary.status == saved["status"] and summary.mean_epoch_time == saved["mean_epoch_time"]
    summary.write(tmp_path)
    written = json.loads((tmp_path / "summary.json").read_text())
    kept = {k: v for k, v in written.items() if k not in ADDED_SINCE}
    assert kept == saved and list(kept) == list(saved)
    assert {k: written[k] for k in ADDED_SINCE} == ADDED_SINCE


def test_a_summary_of_a_run_that_stopped_says_how_and_keeps_its_figures(tmp_path: Path) -> None:
    (completed,) = [p for p in BEFORE if "completed" in p.name]
    summary = RunSummary.read(completed)
    stopped = summary.stopped("interrupted", "interrupted by SIGTERM", [], 0, None)
    assert (stopped.status, stopped.error, stopped.epochs, stopped.error_file) == (
        "interrupted", "interrupted by SIGTERM", 0, None)
    assert "early_stop" not in stopped.to_dict() and "error_file" not in stopped.to_dict()
    assert stopped.dataset == summary.dataset and stopped.partition == summary.partition


def test_no_code_reads_a_summary_by_string_key() -> None:
    reads = {str(path.relative_to(REPO)): string_keyed_summary_reads(path)
             for folder in READERS for path in sorted((REPO / folder).rglob("*.py"))}
    assert not {path: found for path, found in reads.items() if found}


def test_the_scan_finds_a_string_keyed_read(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text('def f(run, summary):\n    return run.summary["best_val"], summary.get("status")\n')
    assert string_keyed_summary_reads(probe) == ["2: run.summary['best_val']", "2: summary.get('status')"]
