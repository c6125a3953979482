"""Datasets and partitions: everything a job needs before its workers start."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

import torch

from gnntrain.data.graph_data import GraphData
from gnntrain.data.partition import load_or_partition, partition_stats
from gnntrain.data.registry import load_dataset
from gnntrain.errors import ConfigError, warn


@dataclass
class JobData:
    data: GraphData
    part: torch.Tensor
    stats: dict
    partition_from_cache: bool


def dataset_key(dataset_cfg: dict) -> str:
    """Cache key of a dataset config: its name plus a hash of the keys that shape the graph."""
    shaping = {k: v for k, v in dataset_cfg.items() if k not in ("root", "download")}
    digest = hashlib.sha1(json.dumps(shaping, sort_keys=True).encode()).hexdigest()[:10]
    return f"{dataset_cfg['name']}-{digest}"


def prepare_job_data(cfg: dict, parts: int, parts_key: str = "partition.parts") -> JobData:
    """Load the dataset and its (cached) partition into ``parts`` parts; ``parts_key`` names the
    setting that asked for them when the graph has fewer nodes."""
    cache_dir = cfg["partition"]["cache_dir"]
    data = load_dataset(cfg["dataset"], cache_dir)
    if parts > data.num_nodes:
        raise ConfigError(f"{parts_key}={parts} asks for {parts} parts of dataset {cfg['dataset']['name']}, which has "
                          f"{data.num_nodes} nodes; valid: at most {data.num_nodes}")
    part, cached = load_or_partition(data, dataset_key(cfg["dataset"]), cfg["partition"]["method"],
                                     parts, cfg["seed"], cache_dir)
    without_training = (torch.bincount(part[data.train_mask], minlength=parts) == 0).nonzero().view(-1).tolist()
    if without_training:
        shown = ", ".join(map(str, without_training[:8])) + (", ..." if len(without_training) > 8 else "")
        warn(f"{len(without_training)} of {parts} parts of {data.name} hold no training node (parts {shown}); "
             "they take part in every exchange but add nothing to the loss")
    return JobData(data, part, partition_stats(data, part, parts), cached)
