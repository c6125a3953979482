"""docs/results.md says what a run's files hold: small runs' ``metrics.jsonl`` records carry every
documented field and no other, and their traffic kinds and categories are the documented ones,
each documented prefix appearing where the doc says it does and no other."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from conftest import train_records

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
def records(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[dict]]:
    root = tmp_path_factory.mktemp("documented")
    return {name: train_records(root / name, *SMALL, *overrides) for name, overrides in RUNS.items()}


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
