"""The packages that hold the mechanisms never reach up to the code that runs a job (the job path,
the CLI, the report and the reproduction), the config package, which every other reads, reaches up
to none, what ``--help`` reads imports no torch, and no code edits ``sys.path`` to import."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "gnntrain"
LOWER = ("engine", "strategies", "parallel", "models", "comm", "data")
UPPER = ("gnntrain.job", "gnntrain.cli", "gnntrain.report", "gnntrain.repro")
REPO = PACKAGE.parent


def imported_modules(path: Path) -> set[str]:
    """Every module ``path`` imports, at any depth of its code (``from a import b`` counts a and a.b)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def is_upper(name: str) -> bool:
    return any(name == upper or name.startswith(upper + ".") for upper in UPPER)


@pytest.mark.parametrize("package", LOWER)
def test_lower_packages_do_not_import_the_job_path_or_the_cli(package: str) -> None:
    offending = {str(path.relative_to(REPO)): sorted(filter(is_upper, imported_modules(path)))
                 for path in sorted((PACKAGE / package).rglob("*.py"))}
    assert not {path: names for path, names in offending.items() if names}


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


def test_help_and_the_declarations_import_no_torch() -> None:
    """``gnntrain --help`` (for any model and strategy), the registries and the config store read
    only the declarations, which name their implementations: torch, which takes longer to import
    than the help takes to print, stays unloaded (docs/extending.md)."""
    script = ("import contextlib, io, sys\n"
              "from gnntrain.job.help import print_help\n"
              "from gnntrain.job.composition import register_schemas, typed_run\n"
              "from gnntrain.strategies import METHODS\n"
              "from gnntrain.models import MODELS\n"
              "register_schemas()\n"
              "for argv in (['--help'], ['strategy=pipegcn', 'model=gat', '--help'], ['strategy=gnnpipe', '--help']):\n"
              "    with contextlib.redirect_stdout(io.StringIO()):\n"
              "        print_help(argv)\n"
              "print(len(METHODS), len(MODELS), sorted(m for m in sys.modules if m.split('.')[0] == 'torch')[:3])\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    methods, models, torch_modules = done.stdout.split(maxsplit=2)
    assert int(methods) >= 13 and int(models) >= 6
    assert torch_modules.strip() == "[]"
