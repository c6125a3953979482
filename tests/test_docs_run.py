"""The guides' code runs: every Python excerpt of docs/extending.md is the example plugin's own
code (``tests/test_extending.py`` runs that plugin), and every command of docs/usage.md and
docs/extending.md is run here, as printed, with a small graph and one epoch appended."""

from __future__ import annotations

import ast
import os
import re
import shlex
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
SMALL = {"gnntrain": ["dataset.num_nodes=300", "train.epochs=1", "wandb.mode=disabled"],
         "gnntrain-predict": ["--proxy-nodes", "5000"]}
"""What each command gets appended: a small graph, one epoch; the predictor a small proxy (and,
for a graph given by its statistics, counted compute: profiling seven methods at products'
proportions takes about 8 minutes here, which the step fits' own tests and the guide's first
predictor command, profiled, cover)."""


def blocks(guide: str) -> list[str]:
    """The fenced code blocks of a guide, dedented."""
    text = (REPO / "docs" / guide).read_text()
    return [textwrap.dedent(block) for block in re.findall(r"^ *```[a-z]*\n(.*?)^ *```", text, re.S | re.M)]


def commands(guide: str) -> list[str]:
    """Every command line of a guide's blocks (continuations joined), not the output shown beside them."""
    found = []
    for block in blocks(guide):
        for line in block.replace("\\\n", " ").splitlines():
            try:
                words = shlex.split(line) if line.strip() else []
            except ValueError:  # output with an unpaired quote ("each method's steps"), not a command
                continue
            program = next((w for w in words if "=" not in w), "")
            if program in SMALL:
                found.append(line.strip())
    return found


def statements(code: str) -> dict[str, str]:
    """Each top-level statement of ``code`` by its name (a class's, a function's, or the call's
    text), as its syntax tree without docstrings: the same code however it is wrapped."""
    tree = ast.parse(textwrap.dedent(code))
    for node in ast.walk(tree):
        if hasattr(node, "body") and isinstance(node.body, list):
            node.body = [n for n in node.body if not (isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant)
                                                       and isinstance(n.value.value, str))] or [ast.Pass()]
    return {getattr(n, "name", None) or ast.unparse(n)[:40]: ast.dump(n) for n in tree.body}


def test_every_python_excerpt_of_the_extending_guide_is_the_example_plugins_code() -> None:
    plugin = statements((REPO / "docs" / "examples" / "int8_halo.py").read_text())
    excerpts = [b for b in blocks("extending.md") if not any(w in b for w in ("gnntrain ", "gnntrain-"))]
    assert len(excerpts) >= 3
    for excerpt in excerpts:
        for name, tree in statements(excerpt).items():
            assert plugin.get(name) == tree, f"docs/extending.md's {name} is not docs/examples/int8_halo.py's"


def _runnable(line: str, tmp_path: Path) -> tuple[dict, list[str]] | None:
    """The command as run here, its environment and arguments (None: it needs what this machine
    lacks): the example plugins' paths in this checkout, outputs under ``tmp_path``."""
    words = shlex.split(line.replace("docs/examples/", f"{REPO}/docs/examples/"))
    start = next(i for i, w in enumerate(words) if "=" not in w)
    env = {**os.environ, "WANDB_MODE": "disabled", **dict(w.split("=", 1) for w in words[:start])}
    program, args = words[start], words[start + 1:]
    if "network.mode=kernel" in args and (os.geteuid() != 0 or shutil.which("ip") is None):
        return None
    if "--plot" in args:
        args[args.index("--plot") + 1] = str(tmp_path / "plot.png")
    small = list(SMALL[program])
    if program == "gnntrain-predict" and "--nodes" in args:
        small += ["--compute", "counted"]
    if program == "gnntrain":
        small += [f"hydra.{'sweep' if '-m' in args else 'run'}.dir={tmp_path / 'run'}"]
        if any(a.startswith("dataset=") for a in args):
            small.remove("dataset.num_nodes=300")
    return env, [str(BIN / program), *args, *small]


@pytest.mark.slow
@pytest.mark.parametrize("guide, line", [(g, c) for g in ("usage.md", "extending.md") for c in commands(g)])
def test_every_command_of_the_guides_runs(guide: str, line: str, tmp_path: Path) -> None:
    runnable = _runnable(line, tmp_path)
    if runnable is None:
        pytest.skip("needs root and iproute2 (network namespaces)")
    env, argv = runnable
    done = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"{line}\n{done.stderr[-2000:]}"
