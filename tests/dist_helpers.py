"""Worker functions for tests that launch real multi-process jobs (importable by spawned
children, which inherit the parent's ``sys.path``)."""

from __future__ import annotations

from pathlib import Path

import torch
import torch.distributed as dist

from conftest import make_cfg

from gnntrain.data import JobData
from gnntrain.launch import launch
from gnntrain.train import Trainer, WorkerContext


def trace_training(cfg: dict, ctx: WorkerContext, job: JobData) -> dict:
    """:func:`record_training` of this rank's trainer, written to ``<trace_dir>/rank<r>.pt``."""
    trace = record_training(Trainer(cfg, ctx, job.data, job.part), cfg, ctx)
    torch.save(trace, Path(cfg["trace_dir"]) / f"rank{ctx.rank}.pt")
    return trace


def record_training(trainer: Trainer, cfg: dict, ctx: WorkerContext) -> dict:
    """Train ``cfg['train']['epochs']`` epochs, recording per epoch: global loss, this rank's
    outputs (by global node id) before the step, the all-reduced gradients, the strategy's
    epoch metrics and the edges of the graph it trained on (global source and target ids and
    each edge's weight); and the rank's bytes by kind over the job and its halo size."""
    inner_ids = trainer.graph.global_ids[: trainer.graph.num_inner]
    trace: dict = {"ids": inner_ids, "boundary": trainer.graph.num_halo, "loss": [], "out": [], "train_out": [],
                   "grads": [], "epoch_metrics": [], "edges": []}
    trainer.model.register_forward_hook(
        lambda module, args, out: trace["train_out"].append(out.detach().clone()) if module.training else None)
    training_view = trainer.strategy.training_view

    def recorded(epoch: int):
        graph, halo = training_view(epoch)
        scale = graph.edge_scale if graph.edge_scale is not None else torch.ones(graph.edge_src.numel())
        trace["edges"].append((graph.global_ids[graph.edge_src], graph.global_ids[graph.edge_dst], scale))
        return graph, halo

    trainer.strategy.training_view = recorded
    for epoch in range(1, cfg["train"]["epochs"] + 1):
        trace["out"].append(trainer.local_outputs().cpu())
        loss = trainer.forward_backward(epoch)
        trainer.all_reduce_gradients()
        if ctx.world_size > 1:
            dist.all_reduce(loss)
        trace["loss"].append(float(loss))
        trace["grads"].append({n: p.grad.detach().clone() for n, p in trainer.model.named_parameters()})
        trainer.optimizer.step()
        trace["epoch_metrics"].append(trainer.strategy.epoch_metrics())
    trainer.strategy.finish()
    trace["bytes"] = dict(trainer.comm.meter.bytes)
    return trace


def trace_pipeline(cfg: dict, ctx: WorkerContext, job: JobData) -> None:
    """Train with the strategy's training halos tapped: per epoch and layer, the layer input's
    inner rows (``input``), the halo rows the strategy handed the layer (``used``), the gradient
    of those halo rows (``grad_halo``, what goes back to their owners) and the gradient the
    exchange gave the layer input (``grad_from_peers``). Written to ``<trace_dir>/rank<r>.pt``."""
    trainer = Trainer(cfg, ctx, job.data, job.part)
    graph = trainer.graph
    epochs: list[dict] = []
    training_view = trainer.strategy.training_view

    def tapped(epoch: int):
        graph, halo = training_view(epoch)

        def call(h: torch.Tensor, layer: int) -> torch.Tensor:
            record = epochs[-1].setdefault(layer, {"input": h.detach().clone()})
            tap = h.view_as(h)  # used by the exchange only, so its gradient is the exchange's
            if tap.requires_grad:
                tap.register_hook(lambda g: record.__setitem__("grad_from_peers", g.clone()))
            used = halo(tap, layer)
            record["used"] = used.detach().clone()
            if used.requires_grad:
                used.register_hook(lambda g: record.__setitem__("grad_halo", g.clone()))
            return used

        return graph, call

    trainer.strategy.training_view = tapped
    for epoch in range(1, cfg["train"]["epochs"] + 1):
        epochs.append({})
        trainer.forward_backward(epoch)
        trainer.all_reduce_gradients()
        trainer.optimizer.step()
    trainer.strategy.finish()
    trace = {"rank": ctx.rank, "inner": graph.global_ids[: graph.num_inner],
             "halo": graph.global_ids[graph.num_inner:], "epochs": epochs}
    torch.save(trace, Path(cfg["trace_dir"]) / f"rank{ctx.rank}.pt")


def trace_job(tmp_path, name: str, *overrides: str) -> list[dict]:
    """Run a job under :func:`trace_training`; every rank's trace."""
    cfg = make_cfg(*overrides)
    cfg["trace_dir"] = str(tmp_path / name)
    (tmp_path / name).mkdir()
    launch(cfg, trace_training)
    world = cfg["cluster"]["world_size"]
    return [torch.load(f"{cfg['trace_dir']}/rank{r}.pt") for r in range(world)]


def assert_gradients_close(actual: dict[str, torch.Tensor], expected: dict[str, torch.Tensor], rtol: float,
                           what: str) -> None:
    """Every parameter's gradient equal to ``rtol`` relative, elementwise, with elements near zero
    compared against ``rtol`` x the tensor's largest magnitude. A gradient that is zero up to
    rounding (below 1e-9 of the model's largest, e.g. the bias of a layer that feeds batch
    norm, which the normalisation cancels) is rounding noise in both runs and is compared
    against ``rtol`` x the model's largest gradient instead."""
    largest = max(float(g.abs().max()) for g in expected.values())
    for name, grad in expected.items():
        own = float(grad.abs().max())
        scale = own if own >= 1e-9 * largest else largest
        torch.testing.assert_close(actual[name].cpu(), grad.cpu(), rtol=rtol, atol=rtol * scale,
                                   msg=lambda m: f"gradient of {name}, {what}: {m}")


def job_bytes(traces: list[dict], kind: str) -> int:
    return sum(t["bytes"].get(kind, 0) for t in traces)
