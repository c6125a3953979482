"""Preparing a job before any of its ranks runs: how many workers and which layout the strategy
needs (:func:`~gnntrain.job.validation.resolve_world_size`, :func:`~gnntrain.job.validation.job_layout`),
the checkpoint it resumes from (:class:`~gnntrain.engine.checkpoint.Resume`), its data, loaded once
(:mod:`.data`), and the memory each rank will need, estimated before any is spent
(:mod:`gnntrain.job.memory`): a job that cannot fit on this machine stops here.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace

from gnntrain.config.schema import RootConfig
from gnntrain.data.job import JobData, dataset_key, parted_folder, partition_spec, partitioner
from gnntrain.data.parted import PartedDataset, part_file
from gnntrain.data.partition import cache_path
from gnntrain.engine.checkpoint import Resume
from gnntrain.errors import ConfigError, first_line, warn
from gnntrain.job.launch.data import prepared_once, prepared_under_lock
from gnntrain.cost.memory import floor_mb, partition_peak_mb, whole_graph_mb
from gnntrain.job.memory import available_mb, check_fits, estimate_job
from gnntrain.job.validation import job_layout, resolve_world_size
from gnntrain.parallel.mesh import Layout
from gnntrain.cost.shape import proxy_shape
from gnntrain.strategies import loads_parts, method, strategy_class

PROXY_NODES = 100_000
"""Above this many nodes a synthetic graph's job is estimated from a proxy of this many before
its graph is drawn (:meth:`PreparedJob.refuse_before_partition`): a proxy's partition takes
seconds, the graph's minutes."""


@dataclass(frozen=True)
class PreparedJob:
    """A checked run with what its ranks need to start: their number, the strategy's layout on
    them, the checkpoint it resumes from (None for a fresh run) and whether each rank loads only
    its own part of the graph (:func:`~gnntrain.strategies.loads_parts`)."""

    run: RootConfig
    world_size: int
    layout: Layout
    resume: Resume | None
    ranks_load_parts: bool

    def data(self, here: range, under_torchrun: bool) -> JobData:
        """The job's data for the ranks ``here`` (this machine's): prepared once per job (by the
        launcher of spawned workers) or per node or job under torchrun (the process group
        exists), with the estimated peak memory per rank (:meth:`estimate_memory`)."""
        self.refuse_before_partition(here, forked=not under_torchrun)
        job = (prepared_once(self.run, self.layout, self.ranks_load_parts) if under_torchrun
               else prepared_under_lock(self.run, self.layout, self.ranks_load_parts, write_parts=False))
        method(self.run.strategy.name).check_graph(self.run.strategy, job.facts)
        self.estimate_memory(job, here, forked=not under_torchrun)
        return job

    def refuse_below_floor(self, nodes: int, edges: int, features: int, classes: int) -> None:
        """Stop a job whose sizes need more than this machine has even at their least
        (:func:`~gnntrain.cost.memory.floor_mb`), before anything of that size is allocated."""
        run = self.run
        floor, have = floor_mb(run.model, nodes, edges, features, classes, str(run.train.dtype)), available_mb()
        if floor > have:
            raise ConfigError(f"a graph of {nodes} nodes, {edges} directed edges and {features} features with "
                              f"model.hidden={run.model.hidden}, model.layers={run.model.layers} and {classes} classes "
                              f"needs more than {floor / 1024:.1f} GiB (the graph, the weights, Adam's state and every "
                              f"node's logits) but {have / 1024:.1f} GiB is available; would fit: smaller sizes")

    def refuse_before_partition(self, here: range, forked: bool) -> None:
        """Stop a job that cannot fit before its graph is drawn or partitioned, where its size is
        known from the config (a synthetic graph): first its sizes' floor
        (:meth:`refuse_below_floor`); then, above :data:`PROXY_NODES` nodes with each rank holding
        one part and no part files yet, the launcher's partition peak
        (:func:`~gnntrain.cost.memory.partition_peak_mb`, unless the partition is cached), and
        the ranks' peaks from a proxy's partition scaled to the graph
        (:func:`~gnntrain.cost.shape.proxy_shape`, the predictor's). The estimate after the
        partition (:meth:`estimate_memory`) still decides for the jobs that pass."""
        run, dataset = self.run, self.run.dataset
        if dataset.source != "synthetic":
            return
        nodes, edges, dtype = dataset.num_nodes, round(dataset.num_nodes * dataset.avg_degree), str(run.train.dtype)
        self.refuse_below_floor(nodes, edges, dataset.num_features, dataset.num_classes)
        have = available_mb()
        if nodes <= PROXY_NODES or not self.ranks_load_parts:
            return
        if PartedDataset.find(parted_folder(run, partition_spec(run, self.layout.parts))) is not None:
            return  # the ranks map their part files: the estimate after loading is quick and exact
        why = f"estimated before drawing or partitioning the {nodes}-node graph"
        cached = cache_path(run.partition.cache_dir, dataset_key(dataset), partitioner(run.partition),
                            self.layout.parts, run.seed).exists()
        if not cached:
            need = partition_peak_mb(nodes, edges, dataset.num_features, dtype)
            if need > have:
                raise ConfigError(f"partitioning the {nodes}-node graph ({edges} directed edges) needs an estimated "
                                  f"{need / 1024:.1f} GiB (the whole graph and METIS's copies of it) but "
                                  f"{have / 1024:.1f} GiB is available; would fit: a smaller graph, or partitioning "
                                  f"on a bigger machine (gnntrain-partition, then part files; docs/clusters.md) ({why})")
        if int(os.environ.get("RANK", 0)) == 0:
            print(f"gnntrain: memory of the {nodes}-node graph, first from a {PROXY_NODES}-node proxy:", flush=True)
        proxy = replace(run, dataset=replace(dataset, num_nodes=PROXY_NODES,
                                             num_classes=min(dataset.num_classes, PROXY_NODES // 10)))
        shape = replace(proxy_shape(proxy, self.layout.parts, nodes, edges), classes=dataset.num_classes)
        held = whole_graph_mb(nodes, edges, dataset.num_features, dtype)
        try:
            check_fits(estimate_job(run, shape.facts(), shape.stats(), forked, carving=forked), list(here),
                       self.world_size, None, held)
        except ConfigError as exc:
            raise ConfigError(f"{exc} ({why}, from a {PROXY_NODES}-node proxy's partition)") from None

    def estimate_memory(self, job: JobData, here: range, forked: bool) -> None:
        """Where each rank holds one part: the estimated peak per rank (:mod:`gnntrain.job.memory`;
        ``forked``: the ranks are forked from the fork server) into ``job`` and on the console
        (rank 0), and the job stopped if the ranks ``here`` would need more memory than this
        machine has."""
        facts = job.facts
        self.refuse_below_floor(facts.num_nodes, facts.num_edges, facts.num_features, facts.num_classes)
        rank_stats = getattr(strategy_class(self.run.strategy.name), "rank_stats", None)
        if rank_stats is None or facts.num_nodes == 0:
            return
        try:
            # spawned ranks without part files carve theirs from the launcher's graph, in shared memory
            estimates = estimate_job(self.run, job.facts, rank_stats(self.run, job), forked,
                                     carving=forked and job.parted is None)
        except Exception as exc:  # noqa: BLE001 - a model the probe cannot run still trains
            warn(f"no memory estimate: the model's probe forward failed ({first_line(exc)})")
            return
        largest = max(estimates, key=lambda e: e.total_mb)
        job.memory_estimate = largest.to_dict()
        if int(os.environ.get("RANK", 0)) == 0:
            print(f"gnntrain: estimated peak per rank: {largest.describe()}", flush=True)
        mapped = None if job.parted is None else {r: part_file(job.parted.folder, r).stat().st_size / 2**20
                                                  for r in here}
        check_fits(estimates, list(here), self.world_size, mapped)


def prepare(run: RootConfig) -> PreparedJob:
    """The job ``run`` (checked) will start: its world size and layout, and the checkpoint it
    resumes from, checked against them (rank 0 says which of the checkpoint's keys it skips)."""
    world_size = resolve_world_size(run)
    layout = job_layout(run, world_size)
    resume = Resume.find(run)
    if resume is not None:
        resume.check(run, world_size)
        if int(os.environ.get("RANK", 0)) == 0:
            for line in resume.describe_skipped():
                warn(line)
    return PreparedJob(run, world_size, layout, resume, loads_parts(run.strategy.name))
