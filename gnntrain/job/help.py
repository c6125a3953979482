"""``gnntrain --help``: the project's config groups and their options, every key of the config
the given overrides compose (its value and a one-line description), and examples.

The CLI answers ``--help`` itself (:func:`print_help`), before Hydra's app help, which lists
every config group of the config store by composing it once per group (10 s here): the command
line is parsed by Hydra's parser and the config composed once, with the overrides and
``--config-dir``, so they and user datasets count as they do for a run. Hydra's own help stays
at ``--hydra-help``. The descriptions are the schemas' attribute docstrings (the string under
each field), so the help and the code say the same thing.
"""

from __future__ import annotations

import ast
import inspect
import json
import textwrap
from dataclasses import is_dataclass
from functools import cache
from pathlib import Path
from typing import Any, Callable

from omegaconf import DictConfig, ListConfig, OmegaConf

GROUPS = ("dataset", "model", "strategy", "cluster", "network", "experiment")

EXAMPLES = (
    ("gnntrain", "the default job: 2-layer GCN, vanilla, 2 workers, a synthetic graph"),
    ("gnntrain dataset=cora model=sage cluster.world_size=4 train.epochs=200", ""),
    ("gnntrain strategy=gnnpipe model=gcnii", "2 pipeline stages of GCNII"),
    ("gnntrain strategy=hopgnn model=sage", "HopGNN: models migrate to the features"),
    ("gnntrain strategy=bns network=eth10g", "over a modelled 10 Gbit/s link (the virtual clock)"),
    ("gnntrain -m dataset=cora,citeseer cluster.world_size=2,4", "a sweep: one job per combination"),
    ("gnntrain --config-dir myconf dataset=mygraph", "a dataset declared in myconf/dataset/mygraph.yaml"),
    ("torchrun --nproc-per-node=2 --no-python gnntrain dataset=cora", "join torchrun's world"),
)


@cache
def field_docs(schema: type) -> dict[str, str]:
    """``{field: description}`` from the attribute docstrings of a dataclass and its bases."""
    docs: dict[str, str] = {}
    for klass in reversed(schema.__mro__):
        if not is_dataclass(klass):
            continue
        body = ast.parse(textwrap.dedent(inspect.getsource(klass))).body[0].body
        for node, after in zip(body, body[1:]):
            if (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
                    and isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant)
                    and isinstance(after.value.value, str)):
                docs[node.target.id] = " ".join(after.value.value.split())
    return docs


def key_rows(cfg: DictConfig, prefix: str = "", skip: tuple[str, ...] = ()) -> list[tuple[str, str, str]]:
    """``(key, value, description)`` for every leaf of ``cfg`` (a structured config)."""
    schema = OmegaConf.get_type(cfg)
    docs = field_docs(schema) if isinstance(schema, type) and is_dataclass(schema) else {}
    rows = []
    for key in cfg:
        if key in skip:
            continue
        value = cfg[key]
        if isinstance(value, DictConfig) and is_dataclass(OmegaConf.get_type(value)):
            rows += key_rows(value, f"{prefix}{key}.")
            continue
        if isinstance(value, (DictConfig, ListConfig)):
            value = OmegaConf.to_container(value, resolve=True)
        rows.append((f"{prefix}{key}", _show(value), docs.get(str(key), "")))
    return rows


def _show(value: Any) -> str:
    if hasattr(value, "value"):  # an enum member
        return str(value.value)
    return json.dumps(value) if isinstance(value, (list, dict, bool)) or value is None else str(value)


def wants_help(argv: list[str]) -> bool:
    """Whether the command line asks for gnntrain's help (``--help``/``-h``, not ``--hydra-help``)."""
    return "--help" in argv or "-h" in argv


def print_help(argv: list[str]) -> None:
    """Print the help for the config the command line ``argv`` (without the program) composes."""
    from hydra._internal.hydra import Hydra
    from hydra._internal.utils import create_config_search_path, get_args_parser
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.object_type import ObjectType
    from hydra.core.config_search_path import SearchPathQuery
    from hydra.errors import SearchPathException
    from hydra.types import RunMode

    args = get_args_parser().parse_args(argv)
    search_path = create_config_search_path("pkg://gnntrain.conf")
    if args.config_dir:  # as Hydra adds it for a run
        config_dir = Path(args.config_dir).resolve()
        if not config_dir.is_dir():
            raise SearchPathException(f"Additional config directory '{config_dir}' not found")
        search_path.prepend("command-line", f"file://{config_dir}", anchor=SearchPathQuery(provider="schema"))
    GlobalHydra.instance().clear()
    hydra = Hydra.create_main_hydra2(task_name="gnntrain", config_search_path=search_path)
    root = hydra.compose_config(args.config_name or "config", list(args.overrides), run_mode=RunMode.RUN)
    repository = hydra.config_loader.repository  # type: ignore[attr-defined]
    print(help_text(root, lambda group: repository.get_group_options(group, ObjectType.CONFIG)))


def help_text(root: DictConfig, group_options: Callable[[str], list[str]]) -> str:
    """The help for the composed config ``root`` (with its ``hydra`` node), the options of each
    group from ``group_options``."""
    choices = root.hydra.runtime.choices
    lines = ["gnntrain: distributed full-graph GNN training experiments (graph-parallel, PipeGCN, BNS-GCN,",
             "AdaQP, GNNPipe, HopGNN and its baselines) on real torch.distributed workers.", "",
             "usage: gnntrain [GROUP=OPTION ...] [KEY=VALUE ...]      one run",
             "       gnntrain -m [GROUP=A,B ...] [KEY=V1,V2 ...]      a sweep, one job per combination",
             "       gnntrain [GROUP=OPTION ...] --help               this text, for the config they compose",
             "", "config groups (one option each; now chosen in brackets):"]
    for group in GROUPS:
        options = sorted(group_options(group))
        lines.append(f"  {group}: {', '.join(options)}  [{choices.get(group) or 'none'}]")
    rows = key_rows(root, skip=("hydra",))
    width = max(len(key) for key, _, _ in rows)
    value_width = min(24, max(len(value) for _, value, _ in rows))
    lines += ["", "keys (KEY VALUE description; set any as KEY=VALUE):"]
    for key, value, doc in rows:
        lines.append(f"  {key:<{width}}  {value:<{value_width}}  {doc}")
    lines += ["", "examples:"]
    lines += [f"  {cmd}" + (f"    # {what}" if what else "") for cmd, what in EXAMPLES]
    lines += ["", "Results go to hydra.run.dir (outputs/<date>/<time>); `gnntrain-report DIR` tabulates runs.",
              "Hydra's own options (--cfg job, --multirun, hydra.run.dir=...): gnntrain --hydra-help"]
    return "\n".join(lines)
