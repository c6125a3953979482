"""The predictor's compute from each method's measured steps (:mod:`gnntrain.predict.step_fit`,
:mod:`gnntrain.job.step_profile`): the fit's arithmetic, its cached file refused in one line
where it is not what it claims, and the fitted compute against the runs it was fitted on and
a proxy held out of the fit with four times the largest fitted proxy's edges."""

from __future__ import annotations

import json
import os
import statistics
from pathlib import Path

import pytest

from gnntrain.cost.compute import Costs
from gnntrain.cost.profile import profile_for
from gnntrain.cost.shape import partition_shape
from gnntrain.errors import ConfigError
from gnntrain.job import api
from gnntrain.job.step_profile import PROFILED, _proxy, measured_compute, samples_on, step_fit
from gnntrain.predict.predictor import written
from gnntrain.predict.step_fit import (FORMAT, PROFILE_EPOCHS, PROXY_NODES, WARM_EPOCHS, Sample, StepFit, fit,
                                       load, save)

TARGET = ["strategy=vanilla", "cluster.world_size=2", "dataset=synthetic", "dataset.num_nodes=2000",
          "dataset.avg_degree=8", "model=sage", "model.hidden=32", "model.layers=2"]


def test_the_fit_recovers_a_fixed_cost_per_span_and_a_rate() -> None:
    truth = StepFit(0.5e-3, 1.25, ())
    samples = [Sample(spans, counted, truth.predicted(Sample(spans, counted, 0.0)))
               for spans in (4.0, 8.0) for counted in (1e-3, 4e-3, 16e-3)]
    fitted = fit(samples)
    assert fitted.dispatch_s == pytest.approx(0.5e-3, rel=1e-9) and fitted.rate == pytest.approx(1.25, rel=1e-9)
    assert fitted.residual == pytest.approx(0.0, abs=1e-9)
    assert fitted.price(2e-3) == pytest.approx(0.5e-3 + 1.25 * 2e-3)


def _written_fit(path: Path, **changes) -> Path:
    fields = {"version": FORMAT, "key": {"strategy": {"name": "vanilla", "offset": -1}}, "dispatch_s": 1e-4,
              "rate": 1.0, "samples": [{"spans": 4.0, "counted": 1e-3, "measured": 1.4e-3}], **changes}
    path.write_text(json.dumps(fields))
    return path


def test_a_cached_fit_is_read_back(tmp_path: Path) -> None:
    saved = StepFit(2e-4, 0.9, (Sample(4.0, 1e-3, 1.7e-3),))
    save(tmp_path / "fit.json", {"strategy": {"name": "vanilla"}}, saved)
    assert load(tmp_path / "fit.json") == saved
    assert load(_written_fit(tmp_path / "negative-key.json")).rate == 1.0  # a key's numbers are settings, not costs


@pytest.mark.parametrize("changes, message", [
    ({"dispatch_s": float("nan")}, "dispatch_s=nan; valid: finite numbers >= 0"),
    ({"rate": -1.0}, "rate=-1.0; valid: finite numbers >= 0"),
    ({"samples": [{"spans": 4.0, "counted": float("inf"), "measured": 1.0}]}, "counted=inf"),
    ({"version": 99}, "version 99; valid: 1"),
    ({"samples": [{"spans": 4.0}]}, "malformed samples"),
])
def test_a_bad_fit_file_is_refused_in_one_line(tmp_path: Path, changes: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace("[", r"\[")) as refused:
        load(_written_fit(tmp_path / "fit.json", **changes))
    assert "\n" not in str(refused.value)


def test_a_link_or_a_huge_fit_file_is_refused(tmp_path: Path) -> None:
    target = _written_fit(tmp_path / "real.json")
    os.symlink(target, tmp_path / "link.json")
    with pytest.raises(ConfigError, match="valid: a regular file, not a link"):
        load(tmp_path / "link.json")
    os.mkfifo(tmp_path / "fifo.json")
    with pytest.raises(ConfigError, match="not a regular file; valid: a regular file"):
        load(tmp_path / "fifo.json")  # refused at once, not read by waiting for a writer
    (tmp_path / "huge.json").write_text(" " * (2 << 20))
    with pytest.raises(ConfigError, match="bytes; valid: at most"):
        load(tmp_path / "huge.json")


@pytest.fixture(scope="module")
def fitted_vanilla() -> tuple:
    """vanilla's steps profiled for a 2000-node graph: its run, shape, profile and fit."""
    run = api.check(api.compose(TARGET))
    shape = partition_shape(run, 2)
    profile = profile_for("cpu", run.partition.cache_dir)
    return run, shape, profile, step_fit(TARGET, run, shape, profile, refit=True)


def _steady(compute: dict) -> float:
    """The mean over ranks and steady epochs of a map (rank, epoch) -> seconds."""
    return statistics.fmean(s for (_, e), s in compute.items() if e > WARM_EPOCHS)


def _proxy_of(nodes: int, fitted_vanilla: tuple) -> tuple[list[str], float, set[float]]:
    """A proxy of ``nodes`` nodes of the target: its overrides, its fitted compute per steady
    epoch (mean over ranks) and the counted seconds its ranks' epochs are written with."""
    run, shape, profile, step = fitted_vanilla
    overrides, proxy, drawn = _proxy(TARGET[:2] + TARGET[5:], shape, nodes)
    costs = Costs(proxy, drawn.features, drawn.classes, profile)
    priced = written(proxy, drawn, costs, epochs=PROFILE_EPOCHS, step_fit=step)
    counted = written(proxy, drawn, costs, epochs=PROFILE_EPOCHS)
    return (overrides, _steady({k: s for k, (_, s) in priced.epoch_compute().items()}),
            {c * counted.repeats for (_, e), (_, c) in counted.epoch_compute().items() if e > WARM_EPOCHS})


def _scatter(samples: tuple[Sample, ...]) -> float:
    """The median relative deviation of an epoch's measured compute from the mean of its rank's
    steady epochs on the same proxy (samples of one rank and proxy share their counted seconds, to
    rounding)."""
    runs: dict[str, list[float]] = {}
    for sample in samples:
        runs.setdefault(f"{sample.counted:.9g}", []).append(sample.measured)
    return statistics.median(abs(m / statistics.fmean(ms) - 1) for ms in runs.values() for m in ms)


@pytest.mark.slow
def test_the_fitted_compute_equals_the_profiled_runs_own(fitted_vanilla: tuple) -> None:
    """The largest proxy's steady epochs as the fit prices them against the same epochs as its
    profiled run measured them (the fit's own samples of that proxy), and the line through all
    three proxies adding at most 2 points to the epochs' own scatter: one epoch's measurement
    scatters by 2-3% here and by more on a shared host (an epoch of 9.1 among 5.4 ms in a CI log,
    a fit's residual of 6.2% there), so the residual is held to the measurements' noise, not to a
    fixed figure."""
    step = fitted_vanilla[-1]
    assert step.residual <= _scatter(step.samples) + 0.02, (step.residual, _scatter(step.samples), step)
    _, predicted, counted = _proxy_of(max(PROXY_NODES), fitted_vanilla)
    own = [s.measured for s in step.samples if any(s.counted == pytest.approx(c, rel=1e-9) for c in counted)]
    assert len(own) == 2 * (PROFILE_EPOCHS - WARM_EPOCHS)
    assert predicted == pytest.approx(statistics.fmean(own), rel=0.05), (predicted, own)


@pytest.fixture(scope="module")
def fitted_side_by_side(fitted_vanilla: tuple) -> tuple:
    """vanilla's step model fitted on its proxies run twice, in order and reversed (4000, 8000,
    16000, 16000, 8000, 4000 nodes), so that a drift of this host's speed during the profile
    cancels out of the rate. This host's speed drifts by up to 15% between measurements a minute
    apart (the 16,000-node proxy's steady epoch measured 9.7 and 11.2 ms in two fits one after the
    other, and back-to-back runs of it within 2%), and a fit from one pass of the proxies takes
    any drift during it into its rate: the model is tested here, the one-pass profile's spread is
    stated in docs/testing.md."""
    run, shape, profile, _ = fitted_vanilla
    kept = TARGET[:2] + TARGET[5:]
    samples = [sample for nodes in PROXY_NODES + PROXY_NODES[::-1] for sample in samples_on(kept, shape, nodes, profile)]
    return run, shape, profile, fit(samples)


@pytest.mark.slow
def test_the_fit_extends_to_a_proxy_with_four_times_the_edges(fitted_side_by_side: tuple) -> None:
    """The held-out proxy (4x the largest fitted proxy's nodes and edges) against the largest
    fitted proxy, predicted and measured side by side: run interleaved, twice each, their ratio is
    the model's extension, whatever this host's speed at the time."""
    fitted, held_out = (_proxy_of(n, fitted_side_by_side) for n in (max(PROXY_NODES), 4 * max(PROXY_NODES)))
    measured = {name: [] for name in ("fitted", "held_out")}
    for _ in range(2):
        for name, (overrides, _, _) in (("fitted", fitted), ("held_out", held_out)):
            measured[name].append(_steady(measured_compute(overrides)))
    predicted_ratio = held_out[1] / fitted[1]
    measured_ratio = statistics.fmean(measured["held_out"]) / statistics.fmean(measured["fitted"])
    assert predicted_ratio == pytest.approx(measured_ratio, rel=0.10), (predicted_ratio, measured)


def test_profiled_runs_set_their_own_dataset_clock_and_epochs() -> None:
    assert "cluster.virtual_compute=alone" in PROFILED and "cluster.trace=true" in PROFILED
