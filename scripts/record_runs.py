"""Record the figures ``tests/test_recorded_runs.py`` replays: for every run of
``tests/data/baseline_runs.json`` (its ``common`` and per-run overrides), train it and store its
per-epoch losses, accuracies and bytes.

Re-record only when the random streams change on purpose, and first check that the code with
the old streams still reproduces the old figures. Usage: ``python scripts/record_runs.py
[NAME ...]`` (the named runs only; all by default).
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

from gnntrain.job import api
from gnntrain.repro import CHECKOUT

RECORDED = CHECKOUT / "tests" / "data" / "baseline_runs.json"
KEYS = ("epoch", "loss", "train_acc", "val_acc", "test_acc", "comm_bytes", "comm_bytes_by_kind", "eval_comm_bytes")


def main() -> None:
    recorded = json.loads(RECORDED.read_text())
    names = sys.argv[1:] or list(recorded["runs"])
    unknown = set(names) - set(recorded["runs"])
    if unknown:
        sys.exit(f"record_runs: unknown run {', '.join(sorted(unknown))}; valid: {', '.join(recorded['runs'])}")
    for name in names:
        run = recorded["runs"][name]
        with tempfile.TemporaryDirectory() as run_dir:
            cfg = api.compose([*recorded["common"], *run["overrides"]], run_dir=run_dir)
            api.run(cfg)
            rows = [json.loads(line) for line in (Path(run_dir) / "metrics.jsonl").read_text().splitlines()]
        run["epochs"] = [{key: row[key] for key in KEYS} for row in rows]
        losses = ", ".join(f"{row['loss']:.4f}" for row in run["epochs"])
        print(f"{name}: losses {losses}", flush=True)
    RECORDED.write_text(json.dumps(recorded, indent=1) + "\n")
    print(f"wrote {RECORDED}")


if __name__ == "__main__":
    main()
