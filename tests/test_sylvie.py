"""Sylvie (``strategy=sylvie``): at full precision and with no staleness (every epoch
synchronous) it is the synchronous baseline exactly, float64 with dropout; at one bit a halo row
costs a thirty-second of float32's plus its 4 bytes of minimum and scale, counted; with a
staleness bound the stale epochs send the same bytes as the fresh ones."""

from __future__ import annotations

import pytest

from conftest import make_run, train_records
from dist_helpers import assert_same_traces, trace_full_batch, trace_job
from gnntrain.errors import ConfigError
from gnntrain.job.validation import validate

EPOCHS = 3
COMMON = ("model=sage", "model.layers=3", "model.hidden=16", "model.dropout=0.5", f"train.epochs={EPOCHS}",
          "dataset.num_nodes=400", "seed=4", "cluster.world_size=2")


def test_sylvie_at_full_precision_without_staleness_is_vanilla(tmp_path) -> None:
    vanilla = trace_job(tmp_path, "vanilla", *COMMON, "train.dtype=float64", worker=trace_full_batch)
    sylvie = trace_job(tmp_path, "sylvie", *COMMON, "train.dtype=float64", "strategy=sylvie", "strategy.bits=32",
                       "strategy.sync_every=1", worker=trace_full_batch)
    assert_same_traces(sylvie, vanilla, 1e-12)
    for kind in ("halo_fwd", "halo_bwd"):
        assert sum(t["bytes"][kind] for t in sylvie) == sum(t["bytes"][kind] for t in vanilla)


@pytest.mark.parametrize("sync_every", [1, pytest.param(2, marks=pytest.mark.slow)])
def test_one_bit_halo_rows_cost_a_thirty_second_plus_their_scales(sync_every: int, tmp_path) -> None:
    """32 features and 16 hidden, multiples of 8: per row ``4 d`` bytes in float32, ``d / 8 + 4`` at one bit."""
    vanilla = train_records(tmp_path / "vanilla", *COMMON)
    sylvie = train_records(tmp_path / "sylvie", *COMMON, "strategy=sylvie", f"strategy.sync_every={sync_every}")
    widths = {"halo_fwd": (32, 16, 16), "halo_bwd": (16, 16)}
    for kind, layer_widths in widths.items():
        plain = vanilla[0]["comm_bytes_by_kind"][kind]
        rows = plain // (4 * sum(layer_widths))
        assert plain == rows * 4 * sum(layer_widths)
        for record in sylvie:
            assert record["comm_bytes_by_kind"][kind] == plain // 32 + 4 * rows * len(layer_widths), kind


def test_sylvie_refuses_a_width_the_codec_does_not_send() -> None:
    with pytest.raises(ConfigError, match=r"strategy.bits=3.*one of 1, 2, 4, 8, 32"):
        validate(make_run("strategy=sylvie", "strategy.bits=3"))
    with pytest.raises(ConfigError, match=r"strategy.sync_every=0.*>= 1"):
        validate(make_run("strategy=sylvie", "strategy.sync_every=0"))
