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

from gnntrain.comm.communicator import Communicator, InFlight


def migrate(params: list[torch.nn.Parameter], comm: Communicator, shift: int) -> InFlight | None:
    """Send the model (``params`` and their ``grad``) ``shift`` ranks on and take the one from
    ``shift`` ranks back, in place (collective over ``comm``). Returns once the arriving model is
    in; the departing one is sent from its own buffer and may still be in flight: the returned
    send (None if nothing moved), to be waited on before the iteration ends, so a rank does not
    wait for its successor to be ready to receive."""
    if comm.world_size == 1 or shift % comm.world_size == 0:
        return None
    flat = torch.cat([p.detach().reshape(-1) for p in params] + [p.grad.reshape(-1) for p in params])
    to, source = (comm.rank + shift) % comm.world_size, (comm.rank - shift) % comm.world_size
    sending = comm.send_start(to, [flat], "model_migrate")
    arrived = comm.recv_start(source, [torch.empty_like(flat)], "model_migrate").wait()[0]
    offset = 0
    for tensors in ([p.data for p in params], [p.grad for p in params]):
        for t in tensors:
            t.copy_(arrived[offset: offset + t.numel()].view_as(t))
            offset += t.numel()
    return sending


def wait_all(sends: list[InFlight | None]) -> None:
    """Complete the departed models' sends (:func:`migrate`'s returns)."""
    for send in sends:
        if send is not None:
            send.wait()
