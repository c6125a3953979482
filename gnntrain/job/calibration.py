"""Calibrating a modelled link to a communication share (``network.calibrate_share``).

CPU compute here is roughly 100x slower than the papers' GPUs, so a physically equal link
gives the wrong balance between computing and communicating. Calibration picks the link speed
at which the *baseline* spends the share ``s`` of its epoch in exposed communication, as the
paper reports for its setting; every method is then compared under that one link. The
baseline is the run's family's (:func:`gnntrain.strategies.baseline_of`: ``vanilla`` for the
graph-parallel, data-parallel and pipeline strategies, whose papers quote graph parallelism's
share; ``minibatch``, DGL's, for the mini-batch family, as HopGNN Sec. 3.1 quotes DGL's time
gathering features), or the strategy ``network.calibrate_against`` names. It runs with the
run's values of the options that shape the setting's work (:func:`~gnntrain.config.schema.workload`:
batch size, fan-out) and its own defaults for the rest (so a method's knobs, 16-bit halos among
them, never change the link), always at seed :data:`PROBE_SEED`: the link belongs to the
setting, so every seed and every method of a sweep runs under the same one.

The share is the *communication share* a paper quotes: by default (``network.calibrate_traffic=
data``) exposed ``data`` communication over the epoch, all-reduces apart (:attr:`EpochRecord.comm_time
<gnntrain.engine.metrics.EpochRecord.comm_time>`), as PipeGCN, BNS-GCN, AdaQP and HopGNN define
theirs; with ``training``, every training category's, as GNNPipe's Table 1 counts its baseline's
communication.

One probe of ``network.probe_epochs`` epochs (the first excluded) runs the baseline in the run's
setting (its workload keys, :func:`gnntrain.config.keys.setting`: dataset, model, workers,
partition, precision and optimizer; every other key at its default) under the preset's links on
the virtual clock, traced (:mod:`gnntrain.timing.trace`). Its trace is then replayed
(:mod:`gnntrain.timing.replay`) with every bandwidth of the cluster scaled by ``f``, and ``f``
found by bisection on its logarithm where the replayed share is ``s`` (the share falls as the
links speed up): the very model a run under the scaled link is timed by, so no probe runs again
under it. The share reached is recorded with the calibration (``network.calibration`` in
``summary.json``: ``against``, ``share``, ``reached_share``, ``scale``, ``rechecks``, the
probe's figures). A share that no bandwidth gives (the latency, the host's per-message costs
and the waits for slower peers already take more; or the all-reduces, which slow down with the
link too, cap it) is refused in one line.

The result is cached per setting and machine (``<partition.cache_dir>/calibration/``), so every
job of a sweep runs under the same link; delete the file to measure from scratch. A machine's
speed changes with what else it runs, so a cached link is re-checked at the start of every
sweep (or single run) that uses it: one probe under it, and where the share it reaches is more
than :data:`TOLERANCE` off, the bandwidth is solved again from that probe's trace, the cache
updated; the sweep's other jobs then use it as it is, and so does a sweep with
``network.recheck=false`` (a build's method sweeps, after their baseline's sweep in the same
round has re-checked the link).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import socket
from dataclasses import replace
from pathlib import Path
from typing import Any

from gnntrain.storage.cache import cache_folder
from gnntrain.timing.cluster import scaled
from gnntrain.timing.epoch import EpochTiming
from gnntrain.timing.kinds import TRAINING_CATEGORIES
from gnntrain.config import flatten
from gnntrain.config.keys import keys_playing, plays, setting
from gnntrain.config.schema import PLACE, ROLE, WORKLOAD, RootConfig, typed
from gnntrain.config.typed import plain
from gnntrain.engine.loop import run_training
from gnntrain.report.traced import Traced
from gnntrain.errors import ConfigError, first_line, warn
from gnntrain.job.launch.join import under_torchrun
from gnntrain.job.launch.start import launch
from gnntrain.strategies import baseline_of, schema_of

PROBE_SEED = 0
"""The seed every probe runs at, whatever the run's (model initialisation, dropout, sampling)."""
TOLERANCE = 0.03
"""How far from the asked share a re-check's probe under a cached link may land before the link is
solved again."""
_CHECKED: set[str] = set()
"""The cached calibrations this process has made or re-checked: the jobs of a sweep after its
first trust them (Hydra's basic launcher runs a sweep's jobs in one process)."""


def calibrated(run: RootConfig) -> RootConfig:
    """``run`` with its network's bandwidths calibrated, if ``network.calibrate_share`` asks for
    it (the config unchanged otherwise); prints the result."""
    net = run.network
    share = net.calibrate_share
    if share is None:
        return run
    if under_torchrun():
        raise ConfigError("network.calibrate_share runs a local probe; under torchrun pass the bandwidth a local "
                          "run printed instead: network.bandwidth_gbps=<Gbit/s>")
    baseline = probe_strategy(run)
    path = cache_folder(run.partition.cache_dir, "calibration") / f"{_setting_key(run, baseline)}.json"
    cached = _read_cached(path)
    if cached is not None and (str(path) in _CHECKED or not net.recheck):
        result = cached
    elif cached is not None:
        probe = _probe(run, baseline, cached["scale"], "recheck")
        reached = _share(probe.steady(probe.under(scaled(run.network, cached["scale"]))), run)
        off = abs(reached - share) > TOLERANCE
        print(f"network: the cached link reaches {baseline['name']} communication share {reached:.3f} now "
              f"(target {share:g}){'; calibrating again from its trace' if off else ''}", flush=True)
        result = {"probe_scale": cached["scale"], **cached, "reached_share": reached,
                  "rechecks": cached.get("rechecks", 0) + 1}
        if off:
            result.update(_solve(probe, run, cached["scale"]))
        _store(path, result)
    else:
        print(f"network: calibrating {net.name} to {baseline['name']} communication share {share:g} "
              f"(a {net.probe_epochs}-epoch traced {baseline['name']} probe, replayed)", flush=True)
        result = {**_solve(_probe(run, baseline, 1.0, "preset"), run, 1.0), "against": baseline["name"], "rechecks": 0}
        _store(path, result)
    _CHECKED.add(str(path))
    link = scaled(net, result["scale"])
    print(f"network: calibrated to {result['against']} communication share {share:g} (reached "
          f"{result['reached_share']:.3f}): {net.name} bandwidths x {result['scale']:.4g} = "
          f"{link.bandwidth_gbps:.4g} Gbit/s (probe: compute {result['compute_s'] * 1e3:.1f} ms, link busy "
          f"{result['link_busy_s'] * 1e3:.2f} ms under its link, x {result['probe_scale']:.4g}; {path})", flush=True)
    return replace(run, network=replace(link, calibration=result))


CACHED_KEYS = ("scale", "reached_share", "against", "compute_s", "link_busy_s")
"""What a cached calibration holds (:func:`_store`'s result)."""


def _read_cached(path: Path) -> dict | None:
    """The calibration cached at ``path``; None where there is none or it is damaged (not JSON,
    or without its figures: said in a warning, and the link is calibrated again)."""
    if not path.exists():
        return None
    try:
        cached = json.loads(path.read_text())
        lacking = [k for k in CACHED_KEYS if not isinstance(cached, dict) or k not in cached]
        if lacking or not isinstance(cached["scale"], (int, float)) or not cached["scale"] > 0:
            raise ValueError(f"lacks {', '.join(lacking)}" if lacking else f"holds scale {cached['scale']!r}")
    except (OSError, ValueError) as exc:
        warn(f"calibration cache {path} is damaged ({first_line(exc)}); calibrating again")
        return None
    return cached


def _store(path: Path, result: dict) -> None:
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(result, indent=2) + "\n")
    tmp.replace(path)


def probe_strategy(run: RootConfig) -> dict:
    """The strategy section the probes run, as plain data: the baseline, with the run's values of
    its workload options, :data:`PROBE_SEED`, and its own defaults for the others."""
    name = run.network.calibrate_against or baseline_of(run.strategy.name)
    section = {"name": name}
    for field in dataclasses.fields(schema_of(name)):
        if field.name == "name":
            continue
        if field.name == "seed":
            section["seed"] = PROBE_SEED
        elif field.metadata.get(ROLE) == WORKLOAD and hasattr(run.strategy, field.name):
            section[field.name] = getattr(run.strategy, field.name)
        else:
            section[field.name] = _default(field)
    return json.loads(json.dumps(section, default=str))


def _default(field: dataclasses.Field) -> Any:
    return field.default if field.default is not dataclasses.MISSING else field.default_factory()  # type: ignore[misc]


def _setting_key(run: RootConfig, baseline: dict) -> str:
    net = {k: v for k, v in plain(run.network).items() if k not in ("calibration", "calibrate_against", "recheck")}
    text = json.dumps({"setting": setting(flatten(plain(run))), "baseline": baseline, "network": net,
                       "host": socket.gethostname()}, sort_keys=True)
    return f"{run.dataset.name}-{baseline['name']}-{hashlib.sha1(text.encode()).hexdigest()[:12]}"


def _counted(run: RootConfig) -> tuple[str, ...]:
    """The categories whose exposed time the share counts (``network.calibrate_traffic``)."""
    return ("data",) if run.network.calibrate_traffic == "data" else TRAINING_CATEGORIES


def _share(epoch: EpochTiming, run: RootConfig) -> float:
    """The communication share of a probe's (replayed) epoch, of the traffic
    ``network.calibrate_traffic`` names."""
    return epoch.share(_counted(run))


def _kept_or_default(section: Any, prefix: str, kept: tuple[str, ...]) -> Any:
    """``section`` (a root section's dataclass) with every key that plays none of ``kept`` at its default."""
    return replace(section, **{f.name: _default(f) for f in dataclasses.fields(section)
                               if not plays(f"{prefix}{f.name}", kept)})


def probe_config(run: RootConfig, baseline: dict, scale: float, name: str) -> RootConfig:
    """The config of a probe: the run's setting and place keys, every other key of the root
    sections that have defaults at its default, the ``baseline`` strategy section, the network
    with its bandwidths scaled by ``scale``, ``network.probe_epochs`` epochs (the first a
    warm-up) evaluated once, :data:`PROBE_SEED`, no W&B, under the run dir's
    ``calibration_probe/<name>``."""
    kept = keys_playing(WORKLOAD, PLACE)
    defaults = {f.name: _kept_or_default(getattr(run, f.name), f"{f.name}.", kept)
                for f in dataclasses.fields(RootConfig)
                if f.metadata.get("schema") is not None and f.default_factory is not dataclasses.MISSING
                and not plays(f.name, kept)}
    epochs = run.network.probe_epochs
    probe = replace(run, **defaults)
    return replace(probe, strategy=typed(schema_of(baseline["name"]), baseline), seed=PROBE_SEED,
                   cluster=replace(probe.cluster, clock="virtual", trace=True),
                   network=replace(scaled(run.network, scale), calibrate_share=None),
                   train=replace(probe.train, epochs=epochs, warmup_epochs=1, eval_every=epochs),
                   wandb=replace(probe.wandb, mode="disabled"),
                   run_dir=str(Path(run.run_dir) / "calibration_probe" / name))


def _probe(run: RootConfig, baseline: dict, scale: float, name: str) -> Traced:
    """Run the baseline's traced probe (:func:`probe_config`) under the preset's links scaled by
    ``scale``; the traced run."""
    probe = probe_config(run, baseline, scale, name)
    launch(probe, run_training)
    return Traced(Path(probe.run_dir))


def _solve(probe: Traced, run: RootConfig, probed: float, steps: int = 60) -> dict:
    """The scale of the preset's bandwidths at which the probe's trace, replayed, spends the
    share asked (bisection on the scale's logarithm over ``probed`` / 1e6 to x 1e6)."""
    share = run.network.calibrate_share

    def at(scale: float) -> EpochTiming:
        return probe.steady(probe.under(scaled(run.network, scale)))

    slow, fast = probed * 1e-6, probed * 1e6
    most, least = _share(at(slow), run), _share(at(fast), run)
    if not least < share < most:
        raise ConfigError(f"network.calibrate_share={share} is out of reach: at any bandwidth {probe.summary.strategy}'s "
                          f"share stays within {least:.3f}-{most:.3f} in this setting (latency, the host's per-message "
                          "costs and waits for slower peers do not shrink with the link, and all-reduces slow down "
                          "with it); valid: a share in that range, or a smaller network.latency_us")
    for _ in range(steps):
        middle = (slow * fast) ** 0.5
        if _share(at(middle), run) > share:
            slow = middle
        else:
            fast = middle
    scale = (slow * fast) ** 0.5
    probe_epoch, solved = at(probed), at(scale)
    return {"share": share, "scale": scale, "reached_share": _share(solved, run), "compute_s": probe_epoch.compute_time,
            "link_busy_s": probe.summary.mean_link_busy_time_by_category.get("data", 0.0), "probe_scale": probed,
            "preset_bandwidth_gbps": run.network.bandwidth_gbps, "probe_epoch_s": probe_epoch.epoch_time,
            "epoch_s": solved.epoch_time, "solved_by": "replay"}
