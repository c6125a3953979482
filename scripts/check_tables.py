"""Which committed tables are older than the code they measure (``make check-tables``): every
``results/<name>/table.md`` (the papers' ``make repro-<paper>`` and ``make compare``) and
``results/model_zoo.md`` (``make zoo``).

Every table's header says which make target built it and at which commit ("Built by `make
<target>` ... at commit <sha>"). A table is *stale* when, between that commit and ``HEAD``, the
code of a file it measures changed: the package (``gnntrain/``), the configs (``conf/``) and the
scripts that run and tabulate the sweeps. Of the package, only the files the table's runs
executed count where the table lists them (``<table>.code.json``, written with the table from
the runs' ``summary.json``: :mod:`gnntrain.provenance`); a table without that list measures the
whole package. Python files are compared
as their syntax trees with docstrings dropped and YAML files as their parsed values, so an edit
to a docstring or a comment does not make a table stale; any other change does. The check is
conservative: a change to a module every run imports (a model's base class, the launcher) marks
every table stale although it may move no figure, since only a rebuild can tell. Prints one line
per table and exits 1 if any is stale.
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
SCRIPTS = ("scripts/repro.py", "scripts/repro_tables.py", "scripts/sweep_plan.py", "scripts/locality.py",
           "scripts/share_curves.py", "scripts/compare.py", "scripts/model_zoo.py", "scripts/jobs.py")
MEASURED = ("gnntrain", "conf", *SCRIPTS)
"""What a table measures where it lists no code of its own: the whole package."""
TABLES = ("results/*/table.md", "results/model_zoo.md")
BUILT_AT = re.compile(r"at commit ([0-9a-f]{7,40})")
BUILT_BY = re.compile(r"Built by `make ([\w-]+)`")


def tables(repo: Path = REPO) -> list[Path]:
    """Every committed table, in path order."""
    return sorted(path for pattern in TABLES for path in repo.glob(pattern))


def manifest(table: Path) -> Path:
    """The list of package files a table's runs executed (``<table>.code.json``, beside it)."""
    return table.with_name(table.stem + ".code.json")


def write_manifest(table: Path, summaries: list[dict]) -> None:
    """Beside ``table``, the package files its runs executed (the union of their summaries'
    ``code``, :mod:`gnntrain.provenance`); none where a run does not list its code, so that the
    check measures the whole package."""
    path = manifest(table)
    if summaries and all("code" in s for s in summaries):
        path.write_text(json.dumps({"files": sorted({f for s in summaries for f in s["code"]})}, indent=0) + "\n")
    else:
        path.unlink(missing_ok=True)


def measured(table: Path) -> tuple[str, ...]:
    """The paths whose code a table measures: the configs, the scripts, and the package files its
    runs executed where it lists them (:func:`write_manifest`), else the whole package."""
    path = manifest(table)
    if not path.exists():
        return MEASURED
    return ("conf", *SCRIPTS, *json.loads(path.read_text())["files"])


def built(text: str) -> tuple[str | None, str | None]:
    """The commit a table was built at and the make target that built it, read from its header
    (the text before its first table row); None for what the header does not say."""
    header = text.split("\n|", 1)[0]
    commit, target = BUILT_AT.search(header), BUILT_BY.search(header)
    return (commit.group(1) if commit else None), (target.group(1) if target else None)


def git(*args: str, repo: Path = REPO) -> str:
    return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=True).stdout


def _show(commit: str, path: str, repo: Path) -> str | None:
    """``path``'s text at ``commit``; None where it did not exist."""
    done = subprocess.run(["git", "show", f"{commit}:{path}"], cwd=repo, capture_output=True, text=True)
    return done.stdout if done.returncode == 0 else None


def normalised(path: str, text: str | None) -> object:
    """What of a file's text can change a figure: a Python file's syntax tree without docstrings,
    a YAML file's values, any other file's text."""
    if text is None:
        return None
    if path.endswith(".py"):
        tree = ast.parse(text)
        for node in ast.walk(tree):
            body = getattr(node, "body", None)
            if (isinstance(body, list) and body and isinstance(body[0], ast.Expr)
                    and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str)):
                node.body = body[1:] or [ast.Pass()]
        return ast.dump(tree)
    if path.endswith((".yaml", ".yml")):
        return yaml.safe_load(text)
    return text


def changed_code(commit: str, paths: tuple[str, ...] = MEASURED, repo: Path = REPO) -> list[str]:
    """The files under ``paths`` whose code differs between ``commit`` and HEAD."""
    names = git("diff", "--name-only", commit, "HEAD", "--", *paths, repo=repo).split()
    return [name for name in names
            if normalised(name, _show(commit, name, repo)) != normalised(name, _show("HEAD", name, repo))]


def main() -> int:
    stale = 0
    for table in tables():
        name = table.relative_to(REPO)
        commit, target = built(table.read_text())
        rebuild = f"make {target}" if target else "the make target that builds it (its header names none)"
        if commit is None:
            print(f"{name}: names no commit it was built at; rebuild it: {rebuild}")
            stale += 1
            continue
        changed = changed_code(commit, measured(table))
        if changed:
            stale += 1
            shown = ", ".join(changed[:8]) + (f" and {len(changed) - 8} more" if len(changed) > 8 else "")
            print(f"{name}: stale: built at {commit}; code changed since in {shown} (rebuild: {rebuild})")
        else:
            print(f"{name}: built at {commit}; the code it measures is unchanged")
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
