"""``gnntrain --help``: the project's config groups and their options, every key of the config
the given overrides compose (its value and a one-line description), and examples.

It is Hydra's ``--help`` with our text: ``conf/config.yaml`` sets ``hydra.help.template`` to
the ``gnntrain_help`` resolver, so the overrides, ``--config-dir`` and user datasets count as
they do for a run. Hydra's own help stays at ``--hydra-help``. The descriptions are the
schemas' attribute docstrings (the string under each field), so the help and the code say the
same thing.
"""

from __future__ import annotations

import ast
import inspect
import json
import textwrap
from dataclasses import is_dataclass
from functools import cache
from typing import Any

from omegaconf import DictConfig, ListConfig, OmegaConf

GROUPS = ("dataset", "model", "strategy", "cluster", "network", "experiment")

EXAMPLES = (
    ("gnntrain", "the default job: 2-layer GCN, vanilla, 2 workers, a synthetic graph"),
    ("gnntrain dataset=cora model=sage cluster.world_size=4 train.epochs=200", ""),
    ("gnntrain strategy=gnnpipe model=gcnii", "2 pipeline stages of GCNII"),
    ("gnntrain strategy=hopgnn model=sage", "HopGNN: models migrate to the features"),
    ("gnntrain strategy=bns network=eth10g", "over an emulated 10 Gbit/s link"),
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


def help_text(root: DictConfig) -> str:
    """The help for the composed config ``root`` (Hydra's, with its ``hydra`` node)."""
    from hydra.core.global_hydra import GlobalHydra

    loader = GlobalHydra.instance().config_loader()
    choices = root.hydra.runtime.choices
    lines = ["gnntrain: distributed full-graph GNN training experiments (graph-parallel, PipeGCN, BNS-GCN,",
             "AdaQP, GNNPipe, HopGNN and its baselines) on real torch.distributed workers.", "",
             "usage: gnntrain [GROUP=OPTION ...] [KEY=VALUE ...]      one run",
             "       gnntrain -m [GROUP=A,B ...] [KEY=V1,V2 ...]      a sweep, one job per combination",
             "       gnntrain [GROUP=OPTION ...] --help               this text, for the config they compose",
             "", "config groups (one option each; now chosen in brackets):"]
    for group in GROUPS:
        options = sorted(loader.get_group_options(group))
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
    return "\n".join(lines).replace("$", "$$")  # Hydra passes the text through string.Template
