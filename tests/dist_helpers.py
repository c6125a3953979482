"""Worker functions for tests that launch real multi-process jobs (importable by spawned
children, which inherit the parent's ``sys.path``)."""

from __future__ import annotations

from pathlib import Path

import torch
import torch.distributed as dist

from gnntrain.data import JobData
from gnntrain.train import Trainer, WorkerContext


def trace_training(cfg: dict, ctx: WorkerContext, job: JobData) -> dict:
    """Train ``cfg['train']['epochs']`` epochs, recording per epoch: global loss, this rank's
    outputs (by global node id) before the step, and the all-reduced gradients.

    Written to ``<trace_dir>/rank<r>.pt``; also returned (used in-process for one worker).
    """
    trainer = Trainer(cfg, ctx, job.data, job.part)
    inner_ids = trainer.graph.global_ids[: trainer.graph.num_inner]
    trace: dict = {"ids": inner_ids, "loss": [], "out": [], "grads": []}
    for epoch in range(1, cfg["train"]["epochs"] + 1):
        trace["out"].append(trainer.local_outputs().cpu())
        loss = trainer.forward_backward(epoch)
        trainer.all_reduce_gradients()
        if ctx.world_size > 1:
            dist.all_reduce(loss)
        trace["loss"].append(float(loss))
        trace["grads"].append({n: p.grad.detach().clone() for n, p in trainer.model.named_parameters()})
        trainer.optimizer.step()
    trace["bytes"] = dict(trainer.comm.meter.bytes)
    torch.save(trace, Path(cfg["trace_dir"]) / f"rank{ctx.rank}.pt")
    return trace
