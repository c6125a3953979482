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
from gnntrain.job.step_profile import PROFILED, _proxy, measured_compute, step_fit
from gnntrain.predict.predictor import written
from gnntrain.predict.step_fit import FORMAT, PROXY_NODES, Sample, StepFit, fit, load, save

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


def _predicted_and_measured(proxy_nodes: int, fitted_vanilla: tuple) -> tuple[float, float]:
    """The fitted compute per steady epoch (mean over ranks) of a proxy, and its run's."""
    run, shape, profile, step = fitted_vanilla
    overrides, proxy, drawn = _proxy(TARGET[:2] + TARGET[5:], shape, proxy_nodes)
    line = written(proxy, drawn, Costs(proxy, drawn.features, drawn.classes, profile), epochs=8, step_fit=step)
    predicted = statistics.fmean(s for (_, e), (_, s) in line.epoch_compute().items() if e > 4)
    measured = statistics.fmean(s for (_, e), s in measured_compute(overrides).items() if e > 4)
    return predicted, measured


@pytest.mark.slow
def test_the_fitted_compute_equals_the_profiled_runs_own(fitted_vanilla: tuple) -> None:
    step = fitted_vanilla[-1]
    assert step.residual < 0.05, step
    predicted, measured = _predicted_and_measured(max(PROXY_NODES), fitted_vanilla)
    assert predicted == pytest.approx(measured, rel=0.05), (predicted, measured)


@pytest.mark.slow
def test_the_fit_extends_to_a_proxy_with_four_times_the_edges(fitted_vanilla: tuple) -> None:
    predicted, measured = _predicted_and_measured(4 * max(PROXY_NODES), fitted_vanilla)
    assert predicted == pytest.approx(measured, rel=0.10), (predicted, measured)


def test_profiled_runs_set_their_own_dataset_clock_and_epochs() -> None:
    assert "cluster.virtual_compute=alone" in PROFILED and "cluster.trace=true" in PROFILED
