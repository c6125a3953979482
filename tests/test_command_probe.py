"""Bad input to every command ends in one line and exit 2, through the installed commands: a list
per command of what a new user or an attacker gives them (a damaged trace or summary, an
override the command does not take, a key gnntrain sets itself, a FIFO or an empty file where a
file is read, an output it cannot write), so
that the next command added joins it here."""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from conftest import train_records

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
COMMANDS = {"gnntrain": [str(BIN / "gnntrain")], "gnntrain-replay": [str(BIN / "gnntrain-replay")],
            "gnntrain-predict": [str(BIN / "gnntrain-predict")],
            "gnntrain-report": [str(BIN / "gnntrain-report")],
            "python -m gnntrain.repro": [sys.executable, "-m", "gnntrain.repro"]}
SMALL = ["dataset.num_nodes=300", "train.epochs=1"]


def _damaged(run: Path, to: Path, file: str, content: bytes, append: bool = True) -> Path:
    """A copy of the traced ``run`` with ``content`` appended to (or in place of) ``file``."""
    shutil.copytree(run, to)
    with open(to / file, "ab" if append else "wb") as fh:
        fh.write(content)
    return to


CASES = [
    ("gnntrain", ["network.calibration={a: 1}", *SMALL], "network.calibration is set by gnntrain, not an option"),
    ("gnntrain", ["wandb.run={id: x}", *SMALL], "wandb.run is set by gnntrain, not an option"),
    ("gnntrain", ["dataset.source=file", *SMALL], "dataset: num_nodes: Key 'num_nodes' not in 'DatasetConfig'"),
    ("gnntrain", ["partition.assignment={fifo}", *SMALL], "fifo.npy is not a regular file"),
    ("gnntrain", ["partition.assignment={empty}", *SMALL], "empty.npy is not a readable .npy file"),
    ("gnntrain-report", ["{fifo_summary}"], "no summary.json of a completed run found"),
    ("gnntrain-replay", ["{run}", "networkfoo=1"], "override networkfoo=1: replay changes the network only"),
    ("gnntrain-replay", ["{run}", "network.foo=1"], "network.foo: Key 'foo' not in 'NetworkConfig'"),
    ("gnntrain-replay", ["{run}", "--plot", "{tmp}/c.png"], "--plot draws or compares a bandwidth sweep"),
    ("gnntrain-replay", ["{run}", "--bandwidths", "1:2:3", "--plot", "{tmp}/c.txt"], "format 'txt'; valid: png"),
    ("gnntrain-replay", ["{not_utf8}"], "not a trace event ('utf-8' codec can't decode"),
    ("gnntrain-replay", ["{null_line}"], "not a trace event"),
    ("gnntrain-replay", ["{bad_summary}"], "summary.json: not a run's summary"),
    ("gnntrain-replay", ["{bad_network}"], "summary.json: not a run's summary (its network is int"),
    ("gnntrain-replay", ["{no_metrics}"], "has no metrics.jsonl, whose records say which epochs"),
    ("gnntrain-replay", ["{nan_epoch}"], "epoch 2's epoch_time=nan; valid: times and bytes finite and >= 0"),
    ("gnntrain-predict", ["foo=1"], "foo: Key 'foo' not in 'RootConfig'"),
    ("gnntrain-predict", ["strategy=vanilla", "dataset.source=file"], "dataset: num_nodes: Key 'num_nodes'"),
    ("gnntrain-predict", ["network.calibration={a: 1}"], "network.calibration is set by gnntrain"),
    ("gnntrain-predict", ["strategy=gnnpipe,hopgnn", "model.layers=0", "--compute", "counted"],
     "none of the 2 settings can be predicted"),
    ("gnntrain-predict", ["--plot", "p.txt"], "figure p.txt: format 'txt'; valid: png, pdf, svg"),
    ("python -m gnntrain.repro", ["pipegcn", "--tables-only", "--runs", "{tmp}/none"], "--runs"),
    ("python -m gnntrain.repro", ["pipegcn", "--tables-only", "--runs", "{tmp}", "--out", "{file}"],
     "not a folder; valid: a folder"),
    ("python -m gnntrain.repro", ["pipegcn", "--tables-only", "--runs", "{tmp}", "--out", "{tmp}/out"],
     "no completed run of sweep"),
    ("python -m gnntrain.repro", ["sylvie", "--tables-only", "--runs", "{nan_runs}", "--out", "{tmp}/out"],
     "epoch 3's epoch_time=nan; valid: times and bytes finite and >= 0"),
    ("python -m gnntrain.repro", ["sylvie", "--dry-run", "--out", "{bad_wall}"],
     "run speed/repeat0/0's wall_s=abc; valid: seconds, finite and >= 0"),
]


def _nan_epoch(metrics: Path, epoch: int) -> None:
    """``metrics`` with epoch ``epoch``'s time made NaN (Python's JSON writes and reads it)."""
    records = [json.loads(line) for line in metrics.read_text().splitlines()]
    records[epoch - 1]["epoch_time"] = float("nan")
    metrics.write_text("".join(json.dumps(r) + "\n" for r in records))


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A traced run and damaged copies of it."""
    root = tmp_path_factory.mktemp("probe")
    run = root / "run"
    train_records(run, *SMALL, "train.epochs=3", "cluster.clock=virtual", "cluster.trace=true")
    summary = json.loads((run / "summary.json").read_text())
    (root / "file").write_text("a file")
    os.mkfifo(root / "fifo.npy")
    (root / "empty.npy").write_bytes(b"")
    (root / "fifo_summary" / "r1").mkdir(parents=True)
    os.mkfifo(root / "fifo_summary" / "r1" / "summary.json")
    shutil.copytree(run, root / "no_metrics")
    (root / "no_metrics" / "metrics.jsonl").unlink()
    shutil.copytree(run, root / "nan_epoch")
    _nan_epoch(root / "nan_epoch" / "metrics.jsonl", 2)
    with tarfile.open(REPO / "results" / "sylvie" / "runs.tar.gz") as archive:
        archive.extractall(root / "nan_runs", filter="data")
    _nan_epoch(root / "nan_runs" / "speed" / "repeat0" / "0" / "metrics.jsonl", 3)
    (root / "bad_wall").mkdir()
    with open(REPO / "results" / "sylvie" / "runs.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    rows[0]["wall_s"] = "abc"
    with open(root / "bad_wall" / "runs.csv", "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return {"run": run, "file": root / "file", "no_metrics": root / "no_metrics", "fifo": root / "fifo.npy",
            "empty": root / "empty.npy", "fifo_summary": root / "fifo_summary",
            "nan_epoch": root / "nan_epoch", "nan_runs": root / "nan_runs", "bad_wall": root / "bad_wall",
            "not_utf8": _damaged(run, root / "not_utf8", "trace.jsonl", b"\xff\xfe\n"),
            "null_line": _damaged(run, root / "null_line", "trace.jsonl", b"null\n"),
            "bad_summary": _damaged(run, root / "bad_summary", "summary.json", b"{\n", append=False),
            "bad_network": _damaged(run, root / "bad_network", "summary.json",
                                    json.dumps({**summary, "network": 5}).encode(), append=False)}


@pytest.mark.slow
@pytest.mark.parametrize("command, args, line", CASES, ids=[f"{c}: {' '.join(a)}" for c, a, _ in CASES])
def test_bad_input_to_a_command_is_one_line_and_exit_2(inputs: dict[str, Path], tmp_path: Path, command: str,
                                                        args: list[str], line: str) -> None:
    for name, path in {"tmp": tmp_path, **inputs}.items():
        args = [a.replace(f"{{{name}}}", str(path)) for a in args]
    done = subprocess.run([*COMMANDS[command], *args], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 2, done.stderr[-3000:]
    errors = [text for text in done.stderr.splitlines() if ": warning: " not in text]  # a warning names what was left out
    assert len(errors) == 1 and line in errors[0], done.stderr[-3000:]
    assert sorted(p.name for p in tmp_path.iterdir()) == [], "nothing is written into the current folder"
