"""The epoch loop shared by all graph-parallel strategies.

One training epoch on rank ``r``: forward over the local graph (the strategy supplies halo
rows), loss summed over the rank's training nodes and divided by the *global* number of
training nodes, backward (halo gradients flow back to their owners), one all-reduce (sum) of
the flattened gradients, optimizer step. Because the per-rank losses are partial sums of the
full-graph mean loss, the summed gradients equal the full-graph gradient whatever the number
of parts.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.nn.functional as F

from gnntrain.comm.communicator import Communicator
from gnntrain.data import JobData
from gnntrain.data.graph_data import GraphData
from gnntrain.graph import LocalGraph, build_local_graph
from gnntrain.metrics import (
    TRAINING_KINDS, ConsoleProgress, EpochRecord, JsonlSink, WandbSink, peak_memory_mb,
    reset_peak_memory, summarize,
)
from gnntrain.models import build_model
from gnntrain.strategies import build_strategy

HALO_KINDS = ("halo_fwd", "halo_bwd")


@dataclass
class WorkerContext:
    rank: int
    world_size: int
    device: torch.device


class Trainer:
    def __init__(self, cfg: dict, ctx: WorkerContext, data: GraphData, part: torch.Tensor) -> None:
        self.cfg = cfg
        self.ctx = ctx
        self.comm = Communicator(ctx.rank, ctx.world_size, ctx.device)
        dtype = getattr(torch, cfg["train"]["dtype"])
        self.graph: LocalGraph = build_local_graph(data, part, ctx.rank, ctx.world_size, dtype).to(ctx.device)
        self.multilabel = data.multilabel
        self.num_train = int(data.train_mask.sum())
        self.x = self.graph.x
        self.y = self.graph.y.to(dtype) if data.multilabel else self.graph.y
        self.masks = {k: getattr(self.graph, f"{k}_mask") for k in ("train", "val", "test")}
        torch.manual_seed(cfg["seed"])
        self.model = build_model(cfg["model"], data.num_features, data.num_classes,
                                 lambda t: self.comm.all_sum(t, "bn_stats")).to(ctx.device, dtype)
        self.strategy = build_strategy(cfg["strategy"], self.graph, self.comm)
        tcfg = cfg["train"]
        opt_cls = torch.optim.Adam if tcfg["optimizer"] == "adam" else torch.optim.SGD
        self.optimizer = opt_cls(self.model.parameters(), lr=tcfg["lr"], weight_decay=tcfg["weight_decay"])

    # -- one epoch -------------------------------------------------------------------------
    def local_loss(self, out: torch.Tensor) -> torch.Tensor:
        """This rank's share of the full-graph mean training loss."""
        mask = self.masks["train"]
        if self.multilabel:
            total = F.binary_cross_entropy_with_logits(out[mask], self.y[mask], reduction="sum")
            return total / (self.num_train * self.y.shape[1])
        return F.cross_entropy(out[mask], self.y[mask], reduction="sum") / self.num_train

    def forward_backward(self, epoch: int) -> torch.Tensor:
        """Forward, loss and backward without the gradient all-reduce; returns the local loss."""
        self.model.train()
        self.optimizer.zero_grad(set_to_none=False)
        graph, halo = self.strategy.training_view(epoch)
        out = self.model(self.x, graph, halo)
        loss = self.local_loss(out)
        loss.backward()
        return loss.detach()

    def all_reduce_gradients(self) -> None:
        params = [p for p in self.model.parameters() if p.requires_grad]
        flat = torch.cat([p.grad.reshape(-1) for p in params])
        self.comm.all_reduce(flat, "allreduce")
        offset = 0
        for p in params:
            p.grad.copy_(flat[offset: offset + p.numel()].view_as(p))
            offset += p.numel()

    def train_epoch(self, epoch: int) -> tuple[torch.Tensor, dict[str, float]]:
        self.comm.meter.reset()
        reset_peak_memory(self.ctx.device)
        start = time.perf_counter()
        loss = self.forward_backward(epoch)
        self.all_reduce_gradients()
        self.optimizer.step()
        if self.ctx.device.type == "cuda":
            torch.cuda.synchronize(self.ctx.device)
        epoch_time = time.perf_counter() - start
        meter = self.comm.meter
        comm_time = sum(meter.wait_s[k] for k in HALO_KINDS)
        reduce_time = sum(t for k, t in meter.wait_s.items() if k not in HALO_KINDS)
        times = {
            "epoch_time": epoch_time,
            "compute_time": epoch_time - comm_time - reduce_time,
            "comm_time": comm_time,
            "comm_total_time": sum(meter.total_s[k] for k in HALO_KINDS),
            "reduce_time": reduce_time,
        }
        return loss, times

    # -- evaluation ------------------------------------------------------------------------
    @torch.no_grad()
    def local_outputs(self) -> torch.Tensor:
        """Model outputs (logits) for this rank's inner nodes, in evaluation mode."""
        self.model.eval()
        with self.comm.meter.tagged("eval_"):
            return self.model(self.x, self.graph, self.strategy.evaluation_halo())

    def local_eval_counts(self) -> torch.Tensor:
        """Per split: (correct, total) for accuracy, or (2TP, 2TP+FP+FN) for F1-micro."""
        out = self.local_outputs()
        counts = []
        for mask in self.masks.values():
            if self.multilabel:
                pred, true = out[mask] > 0, self.y[mask] > 0.5
                tp = (pred & true).sum()
                counts += [2 * tp, 2 * tp + (pred & ~true).sum() + (~pred & true).sum()]
            else:
                counts += [(out[mask].argmax(-1) == self.y[mask]).sum(), mask.sum()]
        return torch.stack(counts).double()

    # -- the loop --------------------------------------------------------------------------
    def epoch_record(self, epoch: int, loss: torch.Tensor, times: dict[str, float],
                     eval_counts: torch.Tensor | None, eval_time: float) -> EpochRecord:
        """Aggregate one epoch over ranks: loss, bytes and eval counts summed, times and memory
        maxed. This telemetry traffic is not counted as communication."""
        meter = self.comm.meter
        kinds = sorted(set(meter.bytes) | set(TRAINING_KINDS))
        sums = [float(loss)] + [float(meter.bytes[k]) for k in kinds]
        if eval_counts is not None:
            sums += eval_counts.tolist()
        maxes = list(times.values()) + [eval_time, peak_memory_mb(self.ctx.device)]
        as_tensor = lambda xs: torch.tensor(xs, dtype=torch.float64, device=self.ctx.device)  # noqa: E731
        sums = self.comm.reduce_untracked(as_tensor(sums), dist.ReduceOp.SUM).tolist()
        maxes = self.comm.reduce_untracked(as_tensor(maxes), dist.ReduceOp.MAX).tolist()

        by_kind = {k: int(b) for k, b in zip(kinds, sums[1: 1 + len(kinds)])}
        training = {k: b for k, b in by_kind.items() if not k.startswith("eval_")}
        accs: list[float | None] = [None, None, None]
        if eval_counts is not None:
            counts = sums[1 + len(kinds):]
            accs = [counts[i] / counts[i + 1] if counts[i + 1] > 0 else None for i in (0, 2, 4)]
        return EpochRecord(
            epoch=epoch, loss=sums[0], train_acc=accs[0], val_acc=accs[1], test_acc=accs[2],
            **dict(zip(times, maxes)), eval_time=maxes[len(times)],
            comm_bytes=sum(b for k, b in training.items() if not k.startswith("diag_")),
            comm_bytes_by_kind=training,
            eval_comm_bytes=sum(by_kind.values()) - sum(training.values()),
            peak_mem_mb=maxes[len(times) + 1], strategy_metrics=self.strategy.epoch_metrics(),
        )

    def run_epoch(self, epoch: int) -> EpochRecord:
        loss, times = self.train_epoch(epoch)
        eval_counts, eval_time = None, 0.0
        tcfg = self.cfg["train"]
        if epoch % tcfg["eval_every"] == 0 or epoch == tcfg["epochs"]:
            start = time.perf_counter()
            eval_counts = self.local_eval_counts()
            eval_time = time.perf_counter() - start
        return self.epoch_record(epoch, loss, times, eval_counts, eval_time)


def inject_fault(cfg: dict, rank: int, epoch: int) -> None:
    """``fault.rank`` dies abruptly (no cleanup, exit code 3) at the start of ``fault.epoch``."""
    fault = cfg["fault"]
    if fault["rank"] == rank and fault["epoch"] == epoch:
        print(f"fault injection: rank {rank} exits at epoch {epoch}", flush=True)
        os._exit(3)


def run_training(cfg: dict, ctx: WorkerContext, job: JobData) -> dict | None:
    """The worker's job: train, write metrics (rank 0), return the summary on rank 0."""
    wall_start = time.perf_counter()
    data, partition_stats = job.data, job.stats
    trainer = Trainer(cfg, ctx, data, job.part)
    run_dir = Path(cfg["run_dir"])
    epochs = cfg["train"]["epochs"]
    sinks: list[Any] = []
    records: list[EpochRecord] = []
    if ctx.rank == 0:
        run_dir.mkdir(parents=True, exist_ok=True)
        print(f"{cfg['dataset']['name']}: {data.num_nodes} nodes, {data.num_edges} edges; "
              f"{cfg['strategy']['name']} / {cfg['model']['name']} on {ctx.world_size} worker(s); "
              f"partition: inner {partition_stats['inner_nodes']}, boundary "
              f"{partition_stats['boundary_nodes']}, edge-cut {partition_stats['edge_cut']}, "
              f"replication {partition_stats['replication_factor']:.3f}", flush=True)
        sinks.append(JsonlSink(run_dir / "metrics.jsonl"))
        if cfg["wandb"]["mode"] != "disabled":
            sinks.append(WandbSink(cfg, run_dir))
        sinks.append(ConsoleProgress(epochs))
    exit_code = 1
    try:
        for epoch in range(1, epochs + 1):
            inject_fault(cfg, ctx.rank, epoch)
            record = trainer.run_epoch(epoch)
            records.append(record)
            for sink in sinks:
                sink.log(record)
        trainer.strategy.finish()
        summary = None
        if ctx.rank == 0:
            summary = {
                "dataset": cfg["dataset"]["name"],
                "model": cfg["model"]["name"],
                "strategy": cfg["strategy"]["name"],
                "world_size": ctx.world_size,
                "num_nodes": data.num_nodes,
                "num_edges": data.num_edges,
                "metric": "f1_micro" if data.multilabel else "accuracy",
                "partition": partition_stats,
                **summarize(records, cfg["train"]["warmup_epochs"]),
                "total_wall_time": time.perf_counter() - wall_start,
            }
            (run_dir / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
            for sink in sinks:
                sink.summarize(summary)
        exit_code = 0
    finally:
        for sink in sinks:
            sink.close(exit_code)
    return summary
