"""Model migration (HopGNN Sec. 5.1): a model moves between ranks with the gradients it has
accumulated so far.

Every rank holds one model at a time; :func:`migrate` shifts all of them at once by ``shift``
ranks (a ring permutation, so every rank sends one model and receives one): rank ``r`` sends
its parameters and accumulated gradients, flattened into one tensor (``model_migrate``: 2 P x
element size bytes for P parameters), to rank ``r + shift`` and takes over the model of rank
``r - shift``. The replicas' parameters are equal within an iteration, yet they travel: the
method moves the model, and its bytes are counted as it moves them.
"""

from __future__ import annotations

import torch

from gnntrain.comm.communicator import Communicator


def migrate(params: list[torch.nn.Parameter], comm: Communicator, shift: int) -> None:
    """Send the model (``params`` and their ``grad``) ``shift`` ranks on and take the one from
    ``shift`` ranks back, in place (collective over ``comm``)."""
    if comm.world_size == 1 or shift % comm.world_size == 0:
        return
    flat = torch.cat([p.detach().reshape(-1) for p in params] + [p.grad.reshape(-1) for p in params])
    arrived = torch.empty_like(flat)
    to, source = (comm.rank + shift) % comm.world_size, (comm.rank - shift) % comm.world_size
    comm.p2p_start([(to, flat)], [(source, arrived)], "model_migrate").wait()
    offset = 0
    for tensors in ([p.data for p in params], [p.grad for p in params]):
        for t in tensors:
            t.copy_(arrived[offset: offset + t.numel()].view_as(t))
            offset += t.numel()
