"""Datasets and partitions: everything a job needs before its workers start.

A job either holds the whole graph and its partition (every rank carves its part from them),
or, for a strategy whose ranks need only their own part (``loads_parts``) where a partitioned
dataset exists (:mod:`gnntrain.data.parted`, written by ``gnntrain-partition``), only the
graph's facts: each rank then loads its part file.

With ``dataset.inductive`` the graph the job trains on, partitions and carves is the subgraph
induced by the training nodes (the PipeGCN and BNS-GCN authors partition
``g.subgraph(train_mask)``); the whole graph rides along for evaluation
(:mod:`gnntrain.parallel.inductive`), so such a job never loads part files.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

import torch

from gnntrain.storage.cache import cache_folder
from gnntrain.config.keys import section_keys_playing
from gnntrain.config.schema import CONDUCT, PLACE, DatasetConfig, PartitionConfig, RootConfig
from gnntrain.config.typed import plain
from gnntrain.data.graph_data import GraphData, GraphFacts, induced_subgraph
from gnntrain.data.parted import PartedDataset, write_parted
from gnntrain.data.partition import (
    assignment_digest, carve_part, graph_fingerprint, load_assignment, load_or_partition, partition_stats,
)
from gnntrain.data.registry import load_dataset
from gnntrain.errors import ConfigError, warn
from gnntrain.data.phases import phase


@dataclass
class JobData:
    facts: GraphFacts
    stats: dict
    partition_from_cache: bool
    data: GraphData | None = None
    """The whole graph; None where the ranks load their parts."""
    part: torch.Tensor | None = None
    """The part id of every node; None where the ranks load their parts."""
    parted: PartedDataset | None = None
    """The partitioned dataset the ranks load their parts from, if they do."""
    whole: GraphData | None = None
    """With ``dataset.inductive``: the whole graph, which ``data`` (the training nodes'
    subgraph) is cut from and validation and test are scored on."""
    memory_estimate: dict | None = None
    """The largest rank's estimated peak (:mod:`gnntrain.cost.memory`), where the launcher
    made one."""

    def part_fields(self, rank: int, world_size: int) -> dict:
        """Rank ``rank``'s share of the graph (:func:`~gnntrain.data.partition.carve_part`): read
        from its part file, or carved out of the whole graph."""
        if self.parted is not None:
            return self.parted.load_part(rank)
        return carve_part(self.data, self.part, rank, world_size)


def dataset_key(dataset: DatasetConfig) -> str:
    """Cache key of a dataset config: its name plus a hash of the keys that shape the graph (all
    but its place and conduct keys)."""
    aside = section_keys_playing("dataset", PLACE, CONDUCT)
    shaping = {k: v for k, v in plain(dataset).items() if k not in aside}
    digest = hashlib.sha1(json.dumps(shaping, sort_keys=True).encode()).hexdigest()[:10]
    return f"{dataset.name}-{digest}"


def partitioner(partition: PartitionConfig) -> str:
    """The partitioner ``partition.method`` and ``partition.objective`` name, as
    :data:`~gnntrain.data.partition.METHODS` (and caches) spell it."""
    method = str(partition.method)
    return "metis-vol" if method == "metis" and str(partition.objective) == "vol" else method


def partition_spec(run: RootConfig, parts: int) -> dict:
    """What identifies a run's partition: dataset, partitioner (or assignment file digest), parts, seed."""
    assignment = run.partition.assignment
    return {"dataset": dataset_key(run.dataset),
            "method": "assignment" if assignment else partitioner(run.partition), "parts": parts,
            "seed": None if assignment else run.seed,
            "assignment": assignment_digest(assignment) if assignment else None}


def parted_folder(run: RootConfig, spec: dict) -> Path:
    """``partition.dir``, else the cache's folder for the partition ``spec``."""
    if run.partition.dir:
        return Path(run.partition.dir).expanduser()
    cut = spec["assignment"][:10] if spec["assignment"] else f"s{spec['seed']}"
    name = f"{spec['dataset']}-{spec['method']}-{spec['parts']}-{cut}"
    return cache_folder(run.partition.cache_dir, "parted") / name


def _whole_graph(run: RootConfig, parts: int, parts_key: str) -> tuple[GraphData, torch.Tensor, bool, GraphData | None]:
    """The graph the job trains on and its partition (from the assignment file, the cache, or
    computed); with ``dataset.inductive`` the training nodes' subgraph, and the whole dataset
    last (else None)."""
    verb = "generate" if run.dataset.source == "synthetic" else "load"
    with phase(f"{verb} dataset {run.dataset.name}"):
        data = whole = load_dataset(run.dataset, run.partition.cache_dir)
    if run.dataset.inductive:
        data = induced_subgraph(whole, whole.train_mask)
    else:
        whole = None
    if parts > data.num_nodes:
        raise ConfigError(f"{parts_key}={parts} asks for {parts} parts of dataset {run.dataset.name}, which has "
                          f"{data.num_nodes} nodes; valid: at most {data.num_nodes}")
    if run.partition.assignment:
        return data, load_assignment(run.partition.assignment, data, parts), False, whole
    part, cached = load_or_partition(data, dataset_key(run.dataset), partitioner(run.partition), parts,
                                     run.seed, run.partition.cache_dir)
    return data, part, cached, whole


def _warn_of_parts_without_training(stats: dict, name: str) -> None:
    without = [k for k, count in enumerate(stats["train_nodes"]) if count == 0]
    if without:
        shown = ", ".join(map(str, without[:8])) + (", ..." if len(without) > 8 else "")
        warn(f"{len(without)} of {stats['parts']} parts of {name} hold no training node (parts {shown}); "
             "they take part in every exchange but add nothing to the loss")


def prepare_job_data(run: RootConfig, parts: int, parts_key: str = "partition.parts", loads_parts: bool = False) -> JobData:
    """The dataset and its (cached) partition into ``parts`` parts; ``parts_key`` names the
    setting that asked for them when the graph has fewer nodes. Where the strategy
    ``loads_parts`` and the partitioned dataset exists, only its manifest."""
    inductive = run.dataset.inductive
    if run.partition.dir and inductive:
        raise ConfigError(f"partition.dir={run.partition.dir} with dataset.inductive=true, whose ranks evaluate "
                          "on the whole graph and so load it whole: leave partition.dir unset")
    loads_parts = loads_parts and not inductive
    if run.partition.dir and not loads_parts:
        raise ConfigError(f"partition.dir={run.partition.dir} serves strategies whose ranks load one part each; "
                          f"strategy={run.strategy.name} needs the whole graph on its ranks: "
                          "leave partition.dir unset")
    if loads_parts:
        spec = partition_spec(run, parts)
        parted = PartedDataset.find(parted_folder(run, spec))
        if parted is None and run.partition.dir:
            raise ConfigError(f"partition.dir={run.partition.dir} holds no partitioned dataset "
                              "(no manifest.json); write one with gnntrain-partition and this run's overrides")
        if parted is not None:
            parted.check(spec)
            _warn_of_parts_without_training(parted.stats, parted.facts.name)
            return JobData(parted.facts, parted.stats, True, parted=parted)
    data, part, cached, whole = _whole_graph(run, parts, parts_key)
    stats = partition_stats(data, part, parts)
    _warn_of_parts_without_training(stats, data.name)
    return JobData(data.facts(), stats, cached, data=data, part=part, whole=whole)


def write_partitioned_dataset(run: RootConfig, parts: int, job: JobData | None = None) -> PartedDataset:
    """Partition the dataset once into ``parts`` parts and write the per-part files
    (:mod:`gnntrain.data.parted`) to ``partition.dir`` or the cache; ``job``: the dataset and
    its partition into ``parts`` already prepared (:func:`prepare_job_data`), else prepared here."""
    if run.dataset.inductive:
        raise ConfigError("dataset.inductive=true: its ranks evaluate on the whole graph and so load it whole, not "
                          "part files; partition without it")
    data, part = (job.data, job.part) if job is not None else _whole_graph(run, parts, "partition.parts")[:2]
    spec = partition_spec(run, parts)
    return write_parted(parted_folder(run, spec), data.facts(), spec, graph_fingerprint(data),
                        partition_stats(data, part, parts), (carve_part(data, part, k, parts) for k in range(parts)))
