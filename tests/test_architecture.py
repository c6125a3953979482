"""The house: every package of ``gnntrain/`` sits on a floor and imports only from floors below its
own (imports under ``TYPE_CHECKING`` aside), so the package-level import graph has no cycle; the
root holds at most six modules; what ``--help`` reads imports no torch; no code edits ``sys.path``
to import."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "gnntrain"
REPO = PACKAGE.parent

FLOORS: tuple[tuple[str, ...], ...] = (
    ("errors",),
    ("config",),
    ("storage", "rng"),
    ("timing",),
    ("data",),
    ("models", "comm"),
    ("parallel",),
    ("cost",),
    ("strategies",),
    ("engine", "predict"),
    ("report",),
    ("job",),
    ("repro",),
    ("commands",),
)
"""Bottom first. ``config`` reads every other package's schema from below (they register theirs);
``timing`` (clocks, the link model, traces, replay, the accounting) sits below the communicator,
which posts to it, and below everything that reads a time; ``cost`` (memory arithmetic, kernel
counts and their prices) below the strategies, whose timing models read it, so that the
predictor and the launcher share it without importing each other."""
FLOOR = {package: level for level, packages in enumerate(FLOORS) for package in packages}
MAX_ROOT_MODULES = 6


def package_of(module: str) -> str | None:
    """The top package (or root module) of a ``gnntrain`` module, None for other modules."""
    parts = module.split(".")
    return parts[1] if parts[0] == "gnntrain" and len(parts) > 1 else None


def imported_modules(path: Path) -> set[str]:
    """Every module ``path`` imports at run time, at any depth of its code (``from a import b``
    counts a and a.b); imports under ``if TYPE_CHECKING:`` left out."""
    tree = ast.parse(path.read_text())
    typing_only = {id(node) for branch in ast.walk(tree)
                   if isinstance(branch, ast.If) and "TYPE_CHECKING" in ast.unparse(branch.test)
                   for node in ast.walk(branch)}
    names: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def own_package(path: Path) -> str:
    relative = path.relative_to(PACKAGE)
    return relative.parts[0] if len(relative.parts) > 1 else relative.stem


def package_imports() -> dict[str, dict[str, set[str]]]:
    """Per package, the packages it imports, each with the files that do."""
    graph: dict[str, dict[str, set[str]]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.parent == PACKAGE and path.stem in ("__init__", "__main__"):
            continue
        own = own_package(path)
        for name in imported_modules(path):
            other = package_of(name)
            if other not in (None, own) and ((PACKAGE / other).is_dir() or (PACKAGE / f"{other}.py").exists()):
                graph.setdefault(own, {}).setdefault(other, set()).add(str(path.relative_to(REPO)))
    return graph


def test_every_package_and_root_module_has_a_floor() -> None:
    present = {p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    present |= {p.stem for p in PACKAGE.glob("*.py") if p.stem not in ("__init__", "__main__")}
    assert sorted(present - set(FLOOR)) == [], "give every package a floor in FLOORS"
    assert sorted(set(FLOOR) - present) == [], "FLOORS names a package that no longer exists"


def test_no_package_imports_from_its_own_floor_or_above() -> None:
    upward = {f"{own} -> {other}": sorted(files) for own, imports in package_imports().items()
              for other, files in imports.items() if FLOOR[other] >= FLOOR[own]}
    assert upward == {}


def test_the_root_holds_at_most_six_modules() -> None:
    assert len(list(PACKAGE.glob("*.py"))) <= MAX_ROOT_MODULES


def test_the_predictor_and_the_timing_models_import_neither_the_job_nor_the_report() -> None:
    """The predictor and each strategy's timing model read the cost arithmetic below both."""
    files = [*sorted((PACKAGE / "predict").rglob("*.py")), *sorted(PACKAGE.glob("strategies/*/timing_model.py"))]
    offending = {str(path.relative_to(REPO)): sorted(name for name in imported_modules(path)
                                                     if package_of(name) in ("job", "report", "commands"))
                 for path in files}
    assert len(files) >= 6 and not {path: names for path, names in offending.items() if names}


def test_no_code_edits_the_import_path() -> None:
    """The reproduction is part of the package; the scripts and tests import it as any module."""
    edits = [str(path.relative_to(REPO)) for folder in ("gnntrain", "scripts", "tests", "hydra_plugins")
             for path in sorted((REPO / folder).rglob("*.py")) if "sys.path.insert" in path.read_text()
             and path != Path(__file__).resolve()]
    assert edits == []


def test_the_config_package_imports_nothing_above_it() -> None:
    """Of gnntrain, ``gnntrain.config`` imports only itself and the errors: the registries of
    models and strategies extend its schemas from above, and composition and validation run them."""
    def above(name: str) -> bool:
        own = any(name == base or name.startswith(base + ".") for base in ("gnntrain.config", "gnntrain.errors"))
        return (name.startswith("gnntrain") or name.startswith("hydra_plugins")) and not own

    offending = {str(path.relative_to(PACKAGE.parent)): sorted(filter(above, imported_modules(path)))
                 for path in sorted((PACKAGE / "config").rglob("*.py"))}
    assert not {path: names for path, names in offending.items() if names}


def _run_counting_torch(script: str) -> str:
    """``script``'s output in a fresh interpreter, then the first torch modules it loaded (``[]``)."""
    script += "print(sorted(m for m in sys.modules if m.split('.')[0] == 'torch')[:3])\n"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_help_and_the_declarations_import_no_torch() -> None:
    """``gnntrain --help`` (for any model and strategy), the registries and the config store read
    only the declarations, which name their implementations: torch, which takes longer to import
    than the help takes to print, stays unloaded (docs/extending.md)."""
    out = _run_counting_torch(
        "import contextlib, io, sys\n"
        "from gnntrain.job.help import print_help\n"
        "from gnntrain.job.composition import register_schemas, typed_run\n"
        "from gnntrain.strategies import METHODS\n"
        "from gnntrain.models import MODELS\n"
        "register_schemas()\n"
        "for argv in (['--help'], ['strategy=pipegcn', 'model=gat', '--help'], ['strategy=gnnpipe', '--help']):\n"
        "    with contextlib.redirect_stdout(io.StringIO()):\n"
        "        print_help(argv)\n"
        "print(len(METHODS), len(MODELS), end=' ')\n")
    methods, models, torch_modules = out.split(maxsplit=2)
    assert int(methods) >= 13 and int(models) >= 6
    assert torch_modules.strip() == "[]"


def test_a_commands_usage_error_comes_before_torch_is_imported() -> None:
    """``gnntrain-predict`` and ``gnntrain-replay`` parse (and range-check) their arguments before
    they import what does the work, so a usage error, or ``--help``, is printed at once."""
    out = _run_counting_torch(
        "import contextlib, io, sys\n"
        "from gnntrain.commands import predict, replay\n"
        "for main, argv in ((predict.main, ['--cores', 'x']), (predict.main, ['--cores', '0']), (replay.main, []),\n"
        "                   (predict.main, ['--help']), (replay.main, ['--help'])):\n"
        "    with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):\n"
        "        try:\n"
        "            main(argv)\n"
        "        except SystemExit as ended:\n"
        "            print(ended.code, end=' ', file=sys.__stdout__)\n")
    assert out.strip() == "2 2 2 0 0 []", out
