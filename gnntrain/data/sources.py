"""Where a graph comes from (``dataset.source``), declared once per source like methods and models:
:class:`Source` names its loader, the config dataclass its datasets are typed by (its keys) and
the checks those keys need. :func:`register_source` makes a source known to composition (its config
is ``schema/dataset/<name>``, and a source whose config gives every key a default, a generator,
is also the ``dataset=<name>`` option), validation and the loading of a job's data; a plugin
registers its own the same way (``GNNTRAIN_PLUGINS``, docs/extending.md).

The built-in sources' loaders live in :mod:`gnntrain.data.registry` and are named here by where
they live, so that this module, which composition and ``--help`` read, imports no torch:

* ``pyg``: ``torch_geometric.datasets.<pyg_class>(root, **args)``;
* ``ogb``: OGB's ``PygNodePropPredDataset(ogb_name)``;
* ``file``: a ``.npz`` or ``.pt`` of arrays;
* ``synthetic``: the planted-community generator.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional

from omegaconf import MISSING

from gnntrain.config.schema import DatasetConfig, SyntheticConfig, check, check_finite, check_seed, registered
from gnntrain.errors import ConfigError
from gnntrain.config.references import Reference, reference_name, resolve

LOADERS = "gnntrain.data.registry"
FILE_SUFFIXES = (".npz", ".pt")


@dataclass(frozen=True)
class Source:
    """A ``dataset.source``."""

    name: str
    config: type
    """The config dataclass of its datasets (a :class:`~gnntrain.config.schema.DatasetConfig`,
    extended with the source's own keys), each key with a one-line attribute docstring."""
    load: Reference
    """``(typed dataset section, cache folder) -> GraphData``, or where it lives (``"module:function"``)."""
    validate: Optional[Callable[[Any], None]] = None
    """The checks of the source's keys the types cannot express, given the typed section (one-line
    ConfigErrors, :func:`~gnntrain.config.schema.check`)."""

    def check(self, dataset: DatasetConfig) -> None:
        if self.validate is not None:
            self.validate(dataset)

    def loader(self) -> Callable[[Any, Path], Any]:
        return resolve(self.load)

    @property
    def is_a_dataset(self) -> bool:
        """Whether its config gives every key a default: a graph of its own (a generator), the
        ``dataset=<name>`` option."""
        return all(f.default not in (dataclasses.MISSING, MISSING) or f.default_factory is not dataclasses.MISSING
                   for f in dataclasses.fields(self.config))


SOURCES: dict[str, Source] = {}
"""Every registered source, by name, in registration order."""


def register_source(source: Source) -> Source:
    """Make ``source`` known to composition, validation and the loading of a job's data."""
    if not (isinstance(source.config, type) and issubclass(source.config, DatasetConfig)):
        raise TypeError(f"dataset source {source.name!r}: its config must extend DatasetConfig")
    known = SOURCES.get(source.name)
    if known is not None and reference_name(known.load) != reference_name(source.load):
        raise ValueError(f"dataset source {source.name!r} is registered twice ({reference_name(known.load)} and "
                         f"{reference_name(source.load)})")
    SOURCES[source.name] = source
    return source


def dataset_source(name: str) -> Source:
    """The registered source ``name``; ConfigError naming the valid ones otherwise."""
    return registered(SOURCES, "dataset.source", name)


def dataset_file(dataset: DatasetConfig) -> Path:
    """``dataset.file``, absolute or under ``dataset.root``."""
    path = Path(dataset.file).expanduser()
    return path if path.is_absolute() else Path(dataset.root).expanduser() / path


def validate_pyg(dataset: DatasetConfig) -> None:
    """``dataset.pyg_class`` is a class of ``torch_geometric.datasets``."""
    import torch_geometric.datasets as pyg_datasets

    if dataset.pyg_class not in pyg_datasets.__all__:
        raise ConfigError(f"dataset.pyg_class={dataset.pyg_class} is not a class of torch_geometric.datasets; "
                          f"valid: {', '.join(sorted(pyg_datasets.__all__))}")


def validate_ogb(dataset: DatasetConfig) -> None:
    """``dataset.ogb_name`` is given."""
    if not dataset.ogb_name:
        raise ConfigError(f"dataset.ogb_name={dataset.ogb_name} is invalid for dataset.source=ogb; it must be an OGB "
                          "node-property dataset name, e.g. ogbn-arxiv, ogbn-products, ogbn-papers100M")


def validate_file(dataset: DatasetConfig) -> None:
    """``dataset.file`` names a file of a kind :func:`gnntrain.data.registry.load_file` reads."""
    if not dataset.file or Path(dataset.file).suffix not in FILE_SUFFIXES:
        raise ConfigError(f"dataset.file={dataset.file} is invalid for dataset.source=file; it must be a path "
                          f"ending in {' or '.join(FILE_SUFFIXES)}")


def validate_synthetic(dataset: SyntheticConfig) -> None:
    """The generator's keys (:class:`~gnntrain.config.schema.SyntheticConfig`) in their ranges."""
    nodes, classes = dataset.num_nodes, dataset.num_classes
    check("dataset.num_classes", classes, classes >= 2, ">= 2")
    check("dataset.num_nodes", nodes, nodes >= classes, f">= dataset.num_classes={classes}")
    check("dataset.avg_degree", dataset.avg_degree, 0 < dataset.avg_degree <= nodes - 1,
          f"in (0, dataset.num_nodes - 1 = {nodes - 1}]")
    check("dataset.num_features", dataset.num_features, dataset.num_features >= 1, ">= 1")
    check("dataset.homophily", dataset.homophily, 0 <= dataset.homophily <= 1, "in [0, 1]")
    check_finite("dataset.feature_noise", dataset.feature_noise, dataset.feature_noise >= 0, ">= 0")
    check_finite("dataset.degree_exponent", dataset.degree_exponent, dataset.degree_exponent > 1,
                 "> 1 (a Pareto tail exponent: real graphs' degrees have 2-3)")
    check_seed("dataset.graph_seed", dataset.graph_seed)
    check("dataset.train_frac", dataset.train_frac, 0 < dataset.train_frac < 1, "in (0, 1)")
    room = 1 - dataset.train_frac
    check("dataset.val_frac", dataset.val_frac, 0 <= dataset.val_frac <= room,
          f"in [0, 1 - dataset.train_frac = {room:g}]")


register_source(Source("pyg", DatasetConfig, "gnntrain.data.registry:load_pyg", validate_pyg))
register_source(Source("ogb", DatasetConfig, "gnntrain.data.registry:load_ogb", validate_ogb))
register_source(Source("file", DatasetConfig, "gnntrain.data.registry:load_file", validate_file))
register_source(Source("synthetic", SyntheticConfig, "gnntrain.data.registry:load_synthetic", validate_synthetic))
