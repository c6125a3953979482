"""The built-in models' declarations: each model's config dataclass, whose defaults are its
paper's settings, its own checks, and its registration, naming the function that builds it
(``"module:function"``, imported when a job builds the model; nothing here imports torch).

* ``gcn``: :mod:`.gcn`; ``sage``: :mod:`.sage`; ``gat``: :mod:`.gat`;
* ``gcnii``: :mod:`.gcnii`; ``deepgcn``: :mod:`.deepgcn`; ``film``: :mod:`.film`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gnntrain.config.schema import DecayGroup, ModelConfig, Norm, check, check_finite
from gnntrain.models.registry import ModelSpec, register_model

PACKAGE = "gnntrain.models"


@dataclass
class GCNConfig(ModelConfig):
    """GCN (Kipf and Welling, 2017): 2 x 16, dropout 0.5, weight decay on the first layer only."""

    decay_groups: list[DecayGroup] = field(default_factory=lambda: [
        DecayGroup(["convs.0.*"], "${train.weight_decay}"), DecayGroup(["*"], 0.0)])  # type: ignore[arg-type]


register_model(ModelSpec("gcn", f"{PACKAGE}.gcn:build_gcn", GCNConfig))
register_model(ModelSpec("sage", f"{PACKAGE}.sage:build_sage"))


@dataclass
class GATConfig(ModelConfig):
    """GAT (Velickovic et al., 2018): 2 layers, 8 heads of 8 in the hidden layer, dropout 0.6."""

    hidden: int = 64
    dropout: float = 0.6
    heads: int = 8
    """Attention heads of the hidden layers; model.hidden is their concatenated width."""
    out_heads: int = 1
    """Attention heads of the output layer, averaged (the GAT paper: 1 on Cora and CiteSeer, 8 on PubMed)."""
    att_dropout: float = 0.6
    """Dropout probability on the normalised attention coefficients, per edge and head (the GAT paper: 0.6)."""


def validate_gat(config: GATConfig) -> None:
    """Heads that split the hidden width evenly; attention dropout a probability."""
    check("model.heads", config.heads, config.heads >= 1 and config.hidden % config.heads == 0,
          f"a divisor of model.hidden={config.hidden}")
    check("model.out_heads", config.out_heads, config.out_heads >= 1, ">= 1")
    check("model.att_dropout", config.att_dropout, 0.0 <= config.att_dropout < 1.0, "in [0, 1)")


register_model(ModelSpec("gat", f"{PACKAGE}.gat:build_gat", GATConfig, validate=validate_gat))


@dataclass
class GCNIIConfig(ModelConfig):
    """GCNII (Chen et al., 2020) on Cora: 64 x 64, dropout 0.6, alpha 0.1, lambda 0.5, weight decay
    0.01 on the convolutions."""

    layers: int = 64
    hidden: int = 64
    dropout: float = 0.6
    decay_groups: list[DecayGroup] = field(default_factory=lambda: [DecayGroup(["convs.*"], 0.01)])
    alpha: float = 0.1
    """Initial-residual weight."""
    theta: float = 0.5
    """Identity-mapping strength (the paper's lambda): beta_l = log(theta / l + 1)."""


def validate_gcnii(config: GCNIIConfig) -> None:
    """No norm layers; the initial residual a weight, and ``beta_l = log(theta / l + 1)`` defined
    and non-negative."""
    check("model.norm", config.norm, config.norm == "none", "none for gcnii (it has no norm layers)")
    check_finite("model.alpha", config.alpha, 0 <= config.alpha <= 1, "in [0, 1] (the initial residual's weight)")
    check_finite("model.theta", config.theta, config.theta >= 0, ">= 0 (beta_l = log(theta / l + 1))")


register_model(ModelSpec("gcnii", f"{PACKAGE}.gcnii:build_gcnii", GCNIIConfig, validate=validate_gcnii))


@dataclass
class DeepGCNConfig(ModelConfig):
    """DeeperGCN (Li et al., 2020): 7 res+ blocks of 64, LayerNorm, dropout 0.5, learnt softmax temperature."""

    layers: int = 7
    hidden: int = 64
    norm: Norm = Norm.layer
    t: float = 1.0
    """Initial inverse temperature of GENConv's softmax aggregation."""
    learn_t: bool = True
    """Learn the inverse temperature."""


def validate_deepgcn(config: DeepGCNConfig) -> None:
    """A finite inverse temperature (the softmax aggregation's ``exp(t m)``)."""
    check_finite("model.t", config.t)


register_model(ModelSpec("deepgcn", f"{PACKAGE}.deepgcn:build_deepgcn", DeepGCNConfig, validate=validate_deepgcn))


@dataclass
class FiLMConfig(ModelConfig):
    """GNN-FiLM (Brockschmidt, 2020): 10 x 64, LayerNorm, dropout 0.1 (PyG's GNN-FiLM example)."""

    layers: int = 10
    hidden: int = 64
    dropout: float = 0.1
    norm: Norm = Norm.layer


register_model(ModelSpec("film", f"{PACKAGE}.film:build_film", FiLMConfig))
