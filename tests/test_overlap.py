"""The central/marginal schedule (AdaQP Sec. 3.4): the halo exchange is in flight while the
central rows compute, in the forward and in the backward pass. A recording stand-in for the
communicator logs when each exchange starts and is waited for; the layer logs when each view's
rows are computed and when their backward runs. (That results equal the synchronous exchange's
is tested on real jobs in test_adaqp.py.)"""

from __future__ import annotations

from types import SimpleNamespace

import torch

from gnntrain.models.gnn import MessagePassingLayer, propagate
from gnntrain.strategies.graph_parallel import overlap
from gnntrain.strategies.graph_parallel.overlap import OverlappedHaloExchange


class _RecordingComm:
    device = torch.device("cpu")

    def __init__(self, log: list[str]) -> None:
        self.log = log

    def all_to_all_start(self, rows, send_splits, recv_splits, kind, decode=None):
        self.log.append(f"start {kind}")
        log = self.log
        return SimpleNamespace(wait=lambda: log.append(f"wait {kind}") or rows.clone())


class _LoggingLayer(MessagePassingLayer):
    """Central view: row 0 doubled; marginal view: row 1 plus the halo row."""

    in_dim = 1

    def __init__(self, log: list[str]) -> None:
        super().__init__()
        self.log = log

    def aggregate(self, z: torch.Tensor, h_inner: torch.Tensor, graph, transform: bool) -> torch.Tensor:
        out = 2 * z[:1] if graph == "central" else z[1:2] + z[2:3]
        self.log.append(f"compute {graph}")
        out.register_hook(lambda grad: self.log.append(f"backward {graph}"))
        return out


def test_central_rows_compute_while_the_halo_is_in_flight_in_both_passes(monkeypatch) -> None:
    log: list[str] = []
    plan = SimpleNamespace(send_index=torch.tensor([0]), send_splits=[0, 1], recv_splits=[0, 1], num_inner=2,
                           num_halo=1)
    graph = SimpleNamespace(central_marginal=("central", "marginal", torch.tensor([0, 1])), num_inner=2,
                            global_ids=torch.tensor([0, 1, 2]))
    monkeypatch.setattr(overlap, "central_marginal", lambda g: graph.central_marginal)
    h = torch.tensor([[1.0], [3.0]], requires_grad=True)
    out = propagate(_LoggingLayer(log), h * 1.0, 1, graph, OverlappedHaloExchange(plan, _RecordingComm(log)),
                    lambda rows, ids: rows)
    assert out.detach().flatten().tolist() == [2.0, 4.0]  # row 1 + halo row (row 0 of the peer: 1.0)
    out.sum().backward()
    assert log == ["start halo_fwd", "compute central", "wait halo_fwd", "compute marginal",
                   "backward marginal", "start halo_bwd", "backward central", "wait halo_bwd"]
    assert h.grad.flatten().tolist() == [3.0, 1.0]  # row 0: 2 (central) + 1 (its copy read as halo)
