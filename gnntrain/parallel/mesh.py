"""The process layout of a job: a named device mesh, and what each worker knows of it.

A strategy declares the :class:`Layout` it needs: the sizes of the mesh axes (``gp``:
graph-parallel, ranks that hold the parts of one graph; ``dp``: data-parallel replicas;
``pp``: pipeline stages), whose product is the number of workers, and how many graph
partitions its data layout needs. The launcher checks the layout against the workers it has,
partitions the graph, and each worker builds the mesh as a
``torch.distributed.device_mesh.DeviceMesh`` (axes in the declared order; the last varies
fastest over consecutive ranks, so ``gp`` last keeps a graph-parallel group on one node).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh

from gnntrain.errors import ConfigError
from gnntrain.timing.virtual_rank import VirtualRank


@dataclass(frozen=True)
class Layout:
    axes: dict[str, int]
    """Mesh axis name -> size, outermost first."""
    parts: int
    """Graph partitions the strategy's data layout needs (1: the whole graph on every rank)."""
    parts_key: str = "cluster.world_size"
    """The config key that sets ``parts``, for errors."""

    @property
    def size(self) -> int:
        return math.prod(self.axes.values())

    def check(self, world_size: int, strategy: str) -> None:
        """Raise ConfigError unless the mesh uses exactly ``world_size`` workers."""
        if self.size != world_size:
            shape = " x ".join(f"{name}={n}" for name, n in self.axes.items())
            raise ConfigError(f"strategy={strategy} lays {world_size} workers out as {shape} = {self.size} ranks; "
                              f"valid: a mesh whose sizes multiply to {world_size}")


@dataclass
class WorkerContext:
    rank: int
    world_size: int
    device: torch.device
    mesh: DeviceMesh | None = None
    """The job's device mesh (None only in single-process tests, which build no process group)."""
    virtual: VirtualRank | None = None
    """The rank under the virtual clock (``cluster.clock=virtual``; None: the wall clock)."""
    over_network: bool = False
    """Whether some of the job's ranks reach each other over a network (kernel-shaped links, or
    workers on other machines): gloo's all-to-alls then post their receives first
    (:mod:`gnntrain.comm.communicator`)."""
    ranks_per_node: int | None = None
    """Consecutive ranks per node of the described cluster (``network.gpus_per_node``; None: no
    nodes): the meter counts what crosses between nodes."""

    def mesh_axes(self) -> dict[str, int]:
        """Axis name -> size of the mesh (``{}`` without one)."""
        if self.mesh is None:
            return {}
        return {axis: self.mesh[axis].size() for axis in self.mesh.mesh_dim_names}


def build_mesh(layout: Layout, backend: str) -> DeviceMesh:
    """The layout's ``DeviceMesh`` over the initialised default process group (every rank must
    call it, after choosing its device). Its device type follows the backend (``cuda`` for
    NCCL, ``cpu`` for gloo, whose workers may still train on a GPU they share): the mesh only
    provides the process groups of its axes."""
    device_type = "cuda" if backend == "nccl" else "cpu"
    return init_device_mesh(device_type, tuple(layout.axes.values()), mesh_dim_names=tuple(layout.axes))
