"""docs/results.md says what a run's files hold: small runs' ``metrics.jsonl`` records carry every
documented field and no other, and their traffic kinds and categories are the documented ones,
each documented prefix appearing where the doc says it does and no other."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pytest

from conftest import train_records

from gnntrain.report import report

RESULTS = Path(__file__).resolve().parents[1] / "docs" / "results.md"
SMALL = ["dataset.num_nodes=600", "dataset.avg_degree=6", "train.epochs=3"]
RUNS = {
    "pipegcn": ["strategy=pipegcn", "strategy.track_staleness_error=true", "model.precompute_first=true"],
    "gnnpipe": ["strategy=gnnpipe"],
}
"""Runs that between them send every prefixed kind the doc names (``diag_`` and ``precompute_``:
PipeGCN tracking its staleness over precomputed first-layer inputs; ``history_``: GNNPipe)."""


def documented(section: str) -> dict[str, str]:
    """The rows of the table under ``## section`` in docs/results.md: the first column's code
    span -> the rest of the row."""
    text = RESULTS.read_text().split(f"## {section}\n", 1)[1].split("\n## ", 1)[0]
    return dict(re.findall(r"^\| `([^`]+)` \| (.*) \|$", text, re.MULTILINE))


def code_spans(text: str) -> list[str]:
    return re.findall(r"`([^`]+)`", text)


@pytest.fixture(scope="module")
def runs_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder of the :data:`RUNS`, one run dir each."""
    root = tmp_path_factory.mktemp("documented")
    for name, overrides in RUNS.items():
        train_records(root / name, *SMALL, *overrides)
    return root


@pytest.fixture(scope="module")
def records(runs_root: Path) -> dict[str, list[dict]]:
    return {name: [json.loads(line) for line in (runs_root / name / "metrics.jsonl").read_text().splitlines()]
            for name in RUNS}


def test_every_summary_has_the_documented_fields_in_order_and_no_other(runs_root: Path) -> None:
    """Those documented as "Only ..." (W&B on, a failed run) are absent from these runs."""
    fields = documented("Run summary")
    always = [key for key, text in fields.items() if not text.startswith("Only")]
    for name in RUNS:
        summary = json.loads((runs_root / name / "summary.json").read_text())
        assert list(summary) == always, name


def test_the_report_writes_the_documented_columns(runs_root: Path) -> None:
    """``report.csv`` has the documented run columns (``--target`` adds the last three) and
    ``groups.csv`` the documented group columns (each figure with its ``_ci95``)."""
    report(runs_root, runs_root, target="0.1")
    runs, groups = documented("Report columns: runs"), documented("Report columns: groups")
    with open(runs_root / "report.csv", newline="") as f:
        assert csv.DictReader(f).fieldnames == list(runs)
    with open(runs_root / "groups.csv", newline="") as f:
        header = csv.DictReader(f).fieldnames
    plain = [column for column in header if not column.endswith("_ci95")]
    assert plain == [column for column in groups if column != "<figure>_ci95"]
    assert all(column.removesuffix("_ci95") in groups for column in header)


def test_every_record_has_the_documented_fields_and_no_other(records: dict[str, list[dict]]) -> None:
    fields = documented("Per-epoch record")
    for record in (r for run in records.values() for r in run):
        assert set(record) == set(fields)


def test_the_kinds_are_the_documented_ones_with_the_documented_prefixes(records: dict[str, list[dict]]) -> None:
    """``comm_bytes_by_kind``'s row names the kinds always listed and the prefixes a kind may
    carry; every other kind is in the table of kinds; evaluation's kinds are never listed."""
    fields, kinds = documented("Per-epoch record"), documented("Traffic kinds and their categories")
    spans = code_spans(fields["comm_bytes_by_kind"])
    prefixes = {s for s in spans if s.endswith("_")}
    always = {s for s in spans if s in kinds}
    assert prefixes == {"history_", "precompute_", "diag_"} and always == {"halo_fwd", "halo_bwd", "allreduce"}
    seen: dict[str, set[tuple[str, int]]] = {prefix: set() for prefix in prefixes}
    for name, run in records.items():
        for record in run:
            assert always <= set(record["comm_bytes_by_kind"])
            for kind in record["comm_bytes_by_kind"]:
                prefix = next((p for p in prefixes if kind.startswith(p)), "")
                assert kind.removeprefix(prefix) in kinds, f"{name}: undocumented kind {kind}"
                if prefix:
                    seen[prefix].add((name, record["epoch"]))
    assert seen == {"history_": {("gnnpipe", 1)}, "precompute_": {("pipegcn", 1)},
                    "diag_": {("pipegcn", epoch) for epoch in (1, 2, 3)}}


def test_the_categories_are_the_documented_ones(records: dict[str, list[dict]]) -> None:
    fields = documented("Per-epoch record")
    categories = {s for s in code_spans(fields["comm_bytes_by_category"]) if s not in fields and not s.endswith("_")}
    assert categories == {"data", "sync", "control", "eval", "diag"}
    for record in (r for run in records.values() for r in run):
        by_category = record["comm_bytes_by_category"]
        assert set(by_category) == categories
        assert by_category["eval"] == record["eval_comm_bytes"] > 0, "every epoch here evaluates"
        assert by_category["diag"] == sum(b for k, b in record["comm_bytes_by_kind"].items() if k.startswith("diag_"))
