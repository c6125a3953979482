"""The strategy registry: every method declares itself once, in its own module, and everything
that needs to know the strategies reads them here.

A module declares a method with :func:`register`: its name (``strategy=<name>``), its family,
the class that implements it (or where it lives, ``"module:Class"``, imported when a job builds
it: the built-in methods' declarations, in their family's ``config`` module, import no torch, so
``--help`` and the config store do not pay for it), its config dataclass with its defaults and
the traffic kinds it sends with their categories. From that one declaration

* the config store offers ``strategy=<name>``, built from the dataclass (no YAML repeats a
  default; the dataclass's attribute docstrings are ``--help``'s and the docs' descriptions),
  and ``schema/strategy/<name>`` for experiment presets;
* the meter knows its kinds (:func:`gnntrain.timing.kinds.declare`);
* validation runs its family's checks and its own;
* the launcher builds its strategy (:attr:`Method.strategy`) and asks it for its layout and
  whether its ranks load only their parts; calibration probes its family's baseline;
* the memory estimate adds what it keeps beyond its family's baseline (:attr:`Method.memory`);
* the predictor writes its epochs (:attr:`Method.timing_model`);
* ``python -m gnntrain.commands.docs`` writes its page and the tests that run every strategy include it.

A family (:class:`Family`) names its baseline and, where one class runs all its methods (the
graph-parallel family's :class:`~gnntrain.strategies.graph_parallel.strategy.GraphParallel`,
which takes each method's halo policy), that class.

Methods and models outside the package: the Python files or modules named in
``GNNTRAIN_PLUGINS`` (separated by ``os.pathsep``) are imported with the built-in strategies, in
every process of a job (spawned and torchrun workers inherit the variable), so
``GNNTRAIN_PLUGINS=my_method.py gnntrain strategy=mine`` runs a method written in one file (a
model registers with :func:`gnntrain.models.registry.register_model` the same way).
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

from gnntrain.timing import kinds as traffic_kinds
from gnntrain.config.schema import StrategyConfig, registered
from gnntrain.errors import ConfigError, first_line
from gnntrain.config.references import Reference, reference_name, resolve

PLUGINS_VARIABLE = "GNNTRAIN_PLUGINS"


@dataclass(frozen=True)
class Family:
    name: str
    """The family's name, e.g. ``graph_parallel``."""
    baseline: str
    """The strategy network calibration probes for the family's methods."""
    module: str
    """The module whose docstring describes the family."""
    runs: Optional[Reference] = None
    """The strategy class that runs every method of the family, given the method's
    implementation (the class, or ``"module:Class"``, imported when a job needs it); None: each
    method's implementation is its strategy class."""
    validate: Optional[Callable[[Any], None]] = None
    """Checks of the (typed) strategy section every method of the family shares."""
    fits_graph: Optional[Callable[[Any, Any], None]] = None
    """Checks of the (typed) strategy section against the loaded graph's
    :class:`~gnntrain.data.graph_data.GraphFacts` (e.g. a batch no larger than the training
    set), made by the launcher before the ranks start; None: none."""


@dataclass(frozen=True)
class Method:
    name: str
    """``strategy=<name>``."""
    family: Family
    implementation: Reference
    """The method's class: its strategy (:class:`~gnntrain.strategies.base.Strategy`), or what
    its family's ``runs`` class takes (a graph-parallel halo policy). The class itself, or
    ``"module:Class"``: the built-in methods name theirs, so that their declarations import no
    torch and ``--help`` stays fast; the class is imported when a job builds it."""
    config: type = StrategyConfig
    """Its config dataclass, with its defaults (extends :class:`~gnntrain.config.schema.StrategyConfig`)."""
    kinds: dict[str, str] = field(default_factory=dict)
    """Traffic kinds it sends beyond the shared mechanisms' (:data:`gnntrain.timing.kinds.KIND_CATEGORIES`),
    each with its category: ``data``, ``sync`` or ``control``."""
    validate: Optional[Callable[[Any], None]] = None
    """Checks of its own keys that their types cannot express, given its typed section (an
    instance of ``config``)."""
    memory: Optional[Callable[[Any, Any], float]] = None
    """Bytes a rank keeps while training beyond what its family's baseline keeps, given its typed
    section and the rank's :class:`~gnntrain.cost.rank_shape.RankShape`, for the estimate made
    before training; None: nothing beyond."""
    runs: Optional[Reference] = None
    """The strategy class that runs this method where it is not its family's ``runs`` (a
    graph-parallel method whose ranks hold another graph than their part: ``granndis``'s
    servers hold their dependencies); the class or ``"module:Class"``."""
    timing_model: Optional[Reference] = None
    """How one epoch of the method runs, for the predictor (:mod:`gnntrain.predict`): a function
    (or ``"module:function"``) ``timing_model(config, shape, costs, line, epoch, state)`` that writes
    epoch ``epoch`` of every rank onto ``line`` (:class:`~gnntrain.timing.builder.TraceBuilder`):
    its compute, from ``costs`` (:class:`~gnntrain.cost.compute.Costs`), and the operations it
    posts and waits for, with their bytes, from the partition's ``shape``
    (:class:`~gnntrain.cost.shape.PartitionShape`); ``state`` lasts from one epoch to the next.
    Its traffic is what it posts. None: the predictor cannot predict the method."""

    @property
    def implementation_class(self) -> type:
        """The method's class, imported if named."""
        return resolve(self.implementation)

    @property
    def strategy(self) -> type:
        """The class the launcher builds on every rank."""
        runs = self.runs if self.runs is not None else self.family.runs
        return resolve(runs) if runs is not None else self.implementation_class

    def check(self, config: StrategyConfig) -> None:
        """The family's and the method's checks of its typed strategy section."""
        for validate in (self.family.validate, self.validate):
            if validate is not None:
                validate(config)

    def check_graph(self, config: StrategyConfig, facts: Any) -> None:
        """The family's checks of its strategy section against the graph's facts."""
        if self.family.fits_graph is not None:
            self.family.fits_graph(config, facts)


METHODS: dict[str, Method] = {}
"""Every registered method, by name, in registration order."""


def register(method: Method) -> Method:
    """Make ``method`` known to the config store, the meter, validation and the launcher."""
    if not issubclass(method.config, StrategyConfig):
        raise TypeError(f"strategy {method.name!r}: its config {method.config.__name__} must extend StrategyConfig")
    known = METHODS.get(method.name)
    if known is not None and reference_name(known.implementation) != reference_name(method.implementation):
        raise ValueError(f"strategy {method.name!r} is registered twice ({reference_name(known.implementation)} and "
                         f"{reference_name(method.implementation)})")
    traffic_kinds.declare(method.kinds)
    METHODS[method.name] = method
    return method


def method(name: str) -> Method:
    """The registered method ``name``; ConfigError naming the valid ones otherwise."""
    return registered(METHODS, "strategy.name", name)


def load_plugins() -> None:
    """Import the files and modules ``GNNTRAIN_PLUGINS`` names (each once per process). This runs
    their code, with the user's rights, in every process of the job and on ``--help``: a file is
    taken from the path as given (relative to the working directory unless absolute), a module
    from ``sys.path``. A missing plugin, or one that raises while it is imported, is one line
    naming it and where it raised."""
    for entry in filter(None, os.environ.get(PLUGINS_VARIABLE, "").split(os.pathsep)):
        path = Path(entry)
        if path.suffix != ".py":
            _imported(entry, lambda: importlib.import_module(entry))
            continue
        name = f"gnntrain_plugin_{path.stem}"
        if name in sys.modules:
            continue
        if not path.is_file():
            raise ConfigError(f"{PLUGINS_VARIABLE} names {entry}, which is not a file; valid: Python files or "
                              f"module names separated by '{os.pathsep}'")
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
        sys.modules[name] = module
        try:
            _imported(entry, lambda: spec.loader.exec_module(module))  # type: ignore[union-attr]
        except ConfigError:
            del sys.modules[name]
            raise


def _imported(entry: str, run: Callable[[], Any]) -> None:
    """Run the import of plugin ``entry``; what it raises as one line with its last frame."""
    try:
        run()
    except ModuleNotFoundError as exc:
        if exc.name and entry.startswith(exc.name):
            raise ConfigError(f"{PLUGINS_VARIABLE} names {entry}, which is no module on sys.path; valid: Python files "
                              f"or module names separated by '{os.pathsep}'") from None
        raise ConfigError(_raised(entry, exc)) from exc
    except Exception as exc:  # noqa: BLE001 - a plugin may raise anything while it imports
        raise ConfigError(_raised(entry, exc)) from exc


def _raised(entry: str, exc: Exception) -> str:
    frame = traceback.extract_tb(exc.__traceback__)[-1]
    return (f"{PLUGINS_VARIABLE}: plugin {entry} raised while it was imported, at {frame.filename}:{frame.lineno}: "
            f"{type(exc).__name__}: {first_line(exc)}")

