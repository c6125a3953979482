"""The launcher's memory check: a job whose ranks on this machine need more than it has stops
before any worker starts. What a rank needs is estimated by :mod:`gnntrain.cost.memory`; here,
with the method's own memory declaration (:attr:`~gnntrain.strategies.registry.Method.memory`)."""

from __future__ import annotations

from pathlib import Path

from gnntrain.config.schema import RootConfig
from gnntrain.cost.memory import SHARED_RUNTIME_MB, MemoryEstimate, estimate_ranks
from gnntrain.data.graph_data import GraphFacts
from gnntrain.errors import ConfigError
from gnntrain.strategies import method


def estimate_job(run: RootConfig, facts: GraphFacts, stats: dict, forked: bool = True,
                 carving: bool = False) -> list[MemoryEstimate]:
    """Every rank's estimate (:func:`gnntrain.cost.memory.estimate_ranks`) with the run's method's
    memory declaration."""
    return estimate_ranks(run, facts, stats, method(run.strategy.name).memory, forked, carving)


def available_mb() -> float:
    """Memory available to new processes here (Linux ``MemAvailable``), in MiB."""
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) / 1024
    return float("inf")


def check_fits(estimates: list[MemoryEstimate], local_ranks: list[int], world_size: int,
               mapped_mb: dict[int, float] | None, launcher_mb: float = 0.0) -> None:
    """Stop before training, in one line, where the ranks running here need more memory than is
    available: the estimate, the memory here, and settings that would fit.

    What the ranks need together is less than the sum of their peaks: the libraries of the
    runtime are mapped once for all of them (:data:`SHARED_RUNTIME_MB` of each rank's runtime),
    and ranks that load part files (``mapped_mb``: each local rank's part file size; None where
    the ranks carve their parts in memory) map them from disk: those pages count in a rank's
    resident peak, but they are the page cache's, which ``MemAvailable`` already counts as
    available and the kernel reads again rather than kill a process for. ``launcher_mb``: what
    the launcher will hold beside them that it does not hold yet (its whole graph, where the job
    is checked before drawing it)."""
    mapped = mapped_mb or {}
    need = (sum(estimates[r].total_mb - mapped.get(r, 0.0) - estimates[r].shared_mb for r in local_ranks)
            - SHARED_RUNTIME_MB * (len(local_ranks) - 1))
    have = available_mb() - launcher_mb
    if need <= have:
        return
    worst = max(estimates, key=lambda e: e.total_mb)
    fixes = [f"more workers on more machines (cluster.world_size > {world_size})",
             "a smaller model (model.hidden, model.layers)"]
    if mapped_mb is None:
        fixes.insert(0, "part files (gnntrain-partition with the same overrides), so no process holds the whole graph")
    files = f" besides the {sum(mapped.values()) / 1024:.1f} GiB of part files they map" if mapped else ""
    held = f" once the launcher holds the whole graph ({launcher_mb / 1024:.1f} GiB)" if launcher_mb else ""
    raise ConfigError(f"the {len(local_ranks)} ranks here need an estimated {need / 1024:.1f} GiB{files} (largest rank "
                      f"{worst.describe()}) but {have / 1024:.1f} GiB is available{held}; would fit: {'; '.join(fixes)}")
