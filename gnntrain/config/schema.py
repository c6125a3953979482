"""The root config schemas (dataset, model, cluster, network, partition, train, W&B, fault injection)
and the base of every strategy's schema; strategy families extend :class:`StrategyConfig`
next to their code. A leaf module: of gnntrain it imports only the errors."""

from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any, Optional, TypeVar

from omegaconf import MISSING, DictConfig, OmegaConf

from gnntrain.errors import ConfigError

T = TypeVar("T")

DEFAULT_DATA_ROOT = "${oc.env:GNNTRAIN_DATA,${oc.env:HOME,.}/.cache/gnntrain/data}"
DEFAULT_CACHE_DIR = "${oc.env:GNNTRAIN_CACHE,${oc.env:HOME,.}/.cache/gnntrain}"


class Choice(str, Enum):
    """A string enum member that prints as its value (``f"{Precision.float32}"`` is ``float32``)."""

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return self.value.__format__(spec)


def choices(name: str, *values: str, module: str = __name__) -> type[Choice]:
    """A string enum whose members are ``values`` (a key that takes one of them), defined as
    ``module.name`` (pass the defining module's ``__name__``, so that its members pickle)."""
    return Choice(name, {v: v for v in values}, module=module)  # type: ignore[return-value]


PartitionMethod = choices("PartitionMethod", "metis", "random")
PartitionObjective = choices("PartitionObjective", "cut", "vol")
Optimizer = choices("Optimizer", "adam", "sgd")
Monitor = choices("Monitor", "score", "loss", "score_or_loss")
Precision = choices("Precision", "float32", "float64", "bfloat16")
WandbMode = choices("WandbMode", "online", "offline", "disabled")
Norm = choices("Norm", "none", "layer", "batch")
Backend = choices("Backend", "gloo", "nccl")
NetworkMode = choices("NetworkMode", "modelled", "kernel")
SharedTraffic = choices("SharedTraffic", "data", "training")
Device = choices("Device", "cpu", "cuda")
PrepareScope = choices("PrepareScope", "node", "job")
ClockName = choices("ClockName", "auto", "wall", "virtual")
VirtualCompute = choices("VirtualCompute", "auto", "thread", "alone")


ROLE = "role"
"""The field metadata key naming the part a key plays beyond its value (:mod:`gnntrain.config.keys`
derives the lists of keys that play each part)."""
PLACE = "place"
"""Where the run reads, writes or meets its peers: never what it computes, never what tells runs
apart in a table; free to change on resume."""
CONDUCT = "conduct"
"""How long and how safely the run is carried out (epochs, checkpoints, timeouts, threads):
never what an epoch computes, so free to change on resume."""
WORKLOAD = "workload"
"""What shapes the work an epoch does (the graph, the model, the workers, the partition, the
precision; a mini-batch's size and fan-out): network calibration measures its baseline under
the run's values of these keys, and caches the result per their values."""


def role(part: str, default: Any) -> Any:
    """A dataclass field playing ``part`` (:data:`PLACE`, :data:`CONDUCT` or :data:`WORKLOAD`)."""
    return field(default=default, metadata={ROLE: part})


def place(default: Any) -> Any:
    """A key that says where the run reads, writes or meets (:data:`PLACE`)."""
    return role(PLACE, default)


def conduct(default: Any) -> Any:
    """A key that says how the run is carried out (:data:`CONDUCT`)."""
    return role(CONDUCT, default)


def workload(default: Any) -> Any:
    """A key that shapes the work an epoch does (:data:`WORKLOAD`). A strategy option of this
    kind shapes the setting rather than the method: the calibration probe runs its baseline with
    the run's value of such an option where the baseline has it, and the baseline's own defaults
    for every other option."""
    return role(WORKLOAD, default)


@dataclass
class DatasetConfig:
    """A graph, declared by its YAML in the ``dataset`` group (``conf/dataset/<name>.yaml``, or a
    user's ``--config-dir``): where it comes from is ``source`` and that source's keys (a source
    with keys of its own types its datasets by a dataclass extending this one; the sources are
    declared in :mod:`gnntrain.data.sources`)."""

    name: str = MISSING
    """What the graph is called in logs, tables and cache file names."""
    source: str = "pyg"
    """Where it comes from: pyg (a torch_geometric.datasets class), ogb (an OGB node-property dataset), file (a .npz or .pt of arrays), synthetic (generated), or a plugin's source."""
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
    root: str = place(DEFAULT_DATA_ROOT)
    """Folder the files are read from, never written to (default $GNNTRAIN_DATA, else ~/.cache/gnntrain/data)."""
    to_undirected: bool = True
    """Add every edge's reverse."""
    split: int = 0
    """Which column of a multi-split mask to use (e.g. the 10 geom-gcn splits)."""
    split_seed: int = 0
    """Seed of the random 50/25/25 split of graphs shipped without one."""
    download: bool = conduct(True)
    """Fetch missing files where the network allows (false: report them instead)."""
    normalize_features: bool = False
    """Divide each node's features by their sum once at load (the GCN and GAT papers' preprocessing,
    PyG's NormalizeFeatures): on for the Planetoid graphs (cora, citeseer)."""
    inductive: bool = False
    """Train on the subgraph induced by the training nodes; score validation on the subgraph
    induced by the training and validation nodes and test on the whole graph (the PipeGCN and
    BNS-GCN authors' --inductive). Graph-parallel strategies."""

    def validate(self) -> None:
        """A plain name (cache files are named after it), a root, and a folder inside it."""
        check_plain_name("dataset.name", self.name)
        check_path("dataset.root", self.root)
        folder = Path(self.folder)
        check("dataset.folder", repr(self.folder), "\n" not in self.folder and not folder.is_absolute()
              and ".." not in folder.parts, "a relative folder under dataset.root, on one line (empty: the root)")


@dataclass
class SyntheticConfig(DatasetConfig):
    """Parameters of the planted-community generator (``gnntrain.data.synthetic``)."""

    name: str = "synthetic"
    """What the graph is called in logs, tables and cache file names."""
    source: str = "synthetic"
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
class DecayGroup:
    """One weight decay and the parameters it applies to (:mod:`gnntrain.models.decay`)."""

    params: list[str] = field(default_factory=list)
    """Shell-style patterns over the model's parameter names (e.g. convs.0.*, lin_*.weight, *)."""
    weight_decay: float = 0.0
    """The L2 weight decay of the parameters they match."""


@dataclass
class ModelConfig:
    """A model from ``gnntrain.models``."""

    name: str = MISSING
    """gcn, sage, gat, gcnii, deepgcn or film."""
    layers: int = 2
    """Message-passing layers, input to output (GCNII, DeepGCN: their convolutions)."""
    hidden: int = 16
    """Hidden width."""
    dropout: float = 0.5
    """Dropout probability on every layer's input."""
    norm: Norm = Norm.none
    """none, layer (per-node LayerNorm) or batch (statistics over the whole graph)."""
    precompute_first: bool = False
    """Aggregate the input features for the first layer once before training (the PipeGCN and
    BNS-GCN authors' --use-pp): no first-layer halo exchange per epoch. Graph-parallel
    strategies, models whose first layer aggregates with fixed weights (gcn, sage)."""
    decay_groups: list[DecayGroup] = field(default_factory=list)
    """Per-parameter weight decay, as the model's paper applies it: a parameter takes the decay of
    the first group with a pattern matching its name, train.weight_decay where none does."""


RUN_SEED: Any = "${seed}"
"""The default of a strategy's own seed: the run's ``seed``."""


@dataclass
class StrategyConfig:
    """A training strategy from ``gnntrain.strategies``."""

    name: str = MISSING
    """The strategy (one option of the strategy group)."""


@dataclass
class ClusterConfig:
    """Where the workers run. NCCL needs ``cuda`` and one GPU per worker; gloo runs on either,
    and its workers may share a GPU."""

    name: str = MISSING
    """The cluster preset."""
    world_size: int = 2
    """Number of workers (0: one per visible GPU)."""
    backend: Backend = Backend.gloo
    """gloo or nccl."""
    device: Device = Device.cpu
    """What each worker trains on: cpu, or cuda (GPU local_rank mod visible GPUs)."""
    threads_per_worker: int = conduct(0)
    """Torch threads per worker (0: cores / local workers)."""
    keep_freed_memory: bool = conduct(True)
    """Keep freed memory in each worker's heap for reuse (glibc ``mallopt``): large CPU tensors
    then skip page faults; resident memory stays at its peak (:mod:`gnntrain.job.launch.allocator`)."""
    master_addr: str = place("127.0.0.1")
    """Address of the process-group rendezvous for locally spawned workers: the launcher's store
    listens on it alone."""
    master_port: int = place(0)
    """Its port (0: a free one)."""
    timeout_s: int = conduct(300)
    """Collective timeout in seconds."""
    prepare_data: PrepareScope = place(PrepareScope.node)
    """Under torchrun or submitit, which processes load, download and partition the dataset while
    the others wait: one per node (node: each node's cache is its own) or one per job (job: the
    cache is on a filesystem every node shares)."""
    prepare_timeout_s: int = conduct(3600)
    """How long ranks wait for the data preparation of another process before failing."""
    clock: ClockName = workload(ClockName.auto)
    """What every time of the run is measured on: virtual (each rank's own clock: its compute as if
    it had a machine to itself, its transfers timed by the described network's model from the
    ranks' post times), wall (the host's clock, on a GPU the device's: the real transport's time),
    or auto: virtual where the network describes a link to model (network=eth10g, ...), wall on a
    real transport (network=none, network.mode=kernel); docs/clusters.md."""
    virtual_compute: VirtualCompute = conduct(VirtualCompute.auto)
    """With clock=virtual on a CPU, what a rank's compute is: thread (its thread's CPU time: a rank
    of one torch thread), alone (the wall time it computes while the ranks take turns, one at a
    time: the host to itself, every thread of the rank with it; slower, the validation's
    reference), or auto: thread for ranks of one thread, alone for ranks of more."""
    trace: bool = conduct(False)
    """With clock=virtual, write every rank's compute spans and communication operations to
    trace.jsonl in the run dir (gnntrain-replay reads it)."""
    deterministic: bool = conduct(False)
    """Deterministic kernels (torch.use_deterministic_algorithms; CUDA's atomic scatter-adds
    become sorted ones, cuBLAS a fixed workspace, cuSPARSE's products an ordered index_add): a GPU
    run repeats bit for bit, at some cost in speed and device memory (docs/clusters.md)."""

    def validate(self) -> None:
        """Timeouts, port and threads in their ranges."""
        for key in ("timeout_s", "prepare_timeout_s"):
            value = getattr(self, key)
            check(f"cluster.{key}", value, 1 <= value <= TIMEOUT_LIMIT_S,
                  f"in 1..{TIMEOUT_LIMIT_S} seconds (torch's timeouts are 32-bit milliseconds)")
        check("cluster.master_addr", repr(self.master_addr), bool(self.master_addr.strip()),
              "an address of this machine (127.0.0.1: this machine alone)")
        check("cluster.master_port", self.master_port, 0 <= self.master_port <= 65535,
              "in 1..65535, or 0 for any free port")
        check("cluster.threads_per_worker", self.threads_per_worker, self.threads_per_worker >= 0,
              ">= 0 (0: cores / local workers; one per rank under the virtual clock on a CPU)")
        virtual_cpu = self.clock == "virtual" and self.device == "cpu"
        if virtual_cpu and self.threads_per_worker > 1:
            check("cluster.virtual_compute", self.virtual_compute, self.virtual_compute != "thread",
                  f"alone or auto with cluster.threads_per_worker={self.threads_per_worker} (a thread's CPU time "
                  "counts one thread: a rank of several computes with the host to itself)")
        check("cluster.virtual_compute", self.virtual_compute, self.virtual_compute in ("auto", "thread") or virtual_cpu,
              "auto or thread unless cluster.clock=virtual on a CPU (alone: ranks take turns on the host)")
        check("cluster.trace", self.trace, not self.trace or self.clock != "wall",
              "false with cluster.clock=wall (a trace is in virtual time: set cluster.clock=virtual)")


@dataclass
class NetworkConfig:
    """The cluster's links, the cluster description every timed figure reads
    (:mod:`gnntrain.timing.cluster`): modelled by the virtual clock, or made by the kernel
    (:mod:`gnntrain.comm.namespaces`)."""

    name: str = "none"
    """The network preset."""
    mode: NetworkMode = NetworkMode.modelled
    """How the links are made: modelled (the virtual clock times every transfer on the described links) or kernel (each node's ranks in a network namespace, joined over virtual Ethernet links that traffic control shapes, timed on the wall clock; root only, spawned jobs)."""
    bandwidth_gbps: Optional[float] = None
    """Link bandwidth in Gbit/s between machines (every link without gpus_per_node); null: the real transport."""
    latency_us: float = 0.0
    """Per-message latency of that link in microseconds."""
    send_overhead_us: float = 0.0
    """The host's cost of sending one message over that link in microseconds (LogGP's o at the sender; gnntrain-measure-link measures it; the kernel's links, network.mode=kernel, have their real one)."""
    recv_overhead_us: float = 0.0
    """The host's cost of receiving one message over that link in microseconds (LogGP's o at the receiver)."""
    gpus_per_node: Optional[int] = None
    """Ranks per machine (node): ranks r // gpus_per_node share one and talk over the intra_* link."""
    intra_bandwidth_gbps: Optional[float] = None
    """Bandwidth within a machine in Gbit/s."""
    intra_latency_us: float = 0.0
    """Latency within a machine in microseconds."""
    intra_send_overhead_us: float = 0.0
    """The host's cost of sending one message within a machine in microseconds."""
    intra_recv_overhead_us: float = 0.0
    """The host's cost of receiving one message within a machine in microseconds."""
    calibrate_share: Optional[float] = None
    """Scale the bandwidths so that the calibration baseline spends this share of its epoch in exposed communication."""
    calibrate_traffic: SharedTraffic = SharedTraffic.data
    """What that communication is: data (the traffic a method moves to compute, all-reduces apart: PipeGCN's, BNS-GCN's, AdaQP's and HopGNN's shares) or training (every training category, gradient all-reduces included: GNNPipe's, whose Table 1 does not set them apart)."""
    calibrate_against: Optional[str] = None
    """The strategy calibration probes; null: the baseline of the run's family (vanilla, or minibatch for mini-batches)."""
    probe_epochs: int = 6
    """Epochs of each probe of the baseline that measures that share (cached per setting)."""
    recheck: bool = conduct(True)
    """Re-check a cached calibration with one probe at the start of a sweep or run, correcting it
    where the share it reaches is off; false: use the cached link as it is (a build's later sweeps
    in a round, so that they run under the very link their baseline's sweep just checked)."""
    loss: float = 0.0
    """Share of the packets a node sends that its link drops (mode=kernel)."""
    calibration: Optional[dict[str, Any]] = None
    """What calibration measured and chose (against, share, reached_share, scale, ...); set by
    gnntrain when network.calibrate_share is, not an option."""

    def validate(self) -> None:
        """Bandwidths, latencies, loss and the calibration's share in their ranges; the second
        level complete where ``gpus_per_node`` asks for one (the kernel's: a node's loopback,
        unshaped); loss only on the kernel's links; a share only for a modelled link."""
        kernel = self.mode == "kernel"
        modelled = self.bandwidth_gbps is not None and not kernel
        if self.bandwidth_gbps is not None:
            check_finite("network.bandwidth_gbps", self.bandwidth_gbps, self.bandwidth_gbps > 0, "> 0")
        for key in ("latency_us", "send_overhead_us", "recv_overhead_us", "intra_send_overhead_us",
                    "intra_recv_overhead_us"):
            check_finite(f"network.{key}", getattr(self, key), getattr(self, key) >= 0, ">= 0")
        check("network.loss", self.loss, 0.0 <= self.loss < 1.0 and (kernel or self.loss == 0),
              "in [0, 1) with network.mode=kernel, 0 with a modelled link (it drops nothing)")
        if self.gpus_per_node is not None:
            check("network.gpus_per_node", self.gpus_per_node, self.gpus_per_node >= 1, ">= 1 (or null: one level)")
            if kernel:
                for key in ("intra_bandwidth_gbps", "intra_latency_us"):
                    check(f"network.{key}", getattr(self, key), not getattr(self, key),
                          "null (0 for the latency) with network.mode=kernel: a node's ranks share its loopback, "
                          "unshaped")
            else:
                bw = self.intra_bandwidth_gbps
                check_finite("network.intra_bandwidth_gbps", bw, bw is not None and bw > 0,
                             "> 0 when network.gpus_per_node is set")
                check_finite("network.intra_latency_us", self.intra_latency_us, self.intra_latency_us >= 0, ">= 0")
        share = self.calibrate_share
        if share is not None:
            check("network.calibrate_share", share, modelled,
                  "null without a modelled link (pick one: network=eth10g, eth25g, pcie3, ib100, two_level; "
                  "network.mode=modelled)")
            check("network.calibrate_share", share, 0 < share < 1, "in (0, 1)")
            check("network.probe_epochs", self.probe_epochs, self.probe_epochs >= 2, ">= 2")


@dataclass
class PartitionConfig:
    method: PartitionMethod = workload(PartitionMethod.metis)
    """metis (balanced, via pymetis) or random."""
    objective: PartitionObjective = workload(PartitionObjective.cut)
    """What METIS minimises: cut (edges between parts) or vol (total communication volume: the
    halo rows an exchange moves, the PipeGCN/BNS-GCN authors' --partition-obj vol)."""
    parts: Optional[int] = workload(None)
    """Number of parts; null: as many as the strategy's layout needs."""
    cache_dir: str = place(DEFAULT_CACHE_DIR)
    """Where partitions and processed datasets are cached (default $GNNTRAIN_CACHE, else ~/.cache/gnntrain)."""
    assignment: Optional[str] = workload(None)
    """A precomputed partition (.npy of one part id per node, e.g. from ParMETIS) used instead of method."""
    dir: Optional[str] = place(None)
    """Folder of the partitioned dataset (per-part files); null: the cache's. Ranks load only their part from it."""
    only: bool = conduct(False)
    """Write the partitioned dataset and exit (what gnntrain-partition does)."""

    def validate(self) -> None:
        """A positive number of parts; ``vol`` only where METIS partitions the graph; a cache."""
        check_path("partition.cache_dir", self.cache_dir)
        if self.dir is not None:
            check_path("partition.dir", self.dir)
        if self.parts is not None:
            check("partition.parts", self.parts, self.parts >= 1, ">= 1")
        if self.objective == "vol":
            by_metis = self.method == "metis" and not self.assignment
            check("partition.objective", "vol", by_metis, "cut unless METIS partitions the graph (partition.method="
                  "metis, no partition.assignment): vol is METIS's objective")


@dataclass
class TrainConfig:
    epochs: int = conduct(100)
    """Training epochs."""
    lr: float = 0.01
    """Learning rate."""
    weight_decay: float = 0.0
    """L2 weight decay of the parameters no group of model.decay_groups names."""
    optimizer: Optimizer = workload(Optimizer.adam)
    """adam or sgd."""
    eval_every: int = conduct(1)
    """Evaluate every k epochs (and after the last); the records of the epochs since the last
    evaluation are written then (and at checkpoints), with no communication between the epochs
    in between."""
    monitor: Monitor = Monitor.score
    """Which epoch is best, and what the patience watches: score (the best validation score), loss (the lowest
    validation loss, GCNII's code) or score_or_loss (GAT's code: the patience resets where either is at its best so
    far; the best epoch is the last where both are)."""
    patience: int = 0
    """Stop once the last epoch that improved on what train.monitor watches is this many epochs old (checked after
    each evaluation; 0: never)."""
    target: Optional[float] = None
    """Stop at the first evaluation whose validation score is at least this (null: never)."""
    warmup_epochs: int = conduct(2)
    """First epochs left out of the timing means."""
    dtype: Precision = workload(Precision.float32)
    """Floating-point type of features, parameters and messages (float64 for numerical checks; bfloat16 on cuda only)."""
    checkpoint_every: int = conduct(0)
    """Write a checkpoint every k epochs and after the last, under <run dir>/checkpoints (0: none)."""
    resume: Any = conduct(False)
    """Continue from the newest complete checkpoint: true (this run dir; none yet: start afresh) or a run dir."""

    def validate(self) -> None:
        """Counts, rate and target in their ranges; ``resume`` true, false or a run dir."""
        for key, rule in (("epochs", 1), ("eval_every", 1), ("warmup_epochs", 0), ("patience", 0)):
            check(f"train.{key}", getattr(self, key), getattr(self, key) >= rule, f">= {rule}")
        check_finite("train.lr", self.lr, self.lr >= 0, ">= 0")
        check_finite("train.weight_decay", self.weight_decay, self.weight_decay >= 0, ">= 0")
        if self.target is not None:
            check("train.target", self.target, 0 < self.target <= 1, "a validation score in (0, 1], or null")
        check("train.checkpoint_every", self.checkpoint_every, self.checkpoint_every >= 0, ">= 0 (0: none)")
        resume = self.resume
        check("train.resume", resume, isinstance(resume, bool) or (isinstance(resume, str) and resume != ""),
              "true, false or a run dir")


@dataclass
class WandbConfig:
    mode: WandbMode = "${oc.env:WANDB_MODE,offline}"  # type: ignore[assignment]
    """online, offline (files under the run dir, upload later with wandb sync) or disabled; default $WANDB_MODE, else offline."""
    project: str = "gnntrain"
    """The W&B project."""
    group: Optional[str] = None
    """The W&B group the run joins (default in a sweep: the sweep dir, shared by its jobs)."""
    name: Optional[str] = None
    """The run's W&B name (default: the run dir's name; in a sweep, the job's overrides)."""
    verbose: bool = False
    """Show W&B's own console lines."""
    run: Optional[dict[str, Any]] = None
    """The W&B run the launcher keeps for the job (id, project, group, name); set by gnntrain,
    not an option."""


@dataclass
class FaultConfig:
    """Fault injection for testing the launcher."""

    rank: Optional[int] = None
    """This rank exits abruptly at the start of fault.epoch (tests the launcher)."""
    epoch: Optional[int] = None
    """The epoch at whose start fault.rank exits."""
    stop: bool = False
    """fault.rank stops itself instead (SIGSTOP, as a frozen process does), without exiting."""
    link_down: bool = False
    """fault.rank's node loses its link instead (network.mode=kernel: its interface goes down, as a pulled cable), and the rank goes on."""


def section(schema: type, part: Optional[str] = None, group: bool = False) -> Any:
    """A root field holding a section of ``schema``, every key of which plays ``part`` where one
    is given. ``group``: the section is an option of a config group, whose schema extends
    ``schema``, so the root has no default for it."""
    metadata = {"schema": schema} if part is None else {"schema": schema, ROLE: part}
    if group:
        return field(default=MISSING, metadata=metadata)
    return field(default_factory=schema, metadata=metadata)


@dataclass
class RootConfig:
    dataset: Any = section(DatasetConfig, WORKLOAD, group=True)
    model: Any = section(ModelConfig, WORKLOAD, group=True)
    strategy: Any = section(StrategyConfig, group=True)
    cluster: Any = section(ClusterConfig, WORKLOAD, group=True)
    network: Any = section(NetworkConfig, group=True)
    partition: PartitionConfig = section(PartitionConfig)
    train: TrainConfig = section(TrainConfig)
    wandb: WandbConfig = section(WandbConfig, PLACE)
    fault: FaultConfig = section(FaultConfig, CONDUCT)
    seed: int = 0
    """Seed of the model initialisation and the partitioning."""
    run_dir: str = place("")
    """The run's directory, set by gnntrain to Hydra's (``hydra.run.dir``, or the sweep job's);
    not an option."""


def typed(schema: type[T], section: Any) -> T:
    """``section`` (a plain dict of a composed config, or already a ``schema`` instance) as an
    instance of ``schema``: its types checked, enums as members, nested dataclasses typed
    (``OmegaConf.to_object``)."""
    if isinstance(section, schema):
        return section
    return OmegaConf.to_object(OmegaConf.merge(_structured(schema), section))  # type: ignore[return-value]


@functools.lru_cache(maxsize=None)
def _structured(schema: type) -> DictConfig:
    """``schema``'s structured config, built once (``OmegaConf.merge`` copies it)."""
    return OmegaConf.structured(schema)


def registered(registry: dict[str, Any], key: str, name: str) -> Any:
    """``registry[name]``; ConfigError ``unknown key 'name'; valid: ...`` where it is not there."""
    if name not in registry:
        raise ConfigError(f"unknown {key} '{name}'; valid: {', '.join(sorted(registry))}")
    return registry[name]


def check(key: str, value: Any, ok: bool, rule: str) -> None:
    """Raise ConfigError ``key=value is invalid; it must be rule`` unless ``ok``."""
    if not ok:
        raise ConfigError(f"{key}={value} is invalid; it must be {rule}")


PLAIN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,127}")
"""A name that files are named after: no path, nothing hidden, on one line."""


def check_plain_name(key: str, value: str) -> None:
    """``value`` is a :data:`PLAIN_NAME` (a dataset's name becomes cache file names)."""
    check(key, repr(value), isinstance(value, str) and PLAIN_NAME.fullmatch(value) is not None,
          "a plain name of letters, digits and . _ + - (at most 128, starting with a letter or digit; no path)")


SEED_RANGE = 2**63
"""Seeds are non-negative 64-bit signed integers (torch's and METIS's generators take them so)."""
TIMEOUT_LIMIT_S = 2_147_483
"""The longest timeout torch's process groups and stores take: 2^31 - 1 milliseconds (24.8 days)."""


def check_finite(key: str, value: float, ok: bool = True, rule: str = "") -> None:
    """``value`` is a finite number for which ``ok`` holds (NaN and infinities fail every rule)."""
    check(key, value, isinstance(value, (int, float)) and math.isfinite(value) and ok,
          f"finite and {rule}" if rule else "finite")


def check_seed(key: str, value: int) -> None:
    """``value`` is a :data:`SEED_RANGE` seed."""
    check(key, value, 0 <= value < SEED_RANGE, "in 0..2^63 - 1")


def check_path(key: str, value: str) -> None:
    """``value`` names a folder or file: not empty (which would mean wherever the job starts), on one line."""
    check(key, repr(value), bool(value) and "\n" not in value and "\0" not in value, "a non-empty path on one line")


@dataclass
class SweeperConfig:
    """``hydra/sweeper=gnntrain``: Hydra's basic sweeper keeping each strategy's and model's own
    knobs (:func:`gnntrain.job.sweep.sweep_jobs`)."""

    _target_: str = "hydra_plugins.gnntrain_sweeper.KnobSweeper"
    max_batch_size: Optional[int] = None
    params: Optional[dict[str, str]] = None
