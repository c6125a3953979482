"""GNNPipe (``strategy=gnnpipe``): with one chunk, pipeline and hybrid runs equal
single-process full-graph training for every model, dropout (0.5) included; with several
chunks the result depends only on the chunks and their order, not on how the layers are staged
or a stage is split; the
bytes between stages are 2 (S-1) N H per epoch (twice for GCNII, whose h0 travels too),
whatever the number of chunks; hybrid halo bytes are the graph-parallel accounting of the
group's split; bad layouts are refused before any worker starts."""

from __future__ import annotations

import pytest
import torch

from conftest import make_run
from dist_helpers import assert_gradients_close, trace_full_batch, trace_gnnpipe, trace_job
from gnntrain.job import api
from gnntrain.data.job import prepare_job_data
from gnntrain.data.chunks import split_chunks
from gnntrain.errors import ConfigError
from gnntrain.models import MODELS
from gnntrain.data.local_graph import build_local_graph
from gnntrain.job.validation import job_layout
from gnntrain.models import build_model
from gnntrain.models.gcn import GCNLayer
from gnntrain.models.gcnii import GCNIILayer

EPOCHS = 3
COMMON = ("model.layers=4", "model.hidden=16", "model.dropout=0.5", "train.dtype=float64",
          f"train.epochs={EPOCHS}", "dataset.num_nodes=600", "seed=3")


def _run(tmp_path, name: str, world: int, *overrides: str) -> list[dict]:
    worker = trace_gnnpipe if "strategy=gnnpipe" in overrides else trace_full_batch
    return trace_job(tmp_path, name, *COMMON, *overrides, f"cluster.world_size={world}", worker=worker)


SLOW = pytest.mark.slow


@pytest.mark.parametrize("model", [m if m == "gcn" else pytest.param(m, marks=SLOW) for m in MODELS])
@pytest.mark.parametrize("stages,group", [pytest.param(2, 1, marks=SLOW), (2, 2)])
def test_one_chunk_equals_single_process(model: str, stages: int, group: int, tmp_path) -> None:
    reference = _run(tmp_path, "single", 1, f"model={model}")[0]
    traces = _run(tmp_path, "pipe", stages * group, f"model={model}", "strategy=gnnpipe", "strategy.chunks=1",
                  f"strategy.stages={stages}", f"strategy.graph_parallel={group}")
    torch.testing.assert_close(torch.tensor(traces[0]["loss"]), torch.tensor(reference["loss"]), rtol=1e-9, atol=0)
    for epoch in range(EPOCHS):
        grads = {name: g for t in traces for name, g in t["grads"][epoch].items()}
        assert grads.keys() == reference["grads"][epoch].keys(), "every parameter is trained by some stage"
        assert_gradients_close(grads, reference["grads"][epoch], 1e-9, f"epoch {epoch + 1}")
        for t in traces:
            for name, g in t["grads"][epoch].items():
                torch.testing.assert_close(g, grads[name], rtol=0, atol=0, msg=f"members disagree on {name}")


@pytest.mark.slow
def test_four_stages_with_one_chunk_equal_single_process(tmp_path) -> None:
    reference = _run(tmp_path, "single", 1, "model=gcnii")[0]
    traces = _run(tmp_path, "pipe", 4, "model=gcnii", "strategy=gnnpipe", "strategy.chunks=1")
    torch.testing.assert_close(torch.tensor(traces[0]["loss"]), torch.tensor(reference["loss"]), rtol=1e-9, atol=0)


@pytest.mark.slow
@pytest.mark.parametrize("model,tricks", [("gcnii", ()), pytest.param("sage", ("strategy.detach_history=false",
                                                                                "strategy.fixed_history=false"),
                                                                       marks=SLOW)])
def test_many_chunks_depend_only_on_chunks_and_order(model: str, tricks: tuple[str, ...], tmp_path) -> None:
    common = (f"model={model}", "strategy=gnnpipe", "strategy.chunks=8", "strategy.shuffle=false",
              "strategy.alpha=2", "train.epochs=5", *tricks)
    losses = {}
    for name, world, layout in [("s1", 1, ("strategy.stages=1",)), ("s2", 2, ()), ("s4", 4, ()),
                                ("s2g2", 4, ("strategy.stages=2", "strategy.graph_parallel=2"))]:
        losses[name] = torch.tensor(_run(tmp_path, name, world, *common, *layout)[0]["loss"])
    reference = _run(tmp_path, "single", 1, f"model={model}", "train.epochs=5")[0]["loss"]
    for name, loss in losses.items():
        torch.testing.assert_close(loss, losses["s1"], rtol=1e-9, atol=0, msg=lambda m: f"{name}: {m}")
    assert losses["s1"][-1] < losses["s1"][0], "training should reduce the loss"
    assert not torch.allclose(losses["s1"][1:], torch.tensor(reference[1:]), rtol=1e-6), \
        "with 8 chunks historical rows must change the result"


@pytest.mark.parametrize("model", ["gcn", "gcnii"])
def test_reading_other_chunks_where_they_lie_equals_gathering_them(model: str, tmp_path, monkeypatch) -> None:
    """Layers that aggregate their rows by a fixed matrix read the other chunks' rows from the
    message table through a split matrix and hand their gradient back in one product per chunk;
    gathering those rows into each chunk's input instead, with per-row gradient hooks, gives the
    same epochs (GCN 32 -> 64 -> 64 -> 64 -> classes: its first layer aggregates the input
    features first, its hidden layers the hidden rows; GCNII: every convolution)."""
    common = (f"model={model}", "model.hidden=64", "strategy=gnnpipe", "strategy.chunks=8", "strategy.stages=1",
              "train.epochs=4", "strategy.alpha=2")
    split = _run(tmp_path, "split", 1, *common)[0]
    monkeypatch.setattr(GCNIILayer, "aggregates_rows_by_operator", lambda self, transform: False)
    monkeypatch.setattr(GCNLayer, "aggregates_rows_by_operator", lambda self, transform: False)
    gathered = _run(tmp_path, "gathered", 1, *common)[0]
    torch.testing.assert_close(torch.tensor(split["loss"]), torch.tensor(gathered["loss"]), rtol=1e-9, atol=0)
    for epoch, (got, want) in enumerate(zip(split["grads"], gathered["grads"])):
        assert_gradients_close(got, want, 1e-9, f"epoch {epoch + 1}")


def _element_bytes() -> int:
    return torch.float64.itemsize


@pytest.mark.slow
@pytest.mark.parametrize("chunks", [4, pytest.param(12, marks=SLOW)])
def test_pipeline_moves_two_s_minus_one_n_h_per_epoch(chunks: int, tmp_path) -> None:
    stages, n, h = 4, 600, 16
    for model, factor in (("gcn", 1), ("gcnii", 2)):
        traces = _run(tmp_path, f"{model}{chunks}", stages, f"model={model}", "strategy=gnnpipe",
                      f"strategy.chunks={chunks}")
        per_direction = (stages - 1) * n * h * _element_bytes() * factor
        for epoch in range(EPOCHS):
            total = {k: sum(t["bytes"][epoch].get(k, 0) for t in traces) for k in ("pipe_fwd", "pipe_bwd")}
            assert total == {"pipe_fwd": per_direction, "pipe_bwd": per_direction}, f"{model}, epoch {epoch + 1}"
            assert not any(k.startswith(("allreduce", "halo")) for t in traces for k in t["bytes"][epoch])
        assert sum(t["bytes"][0].get("history_pipe_fwd", 0) for t in traces) == per_direction, \
            "epoch 1 also carries the pass that fills the history"


@pytest.mark.slow
def test_hybrid_halo_bytes_are_the_groups_graph_parallel_accounting(tmp_path) -> None:
    stages, group, chunks = 2, 2, 6
    traces = _run(tmp_path, "hybrid", stages * group, "model=gcn", "strategy=gnnpipe", f"strategy.stages={stages}",
                  f"strategy.graph_parallel={group}", f"strategy.chunks={chunks}")
    run = make_run(*COMMON, "model=gcn", "strategy=gnnpipe", f"strategy.chunks={chunks}")
    job = prepare_job_data(run, chunks)
    member = split_chunks(job.data, job.part, chunks, group, run.seed)
    halo_rows = sum(build_local_graph(job.data, member, g, group).num_halo for g in range(group))
    model = build_model(run.model, job.data.num_features, job.data.num_classes)
    widths, size = model.input_widths, _element_bytes()
    params = sum(p.numel() for p in model.parameters())
    for epoch in range(EPOCHS):
        total = {k: sum(t["bytes"][epoch].get(k, 0) for t in traces) for k in ("halo_fwd", "halo_bwd", "allreduce",
                                                                                 "pipe_fwd")}
        assert total == {"halo_fwd": halo_rows * sum(widths) * size, "halo_bwd": halo_rows * sum(widths[1:]) * size,
                         "allreduce": group * params * size,
                         "pipe_fwd": (stages - 1) * job.data.num_nodes * 16 * size}, f"epoch {epoch + 1}"


@pytest.mark.parametrize("overrides,message", [
    (("strategy.stages=3",), r"strategy.stages=3 x strategy.graph_parallel=1 = 3 ranks, but the job has 4 workers"),
    (("model.layers=2",), r"strategy.stages=4 exceeds model.layers=2"),
    (("strategy.graph_parallel=3",), r"strategy.stages=1 x strategy.graph_parallel=3 = 3 ranks"),
    (("model=sage", "model.layers=4", "model.norm=batch"), r"model.norm=batch with strategy.chunks=16"),
])
def test_bad_layouts_are_refused_before_workers_start(overrides: tuple[str, ...], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        job_layout(make_run("strategy=gnnpipe", "cluster.world_size=4", *overrides), 4)


def test_more_chunks_than_nodes_is_refused() -> None:
    run = make_run("strategy=gnnpipe", "strategy.chunks=700", "dataset.num_nodes=600")
    with pytest.raises(ConfigError, match=r"strategy.chunks=700 asks for 700 parts .* 600 nodes; valid: at most 600"):
        api.run(run, trace_gnnpipe)
