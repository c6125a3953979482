"""A method written in one file outside the package runs through ``gnntrain`` (docs/extending.md)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from gnntrain.engine.summary import RunSummary

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "docs" / "examples" / "int8_halo.py"
MODEL = REPO / "docs" / "examples" / "mean_conv.py"
SOURCE = REPO / "docs" / "examples" / "ring_source.py"
TINY = ["dataset.num_nodes=300", "cluster.world_size=2", "train.epochs=3", "wandb.mode=disabled"]


def _gnntrain(tmp_path: Path, name: str, *overrides: str, common: tuple[str, ...] = tuple(TINY)
              ) -> subprocess.CompletedProcess:
    env = {**os.environ, "GNNTRAIN_PLUGINS": os.pathsep.join(map(str, (EXAMPLE, MODEL, SOURCE)))}
    return subprocess.run([sys.executable, "-m", "gnntrain.commands.train", *common, *overrides, f"hydra.run.dir={tmp_path / name}"],
                          capture_output=True, text=True, env=env, cwd=tmp_path)


def _summary(tmp_path: Path, name: str) -> RunSummary:
    return RunSummary.read(tmp_path / name)


def test_a_halo_compression_method_from_one_file_runs_through_gnntrain(plugin_sweep: Path) -> None:
    """int8 halos (clip 1, the default: the sweep's last job) against vanilla (its first) on the
    same graph: halo rows forward as int8 codes and scales, gradients back at full precision."""
    full, int8 = RunSummary.read(plugin_sweep / "0"), RunSummary.read(plugin_sweep / "3")
    assert int8.status == "completed" and int8.strategy == "int8_halo" and full.strategy == "vanilla"
    sent, baseline = int8.mean_comm_bytes_by_kind, full.mean_comm_bytes_by_kind
    assert sent.get("halo_fwd", 0) == 0 and sent["halo_bwd"] == baseline["halo_bwd"]
    # a byte per value and 4 per row against 4 per value, on rows of 32 (input) and 16 (hidden) values
    assert 0.25 * baseline["halo_fwd"] < sent["int8_halo"] < 0.35 * baseline["halo_fwd"]


def test_its_key_is_checked_and_listed(tmp_path: Path) -> None:
    bad = _gnntrain(tmp_path, "bad", "strategy=int8_halo", "strategy.clip=2")
    assert bad.returncode == 2 and bad.stderr.strip().splitlines()[-1] == (
        "gnntrain: error: strategy.clip=2.0 is invalid; it must be in (0, 1]")
    shown = subprocess.run([sys.executable, "-m", "gnntrain.commands.train", "strategy=int8_halo", "--help"], capture_output=True,
                           text=True, env={**os.environ, "GNNTRAIN_PLUGINS": str(EXAMPLE)})
    assert "strategy.clip" in shown.stdout and "int8_halo" in shown.stdout
    assert "strategy.halo_dtype" not in shown.stdout, "int8 halos have their own wire format"


def test_a_key_the_method_cannot_honour_is_refused_in_one_line(tmp_path) -> None:
    """16-bit halos are a key of the methods whose training halos go through the family's
    exchanges; int8 halos send their own format, so the key is refused, naming the valid ones."""
    bad = _gnntrain(tmp_path, "half", "strategy=int8_halo", "strategy.halo_dtype=bfloat16")
    assert bad.returncode == 2
    line, = bad.stderr.strip().splitlines()
    assert "strategy.halo_dtype" in line and "clip" in line


def test_a_plugin_that_is_not_there_is_named(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "gnntrain.commands.train", *TINY], capture_output=True, text=True,
                          env={**os.environ, "GNNTRAIN_PLUGINS": str(tmp_path / "missing.py")})
    assert done.returncode == 2 and "GNNTRAIN_PLUGINS names" in done.stderr and "missing.py" in done.stderr


def test_a_model_from_one_file_trains_and_two_workers_equal_one(tmp_path: Path) -> None:
    """One sweep: the model on one worker (job 0) and on two (job 1), float64, no dropout."""
    env = {**os.environ, "GNNTRAIN_PLUGINS": str(MODEL)}
    done = subprocess.run([sys.executable, "-m", "gnntrain.commands.train", "-m", *TINY, "model=mean_conv",
                           "cluster.world_size=1,2", "model.dropout=0", "train.dtype=float64",
                           f"hydra.sweep.dir={tmp_path / 'sweep'}"], capture_output=True, text=True, env=env,
                          cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    one, two = ([json.loads(line) for line in (tmp_path / "sweep" / job / "metrics.jsonl").read_text().splitlines()]
                for job in ("0", "1"))
    assert one[-1]["loss"] < one[0]["loss"]
    assert [r["loss"] for r in two] == pytest.approx([r["loss"] for r in one], rel=1e-9)
    assert RunSummary.read(tmp_path / "sweep" / "1").model == "mean_conv"


@pytest.mark.slow
def test_a_dataset_source_from_one_file_is_a_dataset_option_with_its_keys_checked(tmp_path: Path) -> None:
    """docs/examples/ring_source.py: a generator registered as a source is ``dataset=ring``, typed
    by its own config (its keys set on the command line), loaded in every worker."""
    ring = tuple(o for o in TINY if not o.startswith("dataset."))
    done = _gnntrain(tmp_path, "ring", "dataset=ring", "dataset.cliques=12", "dataset.clique_size=5", common=ring)
    assert done.returncode == 0, done.stderr
    summary = _summary(tmp_path, "ring")
    assert (summary.dataset, summary.num_nodes, summary.status) == ("ring", 60, "completed")
    bad = _gnntrain(tmp_path, "bad_ring", "dataset=ring", "dataset.num_classes=13", "dataset.cliques=12", common=ring)
    assert bad.returncode == 2 and bad.stderr.strip().splitlines()[-1] == (
        "gnntrain: error: dataset.num_classes=13 is invalid; it must be in [2, dataset.cliques=12]")


def _sweep(tmp_path: Path, *overrides: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "GNNTRAIN_PLUGINS": str(EXAMPLE)}
    return subprocess.run([sys.executable, "-m", "gnntrain.commands.train", "-m", *TINY, "train.epochs=2", *overrides,
                           f"hydra.sweep.dir={tmp_path / 'sweep'}"], capture_output=True, text=True, env=env,
                          cwd=tmp_path)


def test_one_sweep_runs_the_plugin_at_each_value_of_its_knob_beside_the_baselines(plugin_sweep: Path) -> None:
    """docs/extending.md's recipe: a knob of one strategy reaches that strategy's jobs only."""
    jobs = sorted(plugin_sweep.glob("[0-9]*"), key=lambda p: int(p.name))
    summaries = [RunSummary.read(job) for job in jobs]
    overrides = [(job / ".hydra" / "overrides.yaml").read_text() for job in jobs]
    assert [s.strategy for s in summaries] == ["vanilla", "adaqp", "int8_halo", "int8_halo"]
    assert [s.status for s in summaries] == ["completed"] * 4
    assert ["strategy.clip" in o for o in overrides] == [False, False, True, True]
    assert "strategy.clip=0.5" in overrides[2] and "strategy.clip=1" in overrides[3]


def test_a_knob_no_swept_strategy_has_is_refused_before_any_job(tmp_path: Path) -> None:
    done = _sweep(tmp_path, "strategy=vanilla,int8_halo", "strategy.clap=0.5,1")
    assert done.returncode == 2
    line, = done.stderr.strip().splitlines()
    assert "none was started" in line and "clap" in line and "clip" in line
    assert not list((tmp_path / "sweep").glob("[0-9]*/summary.json"))


@pytest.mark.slow
def test_a_knob_of_one_value_is_given_as_a_sweep_and_the_error_says_so(tmp_path: Path) -> None:
    plain = _sweep(tmp_path, "strategy=vanilla,int8_halo", "strategy.clip=0.5")
    assert plain.returncode == 2 and plain.stderr.strip().splitlines()[-1].endswith("strategy.clip=choice(0.5)")
    swept = _sweep(tmp_path, "strategy=vanilla,int8_halo", "strategy.clip=choice(0.5)", "train.epochs=1")
    assert swept.returncode == 0, swept.stderr
    overrides = [(tmp_path / "sweep" / job / ".hydra" / "overrides.yaml").read_text() for job in ("0", "1")]
    assert "clip" not in overrides[0] and "strategy.clip=0.5" in overrides[1]


def test_the_exchange_members_the_guide_lists_exist() -> None:
    """docs/extending.md's table of what a halo exchange offers names members the code has (it
    once listed an ``exchange(h, layer)`` method that never existed), the communicator's included."""
    import inspect
    import re

    from gnntrain.comm.communicator import Communicator
    from gnntrain.parallel.halo import HaloExchange

    guide = (Path(__file__).parents[1] / "docs" / "extending.md").read_text()
    table = guide.split("| member | what it is |", 1)[1].split("\n\n", 1)[0]
    names = [name for row in table.splitlines()[2:] for name in re.findall(r"`([a-z_]+)[`(]", row.split("|")[1])]
    assert {"send_index", "comm", "start_forward", "gradient_of_sent_rows"} <= set(names)

    def has(cls: type, name: str) -> bool:
        return hasattr(cls, name) or f"self.{name} =" in inspect.getsource(cls)

    assert [n for n in names if not has(HaloExchange, n) and n != "self"] == []
    assert callable(HaloExchange.__call__)
    assert all(has(Communicator, n) for n in re.findall(r"`comm\.([a-z_]+)`", table))
