"""The stale-table check: a docstring or comment edit leaves a table fresh, a code or config
value change makes it stale (on a scratch repository)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import make_cfg

from gnntrain.engine.summary import RunSummary
from gnntrain.report.runs import Run
from gnntrain.repro import CHECKOUT as REPO
from gnntrain.repro import plan, scoreboard, staleness, zoo
from gnntrain.repro.staleness import built, changed_code, composed_configs, measured, tables, write_manifest


def _commit(repo: Path, files: dict[str, str]) -> str:
    for name, text in files.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text)
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True)
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "c"], cwd=repo, check=True)
    return subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True).stdout.strip()


def test_only_code_and_config_values_make_a_table_stale(tmp_path) -> None:
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    built = _commit(tmp_path, {"pkg/a.py": '"""Doc."""\n\nX = 1\n"""Its doc."""\n\n'
                                           'def f():\n    """One."""\n    return 1  # one\n',
                               "conf/x.yaml": "lr: 0.01  # the paper's\n"})
    _commit(tmp_path, {"pkg/a.py": '"""Doc, reworded."""\n\nX = 1\n"""Its doc, reworded."""\n\n'
                                   'def f():\n    """Uno."""\n    return 1\n',
                       "conf/x.yaml": "# a comment\nlr: 0.01\n"})
    assert changed_code(built, ("pkg", "conf"), tmp_path) == []
    _commit(tmp_path, {"pkg/a.py": '"""Doc."""\n\ndef f():\n    return 2\n', "pkg/b.py": "X = 1\n"})
    assert changed_code(built, ("pkg", "conf"), tmp_path) == ["pkg/a.py", "pkg/b.py"]
    _commit(tmp_path, {"conf/x.yaml": "lr: 0.02\n"})
    assert "conf/x.yaml" in changed_code(built, ("pkg", "conf"), tmp_path)


def test_every_committed_table_is_checked_and_names_a_target_that_builds_it() -> None:
    """The papers' tables, compare's and the model zoo's: each header gives a commit and a make
    target the Makefile has."""
    rules = [line.split(":", 1)[0] for line in (REPO / "Makefile").read_text().splitlines()
             if line[:1].isalpha() and ":" in line and "=" not in line.split(":", 1)[0]]
    targets = {target for rule in rules for target in rule.split()}
    found = {str(path.relative_to(REPO)): built(path.read_text()) for path in tables()}
    assert {"results/model_zoo.md", "results/compare/table.md", "results/pipegcn/table.md"} <= set(found)
    for name, (commit, target) in found.items():
        assert commit is not None, name
        assert target in targets, f"{name} names make {target}, which the Makefile lacks"


def test_a_table_listing_its_runs_code_is_stale_only_when_that_code_changed(tmp_path) -> None:
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    built_at = _commit(tmp_path, {"gnntrain/ran.py": "X = 1\n", "gnntrain/unused.py": "Y = 1\n"})
    table = tmp_path / "results" / "t" / "table.md"
    table.parent.mkdir(parents=True)
    write_manifest(table, [Run(tmp_path / "a", RunSummary(code=["gnntrain/ran.py"])),
                           Run(tmp_path / "b", RunSummary(code=[]))])
    assert measured(table)[-1] == "gnntrain/ran.py" and "gnntrain/unused.py" not in measured(table)
    _commit(tmp_path, {"gnntrain/unused.py": "Y = 2\n"})
    assert changed_code(built_at, measured(table), tmp_path) == []
    _commit(tmp_path, {"gnntrain/ran.py": "X = 2\n"})
    assert changed_code(built_at, measured(table), tmp_path) == ["gnntrain/ran.py"]
    # a run from before the lists: the whole package
    write_manifest(table, [Run(tmp_path / "a", RunSummary(code=["gnntrain/ran.py"])), Run(tmp_path / "b", RunSummary())])
    assert "gnntrain" in measured(table)


def _hydra_run(path: Path, choices: dict[str, str | None]) -> Run:
    """A run folder whose saved Hydra config chose ``choices``."""
    (path / ".hydra").mkdir(parents=True)
    (path / ".hydra" / "hydra.yaml").write_text(yaml.safe_dump({"hydra": {"runtime": {"choices": choices}}}, sort_keys=False))
    return Run(path, RunSummary(code=[]))


def test_a_table_measures_the_configs_its_runs_composed_and_the_modules_its_build_imported(tmp_path,
                                                                                          monkeypatch) -> None:
    """An edit to another table's preset leaves this table fresh; its own preset's, or a
    dataset file a run chose, makes it stale; so does a script this build imported, not another."""
    monkeypatch.delitem(sys.modules, "gnntrain.repro.zoo")  # a module this build did not import
    runs = [_hydra_run(tmp_path / "0", {"experiment": "pipegcn_table4", "dataset": "synthetic", "model": "sage",
                                        "network": "eth10g", "hydra/launcher": "basic", "hydra/callbacks": None}),
            _hydra_run(tmp_path / "1", {"experiment": "accuracy", "dataset": "cora", "model": "sage"})]
    # the synthetic generator is the dataset option its source registers in code, which has no file
    assert composed_configs(runs[0].path) == ["conf/config.yaml", "conf/experiment/pipegcn_table4.yaml",
                                              "conf/network/eth10g.yaml"]
    assert composed_configs(tmp_path) is None
    table = tmp_path / "results" / "t" / "table.md"
    table.parent.mkdir(parents=True)
    write_manifest(table, runs)
    paths = measured(table)
    assert {"conf/experiment/pipegcn_table4.yaml", "conf/experiment/accuracy.yaml", "conf/dataset/cora.yaml",
            Path(plan.__file__).resolve().relative_to(REPO).as_posix()} <= set(paths)
    assert not {"conf", "conf/experiment/hopgnn_fig13.yaml", "gnntrain/repro/staleness.py",
                "gnntrain/repro/zoo.py"} & set(paths)
    write_manifest(table, [*runs, Run(tmp_path / "no_hydra", RunSummary(code=[]))])
    assert "conf" in measured(table)
    import gnntrain.repro.bns  # noqa: F401 - another paper's declaration, which the registry imports
    write_manifest(table, runs, others=frozenset({"gnntrain.repro.bns"}))
    assert "gnntrain/repro/bns.py" not in measured(table) and "gnntrain/repro/plan.py" in measured(table)


@pytest.mark.slow
def test_a_run_lists_the_package_files_its_processes_loaded(tmp_path) -> None:
    """Two spawned workers of PipeGCN: the workers' modules and the launcher's, and not those of
    a method the run never touched. The launcher is a fresh interpreter, as ``gnntrain`` is: this
    one has imported whatever earlier tests did."""
    cfg = make_cfg("strategy=pipegcn", "cluster.world_size=2", "dataset.num_nodes=300", "train.epochs=2")
    cfg["run_dir"] = str(tmp_path / "run")
    launcher = "import json, sys; from gnntrain.job import api; api.run(json.loads(sys.argv[1]))"
    subprocess.run([sys.executable, "-c", launcher, json.dumps(cfg)], check=True, cwd=REPO, timeout=120)
    code = RunSummary.read(tmp_path / "run").code
    assert {"gnntrain/strategies/graph_parallel/stale.py", "gnntrain/comm/communicator.py",
            "gnntrain/job/launch/spawn.py", "gnntrain/job/validation.py"} <= set(code)
    assert "gnntrain/strategies/minibatch/p3.py" not in code
    assert all((REPO / path).is_file() for path in code)


def test_a_table_built_from_uncommitted_code_is_stale(tmp_path, monkeypatch, capsys) -> None:
    table = tmp_path / "results" / "t" / "table.md"
    table.parent.mkdir(parents=True)
    table.write_text("Built by `make repro-t` at commit 4801e10+changes.\n\n| a |\n|---|\n| 1 |\n")
    assert built(table.read_text()) == ("4801e10+changes", "repro-t")
    monkeypatch.setattr(staleness, "tables", lambda: [table])
    monkeypatch.setattr(staleness, "CHECKOUT", tmp_path)
    monkeypatch.setattr(scoreboard, "differs", lambda: False)  # its own test reads every archive (slow)
    assert staleness.main() == 1
    assert "from code never committed" in capsys.readouterr().out


def test_the_zoo_table_is_built_at_its_oldest_cell_commit() -> None:
    """Cells run at different commits: the table measures from the oldest, so a change since
    any of them makes it stale; a cell that records none makes the commit unknown."""
    old, new = staleness.git("rev-list", "--max-count=2", "--abbrev-commit", "HEAD").split()[::-1]
    assert zoo.built_at([{"commit": new}, {"commit": old}]) == old[:7]
    assert zoo.built_at([{"commit": new}, {"commit": f"{old}+changes"}]) == f"{old[:7]}+changes"
    assert zoo.built_at([{"commit": new}, {}]) == "unknown"


MAKEFILE = ("BIN := .venv/bin\nSCALE ?= small\n\nzoo: install\n\t$(BIN)/python -m gnntrain.repro.zoo\n\n"
            "repro-a repro-b: repro-%: install\n\t$(BIN)/python -m gnntrain.repro $* --scale $(SCALE)\n")


def test_a_table_measures_its_make_rule_and_the_sweeper_plugin(tmp_path) -> None:
    """A table built by ``make repro-a`` measures that pattern rule's recipe and the variables it
    reads, and the sweeper plugin: another target's edit leaves it fresh; its recipe's, a
    variable's it reads and the plugin's make it stale."""
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    built = _commit(tmp_path, {"Makefile": MAKEFILE, "hydra_plugins/sweeper/__init__.py": "X = 1\n"})
    assert "--scale $(SCALE)" in staleness.make_rule(MAKEFILE, "repro-a") and "SCALE ?= small" in \
        staleness.make_rule(MAKEFILE, "repro-a")
    _commit(tmp_path, {"Makefile": MAKEFILE.replace("repro.zoo", "repro.zoo --jobs 2")})
    assert changed_code(built, staleness.AROUND, tmp_path, target="repro-a") == []
    assert changed_code(built, staleness.AROUND, tmp_path, target="zoo") == ["Makefile"]
    _commit(tmp_path, {"Makefile": MAKEFILE.replace("SCALE ?= small", "SCALE ?= paper")})
    assert changed_code(built, staleness.AROUND, tmp_path, target="repro-a") == ["Makefile"]
    _commit(tmp_path, {"Makefile": MAKEFILE, "hydra_plugins/sweeper/__init__.py": "X = 2\n"})
    assert changed_code(built, staleness.AROUND, tmp_path, target="repro-a") == ["hydra_plugins/sweeper/__init__.py"]


def test_the_docs_may_quote_only_figures_a_table_gives() -> None:
    table = "| ratio |\n|---|\n| 1.35x [1.34, 1.37] |\nWall time 8.9 min.\n"
    docs = ("What `results/p/` shows (8.9 min): PipeGCN is 1.35x [1.34, 1.37] vanilla; the bound is 1.52x. An "
            "earlier build gave 1.02x.\n\nWhat `results/q/` shows: 7.77x.\n")
    assert staleness.unquoted("p", table, docs) == ["1.52"]
    assert staleness.unquoted("q", table, docs) == ["7.77"]
    assert staleness.unquoted("r", table, docs) == []


def test_tables_drawn_again_keep_their_builds_commit_and_add_their_own(tmp_path, monkeypatch) -> None:
    """``--tables-only`` over a committed table keeps the build's header (the commit its runs ran
    at) and adds the commit the tables were drawn at; a second drawing replaces the first's; a
    build whose sweeps the paper no longer declares is refused."""
    from gnntrain.errors import GnntrainError
    from gnntrain.repro import build
    from gnntrain.repro.staleness import rendered_again

    monkeypatch.setattr(build, "git_commit", lambda: "bbbbbbb")
    table = tmp_path / "table.md"
    swept = "Sweeps: `gnntrain -m experiment=beyond_speed seed=0`"
    table.write_text(f"Built by `make repro-x` (scale=small) at commit aaaaaaa on 2 CPU cores. {swept}. Wall time "
                     "2.0 min.\n\n| a |\n|---|\n")
    declared = ["`gnntrain -m experiment=beyond_speed seed=0"]
    header = build.rendered_header(table, swept, declared, "x")
    assert built(header + "\n\n|") == ("aaaaaaa", "repro-x") and rendered_again(header) == "bbbbbbb"
    table.write_text(header + "\n")
    monkeypatch.setattr(build, "git_commit", lambda: "ccccccc")
    again = build.rendered_header(table, swept, declared, "x")
    assert rendered_again(again) == "ccccccc" and again.count("rendered again") == 1
    with pytest.raises(GnntrainError, match="other sweeps"):
        build.rendered_header(table, swept, ["`gnntrain -m experiment=other seed=0"], "x")
    assert rendered_again(table.read_text().replace("Tables rendered again", "")) is None
