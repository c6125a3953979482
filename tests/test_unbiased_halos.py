"""Sampled (BNS-GCN) and quantized (AdaQP) halos are unbiased: with one layer (the output is
linear in the halo rows) and lr 0, the mean of the training outputs over many epochs
approaches the full-precision, full-graph output with the error of a mean of independent
draws. This also shows the kept or quantized rows are the right rows, correctly weighted."""

from __future__ import annotations

import pytest
import torch

from dist_helpers import trace_job

EPOCHS = 100


@pytest.mark.slow
@pytest.mark.parametrize("model,strategy", [
    pytest.param("gcn", ("strategy=bns", "strategy.p=0.5"), marks=pytest.mark.slow),
    pytest.param("sage", ("strategy=bns", "strategy.p=0.5"), marks=pytest.mark.slow),
    pytest.param("film", ("strategy=bns", "strategy.p=0.5"), marks=pytest.mark.slow),
    ("gcn", ("strategy=adaqp", "strategy.assign=fixed", "strategy.bits=2")),
    pytest.param("sage", ("strategy=adaqp", "strategy.assign=uniform"), marks=pytest.mark.slow),
])
def test_mean_of_training_outputs_approaches_the_exact_output(model: str, strategy: tuple, tmp_path) -> None:
    common = (f"model={model}", "model.layers=1", "model.dropout=0", "train.lr=0", "cluster.world_size=3",
              "dataset.num_nodes=600", "seed=2")
    exact = trace_job(tmp_path, "exact", *common, "train.epochs=1", "strategy=vanilla")
    drawn = trace_job(tmp_path, "drawn", *common, f"train.epochs={EPOCHS}", *strategy)
    for e, d in zip(exact, drawn):
        target = e["train_out"][0]
        samples = torch.stack(d["train_out"])
        single_error = (samples - target).norm(dim=(1, 2)).mean()
        mean_error = (samples.mean(0) - target).norm()
        assert single_error > 0
        assert mean_error < 0.25 * single_error, (float(mean_error), float(single_error))
