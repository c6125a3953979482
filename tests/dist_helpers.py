"""Worker functions for tests that launch real multi-process jobs (importable by spawned
children, which inherit the parent's ``sys.path``)."""

from __future__ import annotations

from functools import partial
from pathlib import Path

import torch
import torch.distributed as dist

from conftest import make_run

from gnntrain.job import api
from gnntrain.comm.communicator import Communicator
from gnntrain.comm.meter import CommMeter
from gnntrain.config.schema import RootConfig
from gnntrain.data.job import JobData
from gnntrain.data.job import prepare_job_data
from gnntrain.job.validation import job_layout
from gnntrain.parallel.full_batch import EVAL_COUNTS, SPLITS
from gnntrain.parallel.mesh import WorkerContext
from gnntrain.strategies import strategy_class
from gnntrain.strategies.base import Tallies
from gnntrain.strategies.graph_parallel.strategy import GraphParallel


def trace_training(run: RootConfig, ctx: WorkerContext, job: JobData, *, trace_dir: str) -> dict:
    """:func:`record_training` of this rank's graph-parallel strategy, written to
    ``<trace_dir>/rank<r>.pt``."""
    trace = record_training(GraphParallel(run, ctx, job), run, ctx)
    torch.save(trace, Path(trace_dir) / f"rank{ctx.rank}.pt")
    return trace


def _epoch_metrics(strategy, ctx: WorkerContext) -> dict[str, float]:
    """The strategy's figures of the epoch just trained, its tallies combined over the ranks as
    the loop's record round does."""
    mine = strategy.epoch_tallies()
    everyone = [mine]
    if ctx.world_size > 1:
        everyone = [None] * ctx.world_size
        dist.all_gather_object(everyone, mine)
    return strategy.epoch_metrics(Tallies.combine(everyone))


def record_training(strategy: GraphParallel, run: RootConfig, ctx: WorkerContext) -> dict:
    """Train ``train.epochs`` epochs, recording per epoch: global loss, this rank's
    outputs (by global node id) before the step, the all-reduced gradients, the strategy's
    epoch metrics and the edges of the graph it trained on (global source and target ids and
    each edge's weight); and the rank's bytes by kind over the job and its halo size."""
    step, policy = strategy.step, strategy.policy
    inner_ids = strategy.graph.global_ids[: strategy.graph.num_inner]
    trace: dict = {"ids": inner_ids, "boundary": strategy.graph.num_halo, "loss": [], "out": [], "train_out": [],
                   "grads": [], "epoch_metrics": [], "edges": []}
    step.model.register_forward_hook(
        lambda module, args, out: trace["train_out"].append(out.detach().clone()) if module.training else None)
    training_view = policy.training_view

    def recorded(epoch: int):
        graph, halo = training_view(epoch)
        scale = graph.edge_scale if graph.edge_scale is not None else torch.ones(graph.edge_src.numel())
        trace["edges"].append((graph.global_ids[graph.edge_src], graph.global_ids[graph.edge_dst], scale))
        return graph, halo

    for epoch in range(1, run.train.epochs + 1):
        trace["out"].append(step.local_outputs(policy.evaluation_halo()).cpu())
        loss = step.forward_backward(epoch, *recorded(epoch))
        step.all_reduce_gradients()
        if ctx.world_size > 1:
            dist.all_reduce(loss)
        trace["loss"].append(float(loss))
        trace["grads"].append({n: p.grad.detach().clone() for n, p in step.model.named_parameters()})
        step.optimizer.step()
        trace["epoch_metrics"].append(_epoch_metrics(strategy, ctx))
    strategy.finish()
    trace["bytes"] = dict(strategy.meter.bytes)
    return trace


def trace_pipeline(run: RootConfig, ctx: WorkerContext, job: JobData, *, trace_dir: str) -> None:
    """Train with the strategy's training halos tapped: per epoch and layer, the layer input's
    inner rows (``input``), the halo rows the strategy handed the layer (``used``), the gradient
    of those halo rows (``grad_halo``, what goes back to their owners) and the gradient the
    exchange gave the layer input (``grad_from_peers``). Written to ``<trace_dir>/rank<r>.pt``."""
    strategy = GraphParallel(run, ctx, job)
    graph = strategy.graph
    epochs: list[dict] = []
    training_view = strategy.policy.training_view

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

    for epoch in range(1, run.train.epochs + 1):
        epochs.append({})
        strategy.step.train(epoch, *tapped(epoch))
    strategy.finish()
    trace = {"rank": ctx.rank, "inner": graph.global_ids[: graph.num_inner],
             "halo": graph.global_ids[graph.num_inner:], "epochs": epochs}
    torch.save(trace, Path(trace_dir) / f"rank{ctx.rank}.pt")


def trace_job(tmp_path, name: str, *overrides: str, worker=trace_training) -> list[dict]:
    """Run a job under ``worker`` (a tracing worker of this module, which writes
    ``<trace_dir>/rank<r>.pt``) in ``tmp_path/name``; every rank's trace. One worker runs in
    this process, without a process group, on the config's device."""
    run = make_run(*overrides)
    trace_dir = tmp_path / name
    trace_dir.mkdir()
    traced = partial(worker, trace_dir=str(trace_dir))
    world = run.cluster.world_size
    if world == 1:
        device = torch.device("cuda", 0) if run.cluster.device == "cuda" else torch.device("cpu")
        traced(run, WorkerContext(0, 1, device), prepare_job_data(run, job_layout(run, 1).parts))
    else:
        api.run(run, traced)
    return [torch.load(trace_dir / f"rank{r}.pt") for r in range(world)]


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


def assert_same_traces(actual: list[dict], expected: list[dict], rtol: float, what: str = "") -> None:
    """Two jobs traced by :func:`trace_full_batch` trained alike: the global losses to ``rtol``, the
    evaluation counts exactly and every rank's gradients to ``rtol`` (against the expected job's
    same rank, or its last where it has fewer, e.g. one process)."""
    torch.testing.assert_close(torch.tensor(actual[0]["loss"]), torch.tensor(expected[0]["loss"]), rtol=rtol, atol=0)
    for epoch in range(len(actual[0]["loss"])):
        torch.testing.assert_close(actual[0]["counts"][epoch], expected[0]["counts"][epoch], rtol=0, atol=0)
        for rank, trace in enumerate(actual):
            assert_gradients_close(trace["grads"][epoch], expected[min(rank, len(expected) - 1)]["grads"][epoch], rtol,
                                   f"{what}rank {rank}, epoch {epoch + 1}")


def job_bytes(traces: list[dict], kind: str) -> int:
    return sum(t["bytes"].get(kind, 0) for t in traces)


def _record_steps(trace: dict, optimizer: torch.optim.Optimizer, model: torch.nn.Module) -> None:
    """Append the gradients every optimizer step uses to ``trace["grads"]``."""
    optimizer.register_step_pre_hook(lambda *_: trace["grads"].append(
        {n: p.grad.detach().clone() for n, p in model.named_parameters()}))


def _record_epoch(trace: dict, ctx: WorkerContext, loss: torch.Tensor, counts: torch.Tensor) -> None:
    """Append an epoch's loss and evaluation figures, summed over the ranks: the counts (each
    split's score numerator, denominator and nodes, compared exactly) and apart each split's
    summed evaluation loss (a float sum, whose order follows the partition)."""
    if ctx.world_size > 1:
        dist.all_reduce(counts)
        dist.all_reduce(loss)
    per_split = counts.view(len(SPLITS), EVAL_COUNTS)
    trace["counts"].append(per_split[:, [0, 1, 3]].reshape(-1))
    trace.setdefault("eval_loss", []).append(per_split[:, 2])
    trace["loss"].append(float(loss))


def trace_full_batch(run: RootConfig, ctx: WorkerContext, job: JobData, *, trace_dir: str) -> None:
    """Train any strategy built on the full-batch step through its own ``train_epoch`` and
    ``evaluate``, recording per epoch the global loss and evaluation counts (summed over
    ranks; the counts before the epoch's step) and the gradients the optimizer steps with.
    Written to ``<trace_dir>/rank<r>.pt``."""
    strategy = strategy_class(run.strategy.name)(run, ctx, job)
    trace: dict = {"loss": [], "grads": [], "counts": []}
    _record_steps(trace, strategy.step.optimizer, strategy.step.model)
    for epoch in range(1, run.train.epochs + 1):
        counts = strategy.evaluate()
        _record_epoch(trace, ctx, strategy.train_epoch(epoch), counts)
    strategy.finish()
    trace["bytes"] = dict(strategy.meter.bytes)
    torch.save(trace, Path(trace_dir) / f"rank{ctx.rank}.pt")


def trace_gnnpipe(run: RootConfig, ctx: WorkerContext, job: JobData, *, trace_dir: str = "") -> dict:
    """Train the pipeline, recording per epoch the global loss, the gradients of this rank's
    parameters as the optimizer steps, and the bytes by kind; written to
    ``<trace_dir>/rank<r>.pt`` (when set) and returned."""
    from gnntrain.strategies.gnnpipe.pipeline import GNNPipe

    strategy = GNNPipe(run, ctx, job)
    names = {id(p): n for n, p in strategy.model.named_parameters()}
    trace: dict = {"loss": [], "grads": [], "bytes": [], "stage": strategy.stage}
    strategy.optimizer.register_step_pre_hook(lambda *_: trace["grads"].append(
        {names[id(p)]: p.grad.detach().clone() for p in strategy.params}))
    for epoch in range(1, run.train.epochs + 1):
        strategy.meter.reset()
        loss = strategy.train_epoch(epoch)
        if ctx.world_size > 1:
            dist.all_reduce(loss)
        trace["loss"].append(float(loss))
        trace["bytes"].append(dict(strategy.meter.bytes))
    strategy.finish()
    if trace_dir:
        torch.save(trace, Path(trace_dir) / f"rank{ctx.rank}.pt")
    return trace


def ring_transfers(run: RootConfig, ctx: WorkerContext, job: JobData, *, trace_dir: str) -> None:
    """On every axis of the job's mesh, send this rank's world rank to the next rank of the
    axis and receive from the previous one, batched point-to-point; writes what arrived and
    the meter's bytes to ``<trace_dir>/rank<r>.pt``."""
    meter = CommMeter()
    received = {}
    for axis in ctx.mesh.mesh_dim_names:
        comm = Communicator.of_mesh_axis(ctx, axis, meter)
        nxt, prev = (comm.rank + 1) % comm.world_size, (comm.rank - 1) % comm.world_size
        payload = torch.full((3,), float(ctx.rank))
        buffer = torch.empty(3)
        received[axis] = comm.p2p_start([(nxt, payload)], [(prev, buffer)], "pipe_fwd").wait()[0].tolist()
    torch.save({"received": received, "bytes": dict(meter.bytes), "wait": dict(meter.wait_s)},
               Path(trace_dir) / f"rank{ctx.rank}.pt")


def exchanges_in_flight(run: RootConfig, ctx: WorkerContext, job: JobData, *, trace_dir: str) -> None:
    """On a communicator whose gloo all-to-alls post receives first (as over a network): three all-to-alls with different row counts per peer (some none), all in flight before the
    first is waited for, waited for last to first; writes what each delivered, and the order in
    which the first one posted its receives and sends (``dist.irecv`` / ``dist.isend`` calls),
    to ``<trace_dir>/rank<r>.pt``."""
    posted = []
    irecv, isend = dist.irecv, dist.isend

    def recording(name, call):
        def post(tensor, peer, *args, **kwargs):
            posted.append((name, peer))
            return call(tensor, peer, *args, **kwargs)
        return post

    comm = Communicator(ctx.rank, ctx.world_size, ctx.device, None, CommMeter(), receives_first=True)
    world, me = ctx.world_size, ctx.rank
    rows = lambda p, q, i: (p + 2 * q + i) % 3  # noqa: E731 - rows p sends q in exchange i
    dist.irecv, dist.isend = recording("recv", irecv), recording("send", isend)
    try:
        flights = []
        for i in range(3):
            send_splits = [rows(me, q, i) for q in range(world)]
            send = torch.cat([torch.full((rows(me, q, i), 2), 100.0 * i + 10 * me + q) for q in range(world)])
            flights.append(comm.all_to_all_start(send, send_splits, [rows(p, me, i) for p in range(world)], "halo_fwd"))
            if i == 0:
                flights[0].waiter.join()
                first_posted = list(posted)
        delivered = [flight.wait() for flight in reversed(flights)][::-1]
    finally:
        dist.irecv, dist.isend = irecv, isend
    torch.save({"delivered": delivered, "posted": first_posted}, Path(trace_dir) / f"rank{ctx.rank}.pt")


def trace_minibatch(run: RootConfig, ctx: WorkerContext, job: JobData, *, trace_dir: str) -> None:
    """Train a mini-batch strategy through its own ``train_epoch`` and ``evaluate``, recording per
    epoch the global loss, evaluation counts (summed over ranks), bytes by kind and epoch
    metrics, and the gradients of every optimizer step (all-reduced). Written to
    ``<trace_dir>/rank<r>.pt``."""
    strategy = strategy_class(run.strategy.name)(run, ctx, job)
    trace: dict = {"loss": [], "grads": [], "counts": [], "bytes": [], "metrics": []}
    _record_steps(trace, strategy.optimizer, strategy.model)
    for epoch in range(1, run.train.epochs + 1):
        strategy.meter.reset()
        loss = strategy.train_epoch(epoch)
        trace["bytes"].append(dict(strategy.meter.bytes))
        trace["metrics"].append(_epoch_metrics(strategy, ctx))
        _record_epoch(trace, ctx, loss, strategy.evaluate())
    strategy.finish()
    torch.save(trace, Path(trace_dir) / f"rank{ctx.rank}.pt")


def save_variance_coefficients(run: RootConfig, ctx: WorkerContext, job: JobData, *, trace_dir: str) -> None:
    """Build an adaptive AdaQP strategy and write its plan's ``c_k`` per layer and direction,
    with the global ids of the halo rows (forward order) and of the sent rows (backward order)."""
    strategy = GraphParallel(run, ctx, job)
    graph = strategy.graph
    trace = {"coefficients": strategy.policy.plan.coefficients, "send_splits": graph.send_splits,
             "recv_splits": graph.recv_splits, "halo": graph.global_ids[graph.num_inner:].cpu(),
             "sent": graph.global_ids[graph.send_index].cpu()}
    torch.save(trace, Path(trace_dir) / f"rank{ctx.rank}.pt")


def gloo_all_to_all_moves(rank: int, dtype: torch.dtype, port: int, moved: object) -> None:
    """Spawned: whether gloo's ``all_to_all_single`` moves a ``dtype`` tensor between two
    processes (rank 0 stores the answer in ``moved``, a shared value)."""
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    sent = torch.ones(4, dtype=dtype)
    try:
        dist.all_to_all_single(torch.empty_like(sent), sent, [2, 2], [2, 2])
        if rank == 0:
            moved.value = 1
    except RuntimeError:
        if rank == 0:
            moved.value = 0
    finally:  # a process leaving with its gloo group alive can abort in gloo's threads' teardown
        dist.destroy_process_group()
