"""Per-parameter weight decay (``model.decay_groups``): each model's YAML states which parameters
its paper decays, and the optimizer gives each parameter that decay."""

from __future__ import annotations

import pytest

from conftest import make_run
from gnntrain.job import api
from gnntrain.errors import ConfigError
from gnntrain.models import build_model
from gnntrain.parallel.full_batch import build_optimizer


def _decays(*overrides: str) -> dict[str, float]:
    """Parameter name -> the weight decay the optimizer applies to it."""
    run = make_run(*overrides)
    model = build_model(run.model, 8, 3)
    optimizer = build_optimizer(model, run)
    decay_of = {id(p): group["weight_decay"] for group in optimizer.param_groups for p in group["params"]}
    return {name: decay_of[id(p)] for name, p in model.named_parameters()}


def test_gcn_decays_its_first_layer_only_as_its_paper() -> None:
    decays = _decays("model=gcn", "train.weight_decay=5e-4")
    assert decays == {"convs.0.lin.weight": 5e-4, "convs.0.bias": 5e-4, "convs.1.lin.weight": 0.0, "convs.1.bias": 0.0}


def test_gcnii_decays_convolutions_and_dense_maps_apart_as_its_paper() -> None:
    decays = _decays("model=gcnii", "model.layers=3", "train.weight_decay=5e-4")
    assert {name for name, d in decays.items() if d == 0.01} == {f"convs.{i}.weight1" for i in range(3)}
    assert {name for name, d in decays.items() if d == 5e-4} == {"lin_in.weight", "lin_in.bias", "lin_out.weight",
                                                                  "lin_out.bias"}


@pytest.mark.parametrize("model", ["sage", "gat", "deepgcn", "film"])
def test_models_without_a_rule_decay_every_parameter_alike(model: str) -> None:
    assert set(_decays(f"model={model}", "train.weight_decay=0.003").values()) == {0.003}


def test_a_group_overrides_the_yaml_and_the_first_matching_group_wins() -> None:
    decays = _decays("model=sage", "train.weight_decay=0.1",
                     "model.decay_groups=[{params:[convs.1.*],weight_decay:0.2},{params:['*.bias'],weight_decay:0}]")
    assert decays["convs.1.lin_l.bias"] == 0.2 and decays["convs.0.lin_l.bias"] == 0.0
    assert decays["convs.0.lin_l.weight"] == 0.1


def test_a_pattern_matching_no_parameter_is_refused_naming_it() -> None:
    cfg = api.compose(["model=gcn", "model.decay_groups=[{params:[conv.0.*],weight_decay:1}]"])
    with pytest.raises(ConfigError, match=r"model.decay_groups\[0\].params pattern 'conv.0.\*' matches no parameter"):
        api.check(cfg)


def test_a_stage_optimizer_takes_its_parameters_decays() -> None:
    run = make_run("model=gcn", "train.weight_decay=5e-4")
    model = build_model(run.model, 8, 3)
    second = list(model.convs[1].parameters())
    groups = build_optimizer(model, run, second).param_groups
    assert [(len(g["params"]), g["weight_decay"]) for g in groups] == [(2, 0.0)]
