"""Files from someone else, a shared cache, a shared run dir: nothing a file holds runs, and each
refusal is one line before any worker starts.

Each crafted file is a ``torch.save`` (or a raw pickle) of an object whose unpickling would
create a marker file; the marker never appears.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest
import torch

from conftest import make_run, train_records
from gnntrain.storage.cache import cache_folder
from gnntrain.config.schema import DatasetConfig
from gnntrain.data.job import write_partitioned_dataset
from gnntrain.data.parted import PartedDataset, part_file
from gnntrain.data.partition import load_assignment, load_or_partition
from gnntrain.data.registry import load_dataset, load_file
from gnntrain.errors import ConfigError
from gnntrain.job.launch.spawn import rendezvous_store
from gnntrain.job.run_dir import LOCK_FILE, RunDirBusy, RunDirRefused, owned
from gnntrain.storage.safe_load import UnsafeFile

SMALL = ("dataset.num_nodes=300", "dataset.avg_degree=6", "model.hidden=8")
GNNTRAIN = str(Path(sys.executable).with_name("gnntrain"))
OPENS = r"\w+\.open"
"""How the marker's ``open`` is named in a pickle (``io.open``, as Python pickles it)."""
SHARED = Path(__file__).resolve().parents[2] / "shared" / "datasets"


class Payload:
    """Unpickling it would create ``marker``."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return open, (str(self.marker), "w")


def craft(path: Path, marker: Path) -> None:
    torch.save({"x": torch.ones(2), "payload": Payload(marker)}, path)


def test_a_crafted_checkpoint_is_refused_before_any_worker_starts(tmp_path) -> None:
    run_dir, marker = tmp_path / "run", tmp_path / "marker"
    train_records(run_dir, *SMALL, "train.epochs=2", "train.checkpoint_every=2")
    craft(run_dir / "checkpoints" / "epoch_000002" / "rank1.pt", marker)
    res = subprocess.run([GNNTRAIN, *SMALL, "train.epochs=3", f"train.resume={run_dir}",
                          f"hydra.run.dir={tmp_path / 'resumed'}"], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "WANDB_MODE": "disabled"})
    assert res.returncode == 2, res.stderr
    (line,) = res.stderr.strip().splitlines()
    assert re.fullmatch(f"gnntrain: error: {run_dir / 'checkpoints' / 'epoch_000002' / 'rank1.pt'} is refused: it names "
                        r"\w+\.open, beyond the tensors and plain data gnntrain writes; gnntrain never loads code from a "
                        r"file \(delete it, or write it again\)", line), line
    assert not marker.exists()


def test_a_crafted_partition_cache_entry_is_refused(tmp_path) -> None:
    data = load_dataset(make_run(*SMALL).dataset, tmp_path)
    load_or_partition(data, "key", "metis", 2, 0, tmp_path)
    (entry,) = (tmp_path / "partitions").glob("*.pt")
    craft(entry, tmp_path / "marker")
    with pytest.raises(UnsafeFile, match=OPENS):
        load_or_partition(data, "key", "metis", 2, 0, tmp_path)
    assert not (tmp_path / "marker").exists()


def test_crafted_part_files_and_assignments_are_refused(tmp_path) -> None:
    run = make_run(*SMALL, "strategy=vanilla", f"partition.dir={tmp_path / 'parted'}")
    write_partitioned_dataset(run, 2)
    craft(part_file(tmp_path / "parted", 1), tmp_path / "marker")
    with pytest.raises(UnsafeFile, match=OPENS):
        PartedDataset.find(tmp_path / "parted")
    np.save(tmp_path / "assignment.npy", np.array([Payload(tmp_path / "marker")] * 300, dtype=object))
    data = load_dataset(run.dataset, tmp_path)
    with pytest.raises(ConfigError, match="is not a readable .npy file"):
        load_assignment(tmp_path / "assignment.npy", data, 2)
    assert not (tmp_path / "marker").exists()


def test_a_crafted_dataset_file_is_refused(tmp_path) -> None:
    craft(tmp_path / "graph.pt", tmp_path / "marker")
    with pytest.raises(UnsafeFile, match="graph.pt is refused: it names " + OPENS):
        load_file(DatasetConfig(name="mine", source="file", file=str(tmp_path / "graph.pt"),
                                root=str(tmp_path)), tmp_path)
    assert not (tmp_path / "marker").exists()


@pytest.mark.skipif(not SHARED.is_dir(), reason="needs ../shared/datasets")
def test_crafted_processed_pyg_files_are_rebuilt_from_the_raw_files(tmp_path, capsys) -> None:
    """PyG's own loader would fall back to the unrestricted unpickler for a processed file and
    uses it outright for ``pre_transform.pt``: both are dealt with before it reads them."""
    cora = make_run("dataset=cora").dataset
    first = load_dataset(cora, tmp_path)
    (processed,) = (tmp_path / "pyg").glob("*/Cora/processed")
    craft(processed / "data.pt", tmp_path / "marker")
    craft(processed / "pre_transform.pt", tmp_path / "marker")
    again = load_dataset(cora, tmp_path)
    assert torch.equal(again.x, first.x) and torch.equal(again.edge_index, first.edge_index)
    assert not (tmp_path / "marker").exists()
    assert re.search(f"cache file {processed / 'data.pt'} names {OPENS}", capsys.readouterr().err)


def test_a_second_job_in_a_held_run_dir_is_refused_naming_the_first(tmp_path) -> None:
    with owned(tmp_path):
        holder = (tmp_path / LOCK_FILE).read_text()
        assert holder.startswith(f"pid {os.getpid()} on ")
        with pytest.raises(RunDirBusy, match=f"run dir {tmp_path} is in use by a running gnntrain job \\({holder}\\)"):
            with owned(tmp_path):
                pass
    with owned(tmp_path):  # released: the next job takes it
        pass


def test_the_cli_refuses_a_held_run_dir_and_leaves_the_first_job_s_files(tmp_path) -> None:
    run_dir = tmp_path / "run"
    train_records(run_dir, *SMALL, "train.epochs=2")
    before = {p: p.read_bytes() for p in run_dir.rglob("*") if p.is_file()}
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time; from pathlib import Path; "
                               "from gnntrain.job.run_dir import owned\nwith owned(Path(sys.argv[1])):\n"
                               "    print('held', flush=True); time.sleep(60)", str(run_dir)],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        res = subprocess.run([GNNTRAIN, *SMALL, "train.epochs=3", f"hydra.run.dir={run_dir}"], capture_output=True,
                             text=True, timeout=120, env={**os.environ, "WANDB_MODE": "disabled"})
    finally:
        holder.kill()
        holder.wait()
    assert res.returncode == 2
    (line,) = res.stderr.strip().splitlines()
    assert line.startswith(f"gnntrain: error: run dir {run_dir} is in use by a running gnntrain job (pid {holder.pid}")
    assert {p: p.read_bytes() for p in run_dir.rglob("*") if p.is_file() and p.name != LOCK_FILE} == \
        {p: b for p, b in before.items() if p.name != LOCK_FILE}


def test_a_lock_left_by_a_dead_job_is_taken_over_and_said(tmp_path, capsys) -> None:
    (tmp_path / LOCK_FILE).write_text("pid 4242 on elsewhere since 2026-01-01 00:00:00")
    with owned(tmp_path):
        pass
    assert (f"run dir {tmp_path} was held by a job that ended without finishing (pid 4242 on elsewhere since "
            "2026-01-01 00:00:00); this run takes it over") in capsys.readouterr().err
    assert (tmp_path / LOCK_FILE).read_text() == ""


def _listening(port: int) -> list[str]:
    """The local addresses listening on ``port`` (IPv4, /proc/net/tcp)."""
    rows = [line.split() for line in Path("/proc/net/tcp").read_text().splitlines()[1:]]
    found = []
    for row in rows:
        address, hex_port = row[1].split(":")
        if int(hex_port, 16) == port and row[3] == "0A":
            found.append(".".join(str(int(address[i:i + 2], 16)) for i in (6, 4, 2, 0)))
    return found


def test_the_rendezvous_store_of_a_local_job_listens_on_its_address_alone() -> None:
    store = rendezvous_store("127.0.0.1", 0, 10)
    try:
        assert _listening(store.port) == ["127.0.0.1"]
    finally:
        del store
    with pytest.raises(ConfigError, match=r"^cluster.master_addr=127.0.0.1 cluster.master_port=70000: the launcher "
                                          r"cannot listen there \(.*\); valid: .* 1-65535 \(0: any free one\)$"):
        rendezvous_store("127.0.0.1", 70000, 10)


def test_a_store_asked_to_listen_on_every_interface_says_so(capsys) -> None:
    store = rendezvous_store("0.0.0.0", 0, 10)
    del store
    assert capsys.readouterr().err == ("gnntrain: warning: cluster.master_addr=0.0.0.0: the job's rendezvous store "
                                       "listens on every interface of this machine, unauthenticated; an address of "
                                       "the interface the workers use keeps it there\n")


def test_the_cache_is_private_and_another_user_s_is_refused(tmp_path, monkeypatch) -> None:
    folder = cache_folder(tmp_path / "cache", "partitions")
    assert [oct(p.stat().st_mode & 0o777) for p in (tmp_path / "cache", folder)] == ["0o700", "0o700"]
    monkeypatch.setattr(os, "getuid", lambda: os.stat(folder).st_uid + 1)
    with pytest.raises(ConfigError, match=f"^partition.cache_dir: {tmp_path / 'cache'} belongs to user id"):
        cache_folder(tmp_path / "cache", "partitions")


def test_a_run_dir_whose_config_folder_is_a_link_is_refused_not_written_through(tmp_path) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (run_dir / ".hydra").symlink_to(elsewhere, target_is_directory=True)
    done = subprocess.run([str(Path(sys.executable).with_name("gnntrain")), "dataset.num_nodes=300", "train.epochs=1",
                           f"hydra.run.dir={run_dir}"], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "WANDB_MODE": "disabled"})
    assert done.returncode != 0 and ".hydra is a symbolic link" in done.stderr.splitlines()[0]
    assert list(elsewhere.iterdir()) == []


@pytest.mark.parametrize("name", [LOCK_FILE, "trace.jsonl", ".compute.lock", "metrics.jsonl", "summary.json",
                                  "wandb/", "checkpoints/", "checkpoints/epoch_000002/"])
def test_a_file_the_job_writes_planted_as_a_link_is_refused_before_anything_is_written(tmp_path: Path,
                                                                                      name: str) -> None:
    """A file, or a folder (named with a trailing slash) the job writes into: W&B's, the
    checkpoints', a checkpoint's."""
    target = tmp_path / "someone_elses"
    if name.endswith("/"):
        target.mkdir()
        (target / "file").write_text("keep me")
    else:
        target.write_text("keep me")
    run_dir = tmp_path / "run"
    link = run_dir / name.rstrip("/")
    link.parent.mkdir(parents=True)
    link.symlink_to(target)
    with pytest.raises(RunDirRefused, match=f"run dir {run_dir}: {re.escape(name.rstrip('/'))} is a symbolic link"):
        with owned(run_dir):
            pass
    if name.endswith("/"):
        assert [p.name for p in target.iterdir()] == ["file"] and (target / "file").read_text() == "keep me"
    else:
        assert target.read_text() == "keep me"


def test_a_job_refused_a_planted_trace_records_nothing_in_the_dir(tmp_path: Path) -> None:
    """Through the command: one line, exit 2, no summary written into the dir it refused."""
    target = tmp_path / "someone_elses_file"
    target.write_text("keep me")
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "trace.jsonl").symlink_to(target)
    done = subprocess.run([str(Path(sys.executable).with_name("gnntrain")), "dataset.num_nodes=300", "train.epochs=1",
                           "cluster.clock=virtual", "cluster.trace=true", f"hydra.run.dir={run_dir}"],
                          capture_output=True, text=True, timeout=120, env={**os.environ, "WANDB_MODE": "disabled"})
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert "trace.jsonl is a symbolic link" in done.stderr
    assert target.read_text() == "keep me" and not (run_dir / "summary.json").exists()


PLANTING_LAUNCHER = """
import json, os, pickle, sys, tempfile, time
from pathlib import Path

marker, record = Path(sys.argv[1]), Path(sys.argv[2])
made = tempfile.NamedTemporaryFile
planted = []


class Payload:
    def __reduce__(self):
        return open, (str(marker), "w")


def plant(path):
    # another user (uid 65534) creates the name torch made, deleted and will unpickle
    child = os.fork()
    if child == 0:
        os.setgid(65534)
        os.setuid(65534)
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:
            try:
                with open(path, "xb") as fh:
                    pickle.dump(Payload(), fh)
                os._exit(0)
            except FileExistsError:
                time.sleep(0.001)
            except OSError:
                os._exit(3)
        os._exit(4)
    planted.append((path, child))


def recording(*args, **kwargs):
    handle = made(*args, **kwargs)
    if os.path.basename(handle.name).startswith("pytorch-errorfile-"):
        plant(handle.name)
    return handle


tempfile.NamedTemporaryFile = recording
from gnntrain.errors import WorkerFailed
from gnntrain.job import api


def main():
    try:
        api.run(api.compose(sys.argv[3:] + ["wandb.mode=disabled"]))
        error = None
    except WorkerFailed as failed:
        error = str(failed)
    outcomes = [(path, os.waitpid(child, 0)[1] >> 8) for path, child in planted]
    record.write_text(json.dumps({"error": error, "planted": outcomes}))


if __name__ == "__main__":
    main()
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="acting as another user (uid 65534) needs root")
@pytest.mark.slow
def test_another_users_file_at_a_workers_error_file_name_never_runs(tmp_path) -> None:
    """torch names a worker's error file, deletes it, and unpickles what is at the name when the
    worker fails. Another user creating that name first must fail: the names are in a directory
    of the launcher's alone (mode 0700), and the failing worker's own traceback is reported."""
    marker, record = tmp_path / "marker", tmp_path / "record.json"
    env = {**os.environ, "GNNTRAIN_PLUGINS": str(Path(__file__).parent / "data" / "failing_strategy.py"),
           "WANDB_MODE": "disabled"}
    subprocess.run([sys.executable, "-c", PLANTING_LAUNCHER, str(marker), str(record), "strategy=failing",
                    "dataset.num_nodes=300", "train.epochs=3", f"run_dir={tmp_path / 'run'}"],
                   cwd=tmp_path, env=env, check=True, timeout=300)
    outcome = json.loads(record.read_text())
    assert "ValueError: rank 1 cannot go on" in outcome["error"]
    assert len(outcome["planted"]) == 2 and not marker.exists()
    for path, status in outcome["planted"]:
        assert Path(path).parent != Path(tempfile.gettempdir()) and status == 3  # 3: refused, not created
