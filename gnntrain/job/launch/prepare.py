"""Preparing a job before any of its ranks runs: how many workers and which layout the strategy
needs (:func:`~gnntrain.job.validation.resolve_world_size`, :func:`~gnntrain.job.validation.job_layout`),
the checkpoint it resumes from (:class:`~gnntrain.engine.checkpoint.Resume`), its data, loaded once
(:mod:`.data`), and the memory each rank will need, estimated before any is spent
(:mod:`gnntrain.job.memory`): a job that cannot fit on this machine stops here.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from gnntrain.config.schema import RootConfig
from gnntrain.data.job import JobData
from gnntrain.data.parted import part_file
from gnntrain.engine.checkpoint import Resume
from gnntrain.errors import first_line, warn
from gnntrain.job.launch.data import prepared_once, prepared_under_lock
from gnntrain.job.memory import check_fits, estimate_job
from gnntrain.job.validation import job_layout, resolve_world_size
from gnntrain.parallel.mesh import Layout
from gnntrain.strategies import loads_parts


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
        job = (prepared_once(self.run, self.layout, self.ranks_load_parts) if under_torchrun
               else prepared_under_lock(self.run, self.layout, self.ranks_load_parts, write_parts=False))
        self.estimate_memory(job, here, forked=not under_torchrun)
        return job

    def estimate_memory(self, job: JobData, here: range, forked: bool) -> None:
        """Where each rank holds one part: the estimated peak per rank (:mod:`gnntrain.job.memory`;
        ``forked``: the ranks are forked from the fork server) into ``job`` and on the console
        (rank 0), and the job stopped if the ranks ``here`` would need more memory than this
        machine has."""
        if not self.ranks_load_parts or job.facts.num_nodes == 0:
            return
        try:
            estimates = estimate_job(self.run, job.facts, job.stats, forked)
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
