"""Strategy registry. A strategy decides which local graph an epoch trains on and how a layer
obtains its halo rows during training and during evaluation; the model, optimizer and epoch
loop are shared."""

from __future__ import annotations

from typing import Protocol

from gnntrain.comm.communicator import Communicator
from gnntrain.errors import ConfigError
from gnntrain.graph import LocalGraph
from gnntrain.models.gnn import HaloSource
from gnntrain.strategies.adaqp import AdaQP
from gnntrain.strategies.bns import BoundarySampling
from gnntrain.strategies.pipegcn import PipeGCN
from gnntrain.strategies.vanilla import Vanilla


class Strategy(Protocol):
    def training_view(self, epoch: int) -> tuple[LocalGraph, HaloSource]:
        """The graph epoch ``epoch`` trains on (the rank's local graph, or a sample of it with
        the same inner nodes) and the source of its layers' halo rows."""
        ...

    def evaluation_halo(self) -> HaloSource:
        """Halo rows for evaluation, which always runs on the rank's full local graph."""
        ...

    def epoch_metrics(self) -> dict[str, float]:
        """Strategy-specific figures of the epoch just trained, the same on every rank (every
        rank calls it)."""
        ...

    def finish(self) -> None:
        """Complete whatever is still in flight after the last epoch."""
        ...


STRATEGIES = {"vanilla": Vanilla, "pipegcn": PipeGCN, "bns": BoundarySampling, "bes": BoundarySampling,
              "dropedge": BoundarySampling, "adaqp": AdaQP}


def build_strategy(cfg: dict, graph: LocalGraph, comm: Communicator) -> Strategy:
    if cfg["name"] not in STRATEGIES:
        raise ConfigError(f"unknown strategy.name '{cfg['name']}'; valid: {', '.join(sorted(STRATEGIES))}")
    return STRATEGIES[cfg["name"]](cfg, graph, comm)
