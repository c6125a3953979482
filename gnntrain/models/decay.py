"""Which L2 weight decay each parameter of a model takes.

Some models' papers decay only part of the parameters, or decay parts differently: the GCN
paper the first layer only (Kipf & Welling 2017, Sec. 5.2; PyG's ``gcn.py`` example decays that
layer's weight and bias), GCNII its convolutions with 0.01 and its dense input and output maps
with 5e-4 (Chen et al. 2020, Sec. 6.1). A model's YAML states this as ``model.decay_groups``:
an ordered list of ``{params: [patterns], weight_decay: value}``; a parameter takes the decay of
the first group with a pattern (:func:`fnmatch.fnmatchcase`) matching its name
(``model.named_parameters()``), and ``train.weight_decay`` where no group names it. A pattern
that matches no parameter of the model is an error, so a rule cannot silently miss.
"""

from __future__ import annotations

from fnmatch import fnmatchcase
from typing import TYPE_CHECKING

from gnntrain.config.schema import DecayGroup
from gnntrain.errors import ConfigError

if TYPE_CHECKING:
    from torch import nn


def parameter_decays(names: list[str], groups: list[DecayGroup], default: float) -> dict[str, float]:
    """The weight decay of each parameter name under ``groups`` (``model.decay_groups``)."""
    for g, group in enumerate(groups):
        for pattern in group.params:
            if not any(fnmatchcase(name, pattern) for name in names):
                shown = ", ".join(names[:8]) + (", ..." if len(names) > 8 else "")
                raise ConfigError(f"model.decay_groups[{g}].params pattern '{pattern}' matches no parameter; "
                                  f"the model's parameters: {shown}")
    decays = {}
    for name in names:
        matching = (group.weight_decay for group in groups if any(fnmatchcase(name, pattern) for pattern in group.params))
        decays[name] = next(matching, default)
    return decays


def param_groups(model: nn.Module, groups: list[DecayGroup], default: float,
                 only: list[nn.Parameter] | None = None) -> list[dict]:
    """Optimizer parameter groups, one per distinct decay in first-appearance order, of the
    model's parameters (those in ``only`` where given, e.g. a pipeline stage's)."""
    named = dict(model.named_parameters())
    decays = parameter_decays(list(named), groups, default)
    kept = None if only is None else {id(p) for p in only}
    by_decay: dict[float, list[nn.Parameter]] = {}
    for name, param in named.items():
        if kept is None or id(param) in kept:
            by_decay.setdefault(decays[name], []).append(param)
    return [{"params": params, "weight_decay": decay} for decay, params in by_decay.items()]
