"""After composition a run's config is one typed object (:class:`~gnntrain.config.schema.RootConfig`):
no module of the package reads a config section by string key, outside the composition boundary."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "gnntrain"

CONFIG_NAMES = {"cfg", "config", "conf", "plain", "run", "section", "net", "network", "cluster", "dataset", "model",
                "strategy", "train", "partition", "wandb", "fault", "options"}
"""Names a config or one of its sections goes by in the package."""

COMPOSITION_BOUNDARY = {("train.py", "_run_job"), ("train.py", "name_sweep_job")}
"""Where the CLI completes the plain config Hydra composed (its run dir, a sweep job's W&B names)
before it is typed."""


def _root_name(node: ast.expr) -> str | None:
    """The variable a chain of string subscripts starts from (``cfg`` of ``cfg["a"]["b"]``)."""
    while isinstance(node, ast.Subscript):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def string_keyed_config_reads(path: Path) -> list[str]:
    """``line: expression`` of every read of a config-named variable by a string key in ``path``,
    with the function it is in."""
    found = []

    def visit(node: ast.AST, function: str) -> None:
        for child in ast.iter_child_nodes(node):
            inner = child.name if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) else function
            if (isinstance(child, ast.Subscript) and isinstance(child.ctx, ast.Load)
                    and isinstance(child.slice, ast.Constant) and isinstance(child.slice.value, str)
                    and _root_name(child) in CONFIG_NAMES):
                found.append((function, f"{child.lineno}: {ast.unparse(child)}"))
            visit(child, inner)

    visit(ast.parse(path.read_text()), "")
    return [f"{function or '<module>'} {read}" for function, read in found
            if (path.name, function) not in COMPOSITION_BOUNDARY]


def test_no_module_reads_a_config_section_by_string_key() -> None:
    reads = {str(path.relative_to(PACKAGE.parent)): string_keyed_config_reads(path)
             for path in sorted(PACKAGE.rglob("*.py"))}
    assert not {path: found for path, found in reads.items() if found}


def test_the_scan_finds_a_string_keyed_read(tmp_path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text('def f(cfg):\n    return cfg["train"]["epochs"]\n')
    assert string_keyed_config_reads(probe) == ['f 2: cfg[\'train\'][\'epochs\']', "f 2: cfg['train']"]
