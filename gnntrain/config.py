"""Structured config schemas: the single source of truth for every key ``gnntrain`` accepts.

Hydra composes ``conf/config.yaml`` with one option from each group (``dataset``, ``model``,
``strategy``, ``cluster``); each option's YAML starts from one of the schemas below (stored in
the ``schema/<group>`` config group), so a misspelt key or a value of the wrong type fails at
composition time instead of deep inside a worker.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Optional

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING

DEFAULT_DATA_ROOT = "${oc.env:GNNTRAIN_DATA,${oc.env:HOME,.}/.cache/gnntrain/data}"
DEFAULT_CACHE_DIR = "${oc.env:GNNTRAIN_CACHE,${oc.env:HOME,.}/.cache/gnntrain}"


class PartitionMethod(str, Enum):
    metis = "metis"
    random = "random"


class Optimizer(str, Enum):
    adam = "adam"
    sgd = "sgd"


class Precision(str, Enum):
    float32 = "float32"
    float64 = "float64"


class WandbMode(str, Enum):
    online = "online"
    offline = "offline"
    disabled = "disabled"


class Norm(str, Enum):
    none = "none"
    layer = "layer"
    batch = "batch"


class Smoothing(str, Enum):
    none = "none"
    f = "f"
    g = "g"
    gf = "gf"


class Backend(str, Enum):
    gloo = "gloo"
    nccl = "nccl"


class Device(str, Enum):
    cpu = "cpu"
    cuda = "cuda"


@dataclass
class DatasetConfig:
    """A graph from the dataset registry (``gnntrain.data.registry``)."""

    name: str = MISSING
    root: str = DEFAULT_DATA_ROOT
    to_undirected: bool = True
    split: int = 0
    split_seed: int = 0
    download: bool = True


@dataclass
class SyntheticConfig(DatasetConfig):
    """Parameters of the planted-community generator (``gnntrain.data.synthetic``)."""

    name: str = "synthetic"
    num_nodes: int = 2000
    avg_degree: float = 10.0
    num_classes: int = 5
    num_features: int = 32
    homophily: float = 0.8
    degree_exponent: float = 2.5
    feature_noise: float = 1.0
    graph_seed: int = 0
    train_frac: float = 0.6
    val_frac: float = 0.2


@dataclass
class ModelConfig:
    """A model from ``gnntrain.models``: ``layers`` counts message-passing layers, input to output."""

    name: str = MISSING
    layers: int = 2
    hidden: int = 16
    dropout: float = 0.5
    norm: Norm = Norm.none


@dataclass
class GATConfig(ModelConfig):
    """``hidden`` is the concatenated width of the ``heads`` attention heads."""

    heads: int = 8


@dataclass
class GCNIIConfig(ModelConfig):
    """``alpha``: initial-residual weight; ``theta`` (the paper's lambda): identity-mapping
    strength, ``beta_l = log(theta / l + 1)``."""

    alpha: float = 0.1
    theta: float = 0.5


@dataclass
class DeepGCNConfig(ModelConfig):
    """GENConv softmax aggregation: initial inverse temperature ``t``, learnt if ``learn_t``."""

    t: float = 1.0
    learn_t: bool = True


@dataclass
class StrategyConfig:
    """A training strategy from ``gnntrain.strategies``."""

    name: str = MISSING


@dataclass
class PipeGCNConfig(StrategyConfig):
    """PipeGCN: ``smooth`` the stale boundary features (f), gradients (g) or both (gf) with a
    moving average of weight ``gamma``; ``track_staleness_error`` logs the per-layer error of
    the stale values against fresh ones (costs an extra exchange)."""

    smooth: Smoothing = Smoothing.none
    gamma: float = 0.95
    track_staleness_error: bool = False
    bits: int = 32
    """Width of the stale halo messages: 32 (unquantized) or 2/4/8 (AdaQP's codec)."""
    seed: int = 0


@dataclass
class SamplingConfig(StrategyConfig):
    """BNS-GCN (``bns``) and its edge-sampling baselines (``bes``, ``dropedge``): keep each
    boundary node with probability ``p`` (the baselines drop as many edges as that drops);
    ``seed`` drives the per-epoch samples (the run's seed unless set)."""

    p: float = 0.1
    seed: int = 0


class BitAssignment(str, Enum):
    adaptive = "adaptive"
    uniform = "uniform"
    fixed = "fixed"


@dataclass
class AdaQPConfig(StrategyConfig):
    """AdaQP: quantized halo messages; ``assign`` picks the per-message bit-widths (``bits``
    for ``fixed``; ``adaptive`` re-solves every ``period`` epochs with weight ``lambda_`` on the
    variance objective and groups of ``group_size`` messages); ``overlap`` computes the central
    nodes while the marginal nodes' halo rows are in flight."""

    assign: BitAssignment = BitAssignment.adaptive
    bits: int = 8
    period: int = 50
    group_size: int = 100
    lambda_: float = 0.5
    overlap: bool = False
    seed: int = 0


@dataclass
class ClusterConfig:
    """Where the workers run. ``device``: what each worker trains on (``cuda``: GPU
    ``local_rank % visible GPUs``). NCCL needs ``cuda`` and one GPU per worker; gloo runs on
    either, and its workers may share a GPU. ``world_size: 0`` means one worker per visible GPU."""

    name: str = MISSING
    world_size: int = 2
    backend: Backend = Backend.gloo
    device: Device = Device.cpu
    threads_per_worker: int = 0
    master_addr: str = "127.0.0.1"
    master_port: int = 0
    timeout_s: int = 300


@dataclass
class PartitionConfig:
    """Node partitioning; ``parts: null`` means one part per worker."""

    method: PartitionMethod = PartitionMethod.metis
    parts: Optional[int] = None
    cache_dir: str = DEFAULT_CACHE_DIR


@dataclass
class TrainConfig:
    epochs: int = 100
    lr: float = 0.01
    weight_decay: float = 0.0
    optimizer: Optimizer = Optimizer.adam
    eval_every: int = 1
    warmup_epochs: int = 2
    dtype: Precision = Precision.float32
    """Floating-point type of features, parameters and messages (float64 for numerical checks)."""


@dataclass
class WandbConfig:
    mode: WandbMode = "${oc.env:WANDB_MODE,offline}"  # type: ignore[assignment]
    project: str = "gnntrain"
    group: Optional[str] = None


@dataclass
class FaultConfig:
    """Fault injection for testing the launcher: ``rank`` exits with an error at ``epoch``."""

    rank: Optional[int] = None
    epoch: Optional[int] = None


@dataclass
class RootConfig:
    dataset: Any = MISSING
    model: Any = MISSING
    strategy: Any = MISSING
    cluster: Any = MISSING
    partition: PartitionConfig = field(default_factory=PartitionConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    wandb: WandbConfig = field(default_factory=WandbConfig)
    fault: FaultConfig = field(default_factory=FaultConfig)
    seed: int = 0


def register_schemas() -> None:
    """Put the schemas in Hydra's ConfigStore, under ``schema`` and ``schema/<group>``."""
    cs = ConfigStore.instance()
    cs.store(name="schema", node=RootConfig)
    cs.store(group="schema/dataset", name="dataset", node=DatasetConfig)
    cs.store(group="schema/dataset", name="synthetic", node=SyntheticConfig)
    cs.store(group="schema/model", name="model", node=ModelConfig)
    cs.store(group="schema/model", name="gat", node=GATConfig)
    cs.store(group="schema/model", name="gcnii", node=GCNIIConfig)
    cs.store(group="schema/model", name="deepgcn", node=DeepGCNConfig)
    cs.store(group="schema/strategy", name="strategy", node=StrategyConfig)
    cs.store(group="schema/strategy", name="pipegcn", node=PipeGCNConfig)
    cs.store(group="schema/strategy", name="sampling", node=SamplingConfig)
    cs.store(group="schema/strategy", name="adaqp", node=AdaQPConfig)
    cs.store(group="schema/cluster", name="cluster", node=ClusterConfig)


def validate(cfg: dict) -> None:
    """Checks the schemas' types cannot express; raises ConfigError naming the bad value."""
    from gnntrain.data.registry import DATASETS
    from gnntrain.errors import ConfigError
    from gnntrain.models import MODELS
    from gnntrain.strategies import STRATEGIES

    for section, registry in (("dataset", DATASETS), ("model", MODELS), ("strategy", STRATEGIES)):
        name = cfg[section]["name"]
        if name not in registry:
            raise ConfigError(f"unknown {section}.name '{name}'; valid: {', '.join(sorted(registry))}")
    checks = [
        ("model.layers", cfg["model"]["layers"], cfg["model"]["layers"] >= 1, ">= 1"),
        ("model.hidden", cfg["model"]["hidden"], cfg["model"]["hidden"] >= 1, ">= 1"),
        ("model.dropout", cfg["model"]["dropout"], 0.0 <= cfg["model"]["dropout"] < 1.0, "in [0, 1)"),
        ("train.epochs", cfg["train"]["epochs"], cfg["train"]["epochs"] >= 1, ">= 1"),
        ("train.lr", cfg["train"]["lr"], cfg["train"]["lr"] >= 0, ">= 0"),
        ("train.eval_every", cfg["train"]["eval_every"], cfg["train"]["eval_every"] >= 1, ">= 1"),
        ("train.warmup_epochs", cfg["train"]["warmup_epochs"], cfg["train"]["warmup_epochs"] >= 0, ">= 0"),
    ]
    model = cfg["model"]
    if "heads" in model:
        checks.append(("model.heads", model["heads"], model["heads"] >= 1 and model["hidden"] % model["heads"] == 0,
                       f"a divisor of model.hidden={model['hidden']}"))
    if "gamma" in cfg["strategy"]:
        gamma = cfg["strategy"]["gamma"]
        checks.append(("strategy.gamma", gamma, 0.0 <= gamma < 1.0, "in [0, 1)"))
    if "p" in cfg["strategy"]:
        p = cfg["strategy"]["p"]
        checks.append(("strategy.p", p, 0.0 <= p <= 1.0, "in [0, 1]"))
    strategy = cfg["strategy"]
    if "bits" in strategy:
        checks.append(("strategy.bits", strategy["bits"], strategy["bits"] in (2, 4, 8, 32), "one of 2, 4, 8, 32"))
    for key, rule in (("period", ">= 1"), ("group_size", ">= 1")):
        if key in strategy:
            checks.append((f"strategy.{key}", strategy[key], strategy[key] >= 1, rule))
    if "lambda_" in strategy:
        checks.append(("strategy.lambda_", strategy["lambda_"], 0.0 <= strategy["lambda_"] <= 1.0, "in [0, 1]"))
    if model["name"] == "gcnii":
        checks.append(("model.norm", model["norm"], model["norm"] == "none", "none for gcnii (it has no norm layers)"))
    parts = cfg["partition"]["parts"]
    if parts is not None:
        checks.append(("partition.parts", parts, parts >= 1, ">= 1"))
    for key, value, ok, rule in checks:
        if not ok:
            raise ConfigError(f"{key}={value} is invalid; it must be {rule}")
