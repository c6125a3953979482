"""Rows through the models' dense maps (``projected_rows``): layers aggregate first or map first,
whichever is cheaper for the rows at hand (one rule for partitions, pipeline chunks and sampled
blocks); every strategy reports the rows it maps per epoch; GNNPipe maps each row about once
per layer and epoch, as Algorithm 1 does, where it once mapped every row each chunk read."""

from __future__ import annotations

import pytest
import torch

from conftest import batch_for, make_run, needs_real_data, train_records
from gnntrain.data.job import prepare_job_data
from gnntrain.data.local_graph import build_local_graph
from gnntrain.models import rows
from gnntrain.models.gat import GATLayer
from gnntrain.models.gcn import GCNLayer
from gnntrain.models.gnn import transform_first
from gnntrain.models.sage import SAGELayer
from gnntrain.strategies import METHODS

SETTINGS = {"bns": ["strategy.p=0.5"], "bes": ["strategy.p=0.5"], "dropedge": ["strategy.p=0.5"],
            "adaqp": ["strategy.assign=uniform"], "gnnpipe": ["strategy.chunks=4"]}
"""The settings each registered method runs with here (its defaults where it has none)."""
STRATEGIES = {name: SETTINGS.get(name, []) for name in METHODS}
FAST = ("vanilla", "gnnpipe", "p3")


def test_the_cheaper_order_is_chosen_from_the_rows_at_hand() -> None:
    """Square layers over many more sources than targets (a pipeline chunk's view) aggregate
    first; a narrowing layer over its own rows maps first; ties aggregate first."""
    assert not transform_first(sources=5 * 100, targets=100, entries=4000, in_dim=64, out_dim=64)
    assert transform_first(sources=100, targets=100, entries=4000, in_dim=64, out_dim=8)
    assert not transform_first(sources=100, targets=100, entries=4000, in_dim=64, out_dim=64)


@pytest.mark.parametrize("layer_class,mapped_first", [(GCNLayer, False), (SAGELayer, False), (GATLayer, True)])
def test_a_layer_counts_the_rows_through_its_map(layer_class: type, mapped_first: bool) -> None:
    """On a part with halo rows, a square GCN or SAGE layer maps its target rows (after
    aggregating), GAT every source row (its attention needs them mapped)."""
    data = prepare_job_data(make_run("dataset.num_nodes=400"), 1).data
    part = torch.arange(data.num_nodes) % 3
    graph = build_local_graph(data, part, 0, 3)
    layer = layer_class(data.num_features, data.num_features)
    rows.take()
    layer(graph.x, data.x[graph.global_ids[graph.num_inner:]], graph)
    assert rows.take() == (graph.num_local if mapped_first else graph.num_inner)


@pytest.mark.slow
@pytest.mark.parametrize("name", [pytest.param(n, marks=[] if n in FAST else pytest.mark.slow) for n in STRATEGIES])
def test_every_strategy_reports_the_rows_it_maps(name: str, tmp_path) -> None:
    records = train_records(tmp_path, f"strategy={name}", *STRATEGIES[name], *batch_for(name, 240), "dataset.num_nodes=400",
                            "train.epochs=2", "model=sage", "model.hidden=16")
    assert all(r["strategy_metrics"]["projected_rows"] > 0 for r in records)


@pytest.mark.slow
@needs_real_data
@pytest.mark.parametrize("model", ["gcn", "sage", "gat"])
def test_the_pipeline_maps_each_row_about_once_per_layer_and_epoch(model: str, tmp_path) -> None:
    """Squirrel, 2 stages, K = 16, 4 layers x 64: at most 2 N rows per layer and epoch after the
    first epoch (which also fills the history): N for the rows the epoch produces (the square
    layers aggregate first and map their targets) and, where a layer maps before aggregating
    (the narrowing output layer, GAT's attention), at most N more for the historical rows its
    chunks read. Mapping every row each chunk reads was 4.9 N."""
    records = train_records(tmp_path, "dataset=squirrel", f"model={model}", "model.layers=4", "model.hidden=64",
                            "strategy=gnnpipe", "strategy.chunks=16", "cluster.world_size=2", "train.epochs=2",
                            "train.eval_every=2")
    assert records[1]["strategy_metrics"]["projected_rows"] / (5201 * 4) <= 2.0
