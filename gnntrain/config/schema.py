"""The root config schemas (dataset, model, cluster, network, partition, train, W&B, fault injection)
and the base of every strategy's schema; strategy families extend :class:`StrategyConfig`
next to their code. A leaf module: of gnntrain it imports only the errors."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Optional

from omegaconf import MISSING

from gnntrain.errors import ConfigError

DEFAULT_DATA_ROOT = "${oc.env:GNNTRAIN_DATA,${oc.env:HOME,.}/.cache/gnntrain/data}"
DEFAULT_CACHE_DIR = "${oc.env:GNNTRAIN_CACHE,${oc.env:HOME,.}/.cache/gnntrain}"


def choices(name: str, *values: str) -> type[Enum]:
    """A string enum whose members are ``values`` (a key that takes one of them)."""
    return Enum(name, {v: v for v in values}, type=str, module=__name__)


PartitionMethod = choices("PartitionMethod", "metis", "random")
Optimizer = choices("Optimizer", "adam", "sgd")
Precision = choices("Precision", "float32", "float64")
WandbMode = choices("WandbMode", "online", "offline", "disabled")
Norm = choices("Norm", "none", "layer", "batch")
Backend = choices("Backend", "gloo", "nccl")
Device = choices("Device", "cpu", "cuda")


DatasetSource = choices("DatasetSource", "pyg", "ogb", "file", "synthetic")


@dataclass
class DatasetConfig:
    """A graph, declared by its YAML in the ``dataset`` group (``conf/dataset/<name>.yaml``, or a
    user's ``--config-dir``): where it comes from is ``source`` and that source's keys; the
    loaders are in :mod:`gnntrain.data.registry`."""

    name: str = MISSING
    """What the graph is called in logs, tables and cache file names."""
    source: DatasetSource = DatasetSource.pyg
    """Where it comes from: pyg (a torch_geometric.datasets class), ogb (an OGB node-property dataset), file (a .npz or .pt of arrays), synthetic (generated)."""
    pyg_class: Optional[str] = None
    """source=pyg: the class in torch_geometric.datasets, e.g. Planetoid or WikipediaNetwork."""
    args: dict[str, Any] = field(default_factory=dict)
    """source=pyg: the class's keyword arguments besides root, e.g. {name: Cora}."""
    folder: str = ""
    """source=pyg: the class's root folder under dataset.root (empty: dataset.root itself)."""
    ogb_name: Optional[str] = None
    """source=ogb: the OGB name, e.g. ogbn-arxiv."""
    file: Optional[str] = None
    """source=file: a .npz or .pt holding edge_index [2,E], x [N,F], y [N] and optionally train/val/test_mask; absolute or under dataset.root."""
    multilabel: bool = False
    """Labels are a 0/1 matrix [N,C]: BCE loss, F1-micro scores."""
    root: str = DEFAULT_DATA_ROOT
    """Folder the files are read from, never written to (default $GNNTRAIN_DATA, else ~/.cache/gnntrain/data)."""
    to_undirected: bool = True
    """Add every edge's reverse."""
    split: int = 0
    """Which column of a multi-split mask to use (e.g. the 10 geom-gcn splits)."""
    split_seed: int = 0
    """Seed of the random 50/25/25 split of graphs shipped without one."""
    download: bool = True
    """Fetch missing files where the network allows (false: report them instead)."""


@dataclass
class SyntheticConfig(DatasetConfig):
    """Parameters of the planted-community generator (``gnntrain.data.synthetic``)."""

    name: str = "synthetic"
    """What the graph is called in logs, tables and cache file names."""
    source: DatasetSource = DatasetSource.synthetic
    """Generated on the fly (no files)."""
    num_nodes: int = 2000
    """Nodes."""
    avg_degree: float = 10.0
    """Mean degree (directed edges per node after symmetrisation)."""
    num_classes: int = 5
    """Communities, one class each."""
    num_features: int = 32
    """Feature width."""
    homophily: float = 0.8
    """Share of edges planted inside a community."""
    degree_exponent: float = 2.5
    """Power-law exponent of the expected degrees."""
    feature_noise: float = 1.0
    """Standard deviation of the noise around each class's feature mean."""
    graph_seed: int = 0
    """Seed of the graph and features."""
    train_frac: float = 0.6
    """Share of nodes in the training split."""
    val_frac: float = 0.2
    """Share of nodes in the validation split."""


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
class NetworkConfig:
    """An emulated cluster network (:mod:`gnntrain.comm.network`); ``bandwidth_gbps: null``
    means none (the real transport). ``bandwidth_gbps``/``latency_us``: the link between nodes
    (every link, without ``gpus_per_node``); with ``gpus_per_node`` set, ranks
    ``r // gpus_per_node`` share a node and talk over ``intra_*``. ``calibrate_share``: scale
    the bandwidths so that vanilla's exposed communication is this share of its epoch, measured
    in a ``probe_epochs``-epoch vanilla probe (cached per setting)."""

    name: str = "none"
    bandwidth_gbps: Optional[float] = None
    latency_us: float = 0.0
    gpus_per_node: Optional[int] = None
    intra_bandwidth_gbps: Optional[float] = None
    intra_latency_us: float = 0.0
    calibrate_share: Optional[float] = None
    probe_epochs: int = 6


@dataclass
class PartitionConfig:
    """Node partitioning; ``parts: null`` means as many parts as the strategy's layout needs."""

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
    network: Any = MISSING
    partition: PartitionConfig = field(default_factory=PartitionConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    wandb: WandbConfig = field(default_factory=WandbConfig)
    fault: FaultConfig = field(default_factory=FaultConfig)
    seed: int = 0


def check(key: str, value: Any, ok: bool, rule: str) -> None:
    """Raise ConfigError ``key=value is invalid; it must be rule`` unless ``ok``."""
    if not ok:
        raise ConfigError(f"{key}={value} is invalid; it must be {rule}")
