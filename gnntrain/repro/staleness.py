"""Which committed tables are older than the code they measure (``make check-tables``): every
``results/<name>/table.md`` (the papers' ``make repro-<paper>`` and ``make compare``) and
``results/model_zoo.md`` (``make zoo``).

Every table's header says which make target built it and at which commit ("Built by `make
<target>` ... at commit <sha>"). A table is *stale* when, between that commit and ``HEAD``, the
code of a file it measures changed. What it measures is listed beside it (``<table>.code.json``,
:func:`write_manifest`), each list read from what ran:

- ``files``: the package files its runs executed (their ``summary.json`` ``code``:
  :mod:`gnntrain.engine.provenance`);
- ``conf``: the config files Hydra composed for its runs (``conf/config.yaml`` and the file of
  each group option chosen, from each run's ``.hydra/hydra.yaml``);
- ``build``: the reproduction's modules the build imported to run and tabulate them
  (:mod:`gnntrain.repro`, this checker aside: it only writes the list; a table built before
  the reproduction moved into the package lists its ``scripts`` instead).

Every table also measures what built it around its runs: the rule of the ``Makefile`` target
its header names (its recipe and the variables the recipe reads, :func:`make_rule`; another
target's edit leaves it fresh) and the sweeper plugin every ``gnntrain -m`` composes its jobs
with (``hydra_plugins``). And it is checked against what ``docs/reproducing.md`` says of it: the
paragraph "What `results/<name>/` shows" may quote only figures the table gives
(:func:`unquoted`; a sentence about an earlier build, which names it so, is left out), and the
page's scoreboard must be what the committed runs say (:mod:`gnntrain.repro.scoreboard`).

A table rendered again from its committed runs (``python -m gnntrain.repro <paper> --tables-only``,
after a change to how tables are drawn) keeps its build's header and adds "Tables rendered again
from these runs at commit <sha>": its runs' parts (``files``, ``conf`` and what is around them)
are then checked against the build's commit, its ``build`` list against the rendering's.

A table without the list, or a list without an entry (runs recorded before it), measures the
whole of that part: the package (``gnntrain/``), the configs (``conf/``), every table script
(:data:`BUILD`). Python files are compared
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
from typing import TYPE_CHECKING

import yaml

from gnntrain.repro import CHECKOUT
from gnntrain.storage.files import write_atomically

if TYPE_CHECKING:
    from gnntrain.report.runs import Run

BUILD = ("gnntrain/repro",)
"""What a table whose list names no build modules measures of the reproduction: all of it."""
AROUND = ("Makefile", "hydra_plugins")
"""What every table measures besides its lists: its make target's rule (:func:`make_rule`) and
the sweeper plugin."""
DOCS = "docs/reproducing.md"
SHOWS = re.compile(r"What `results/([\w-]+)/(?:table\.md)?` shows(.*?)(?:\n\n|\Z)", re.S)
"""A paragraph of :data:`DOCS` about one table."""
FIGURE = re.compile(r"(?<![\w.])\d+\.\d+(?![\d.]*\d)")
"""A figure a paragraph quotes: a decimal number."""
EARLIER = ("earlier build", "build before", "before this one")
"""What a sentence about another build than the table's says (its figures are not the table's)."""
TABLES = ("results/*/table.md", "results/model_zoo.md")
BUILT_AT = re.compile(r"at commit ([0-9a-f]{7,40}(?:\+changes)?)")
UNCOMMITTED = "+changes"
"""What a header's commit ends with where the build ran code not committed (:func:`gnntrain.repro.jobs.git_commit`)."""
BUILT_BY = re.compile(r"Built by `make ([\w-]+)`")
RENDERED_AT = re.compile(r"Tables rendered again from these runs at commit ([0-9a-f]{7,40}(?:\+changes)?)")
"""What a header adds where its tables were drawn again from the build's runs, at a later commit."""


def tables(repo: Path = CHECKOUT) -> list[Path]:
    """Every committed table, in path order."""
    return sorted(path for pattern in TABLES for path in repo.glob(pattern))


def manifest(table: Path) -> Path:
    """The list of package files a table's runs executed (``<table>.code.json``, beside it)."""
    return table.with_name(table.stem + ".code.json")


def composed_configs(run_dir: Path, repo: Path = CHECKOUT) -> list[str] | None:
    """The config files Hydra composed for the run in ``run_dir``: ``conf/config.yaml`` and the
    file of each config group option it chose (``hydra.runtime.choices``; options the package
    registers in code have no file, Hydra's own groups are not ours); None where the run saved
    no Hydra config."""
    saved = run_dir / ".hydra" / "hydra.yaml"
    if not saved.is_file():
        return None
    choices = yaml.safe_load(saved.read_text())["hydra"]["runtime"]["choices"]
    files = [f"conf/{group}/{option}.yaml" for group, option in choices.items()
             if option is not None and not group.startswith("hydra/")]
    return ["conf/config.yaml", *(f for f in files if (repo / f).is_file())]


def imported_build(repo: Path = CHECKOUT, others: frozenset[str] = frozenset()) -> list[str]:
    """The files of :mod:`gnntrain.repro` this process has imported, the checker and the
    ``others`` (modules, e.g. the other papers' declarations) aside."""
    build, own = repo / "gnntrain" / "repro", Path(__file__).resolve()
    files = {Path(module.__file__).resolve() for name, module in list(sys.modules.items())
             if getattr(module, "__file__", None) and name not in others}
    return sorted(str(f.relative_to(repo)) for f in files if f.is_relative_to(build) and f != own)


def write_manifest(table: Path, runs: list[Run], others: frozenset[str] = frozenset()) -> None:
    """Beside ``table``, what its build measures: the package files its runs executed (the union
    of their summaries' ``code``), the config files they composed (:func:`composed_configs`) and
    the reproduction's modules this build imported (:func:`imported_build`), but ``others``: the
    modules that declare other papers, which the registry imports and this table never runs (so
    that rebuilding one paper's table leaves the others fresh). A list is left out where a run
    does not record its part, so that the check measures the whole of it."""
    code = [run.summary.code for run in runs]
    conf = [composed_configs(run.path) for run in runs]
    lists = {"build": imported_build(others=others)}
    if runs and None not in code:
        lists["files"] = sorted({f for files in code for f in files})
    if runs and None not in conf:
        lists["conf"] = sorted({f for files in conf for f in files})
    write_atomically(manifest(table), json.dumps(lists, indent=0) + "\n")


def measured(table: Path) -> tuple[str, ...]:
    """The paths whose code a table measures: the lists beside it (:func:`write_manifest`), the
    whole of a part it does not list."""
    runs, build = measured_parts(table)
    return (*build, *runs)


def measured_parts(table: Path) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """What a table's runs executed and composed (``files``, ``conf``), and the reproduction's
    modules its tables were drawn with (``build``): :func:`measured` in its two parts."""
    path = manifest(table)
    lists = json.loads(path.read_text()) if path.exists() else {}
    build = lists.get("build", lists.get("scripts", BUILD))
    return (*lists.get("conf", ("conf",)), *lists.get("files", ("gnntrain",))), tuple(build)


def make_rule(makefile: str, target: str) -> str:
    """The rule of ``makefile`` that builds ``target`` (its target line, by name or by a ``%``
    pattern, and its recipe) and the definitions of the variables the recipe reads."""
    lines, rule = makefile.splitlines(), []
    for i, line in enumerate(lines):
        targets = line.split(":", 1)[0].split() if ":" in line and not line.startswith(("\t", "#")) else []
        patterns = [t for t in line.split(":")[1].split() if "%" in t] if len(line.split(":")) > 2 else []
        named = target in targets or any(re.fullmatch(p.replace("%", ".+"), target) for p in patterns)
        if named and "=" not in line.split(":", 1)[0]:
            rule = [line, *(recipe for recipe in _recipe(lines[i + 1:]))]
            break
    read = set(re.findall(r"\$\((\w+)\)", "\n".join(rule)))
    defined = [line for line in lines if re.match(rf"({'|'.join(sorted(read))})\s*[?:]?=", line)] if read else []
    return "\n".join(rule + defined)


def _recipe(lines: list[str]) -> list[str]:
    recipe = []
    for line in lines:
        if not line.startswith("\t"):
            break
        recipe.append(line)
    return recipe


def unquoted(name: str, table_text: str, docs: str) -> list[str]:
    """The figures :data:`DOCS` quotes of ``results/<name>/`` that its table does not give, in
    the order quoted (sentences about an earlier build left out)."""
    missing = []
    for match in SHOWS.finditer(docs):
        if match.group(1) != name:
            continue
        for sentence in re.split(r"(?<=[.;:])\s+(?=[A-Z(])", match.group(2)):
            if any(earlier in sentence for earlier in EARLIER):
                continue
            missing += [f for f in FIGURE.findall(sentence) if f not in table_text and f not in missing]
    return missing


def built(text: str) -> tuple[str | None, str | None]:
    """The commit a table was built at and the make target that built it, read from its header
    (the text before its first table row); None for what the header does not say."""
    header = text.split("\n|", 1)[0]
    commit, target = BUILT_AT.search(header), BUILT_BY.search(header)
    return (commit.group(1) if commit else None), (target.group(1) if target else None)


def rendered_again(text: str) -> str | None:
    """The commit a table's tables were drawn again at from its build's runs (its header's
    :data:`RENDERED_AT`); None where they are the build's own."""
    found = RENDERED_AT.search(text.split("\n|", 1)[0])
    return found.group(1) if found else None


def git(*args: str, repo: Path = CHECKOUT) -> str:
    return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=True).stdout


def _show(commit: str, path: str, repo: Path) -> str | None:
    """``path``'s text at ``commit``; None where it did not exist."""
    done = subprocess.run(["git", "show", f"{commit}:{path}"], cwd=repo, capture_output=True, text=True)
    return done.stdout if done.returncode == 0 else None


def _bare_string(statement: ast.stmt) -> bool:
    return (isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant)
            and isinstance(statement.value.value, str))


def normalised(path: str, text: str | None, target: str | None = None) -> object:
    """What of a file's text can change a figure: a Python file's syntax tree without docstrings
    (a module's, class's or function's, and the string below a constant or attribute: every
    statement that is a bare string, which executes nothing), a YAML file's values, the
    ``Makefile``'s rule for ``target`` (:func:`make_rule`; all of it without a target), any other
    file's text."""
    if text is None:
        return None
    if path == "Makefile" and target is not None:
        return make_rule(text, target)
    if path.endswith(".py"):
        tree = ast.parse(text)
        for node in ast.walk(tree):
            body = getattr(node, "body", None)
            if isinstance(body, list):
                node.body = [statement for statement in body if not _bare_string(statement)] or [ast.Pass()]
        return ast.dump(tree)
    if path.endswith((".yaml", ".yml")):
        return yaml.safe_load(text)
    return text


def changed_code(commit: str, paths: tuple[str, ...], repo: Path = CHECKOUT, target: str | None = None) -> list[str]:
    """The files under ``paths`` whose code differs between ``commit`` and HEAD (the
    ``Makefile``: the rule of make ``target``)."""
    names = git("diff", "--name-only", commit, "HEAD", "--", *paths, repo=repo).split()
    return [name for name in names if normalised(name, _show(commit, name, repo), target)
            != normalised(name, _show("HEAD", name, repo), target)]


def _drawn(commit: str, drawn: str) -> str:
    return "" if drawn == commit else f", its tables drawn again at {drawn}"


def main() -> int:
    stale = 0
    for table in tables():
        name = table.relative_to(CHECKOUT)
        commit, target = built(table.read_text())
        rebuild = f"make {target}" if target else "the make target that builds it (its header names none)"
        if commit is None:
            print(f"{name}: names no commit it was built at; rebuild it: {rebuild}")
            stale += 1
            continue
        drawn = rendered_again(table.read_text()) or commit
        if commit.endswith(UNCOMMITTED) or drawn.endswith(UNCOMMITTED):
            print(f"{name}: built at {commit}, drawn at {drawn}: from code never committed, which no check can "
                  f"read; rebuild it: {rebuild}")
            stale += 1
            continue
        runs, build = measured_parts(table)
        changed = [*changed_code(commit, (*runs, *AROUND), target=target), *changed_code(drawn, build)]
        misquoted = unquoted(table.parent.name, table.read_text(), (CHECKOUT / DOCS).read_text())
        if changed:
            shown = ", ".join(changed[:8]) + (f" and {len(changed) - 8} more" if len(changed) > 8 else "")
            print(f"{name}: stale: built at {commit}{_drawn(commit, drawn)}; code changed since in {shown} "
                  f"(rebuild: {rebuild})")
        else:
            print(f"{name}: built at {commit}{_drawn(commit, drawn)}; the code it measures is unchanged")
        if misquoted:
            print(f"{name}: {DOCS} quotes {', '.join(misquoted)} of it, which the table does not give")
        stale += bool(changed or misquoted)
    from gnntrain.repro import scoreboard  # imported here: it imports the build, which imports this checker

    if scoreboard.differs():
        print(f"{DOCS}: the scoreboard differs from the committed runs; write it: python -m gnntrain.repro.scoreboard")
        stale += 1
    else:
        print(f"{DOCS}: the scoreboard matches the committed runs")
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
