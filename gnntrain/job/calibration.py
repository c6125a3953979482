"""Calibrating an emulated network to a communication share (``network.calibrate_share``).

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
communication (below, ``X`` and ``B`` are then those of every category and ``Y = B' = 0``). A probe of ``network.probe_epochs`` epochs (the first excluded) runs
the baseline in the run's setting (its workload keys, :func:`gnntrain.config.keys.setting`:
dataset, model, workers, partition, precision and optimizer; every other key at its default)
under the preset network, and measures per epoch the compute time ``C``, the exposed ``data``
communication ``X`` and the other categories' ``Y``, and within each the links' busy time
``B`` and ``B'`` (bytes on the wire / bandwidth); the rest, ``X - B`` and ``Y - B'`` (latency,
the real transfer, waiting for a slower peer), does not depend on the bandwidth. The baselines
overlap nothing, so with every bandwidth scaled by ``f`` the epoch is
``K + (B + B') / f`` with ``K = C + X - B + Y - B'``, and asking ``X - B + B / f`` to be the
share ``s`` of it gives

    f = (B (1 - s) - s B') / (s K - (X - B)).

A probe under the calibrated link measures the share reached; where it misses by more than
:data:`TOLERANCE`, the bandwidth is solved again from that probe, at most :data:`CORRECTIONS`
times. The last share reached is printed and recorded with the calibration
(``network.calibration`` in ``summary.json``: ``against``, ``share``, ``reached_share``,
``scale``, ``corrections``, ``rechecks``, the first probe's figures). The result is cached per
setting and machine (``<partition.cache_dir>/calibration/``), so every job of a sweep runs under
the same link; delete the file to measure from scratch. A machine's speed changes with what
else it runs, so a cached link is re-checked at the start of every sweep (or single run) that
uses it: one probe under it, and where the share it reaches is more than :data:`TOLERANCE` off,
corrections as above, the cache updated; the sweep's other jobs then use it as it is, and so
does a sweep with ``network.recheck=false`` (a build's method sweeps, after their baseline's
sweep in the same round has re-checked the link).
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
from gnntrain.timing.kinds import TRAINING_CATEGORIES
from gnntrain.config import flatten
from gnntrain.config.keys import keys_playing, plays, setting
from gnntrain.config.schema import PLACE, ROLE, WORKLOAD, NetworkConfig, RootConfig, typed
from gnntrain.config.typed import plain
from gnntrain.engine.loop import run_training
from gnntrain.engine.summary import RunSummary
from gnntrain.errors import ConfigError, first_line, warn
from gnntrain.job.launch.join import under_torchrun
from gnntrain.job.launch.start import launch
from gnntrain.strategies import baseline_of, schema_of

PROBE_SEED = 0
"""The seed every probe runs at, whatever the run's (model initialisation, dropout, sampling)."""
TOLERANCE = 0.03
"""How far from the asked share a probe under the calibrated link may land before a correction."""
CORRECTIONS = 2
"""Corrections at most: each solves again from the last probe (the waits that do not scale with the
bandwidth are measured anew under the slower link)."""
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
        reached = _probe(run, baseline, cached["scale"], "recheck")
        print(f"network: the cached link reaches {baseline['name']} communication share {_share(reached, run):.3f} now "
              f"(target {share:g}){'; calibrating again' if abs(_share(reached, run) - share) > TOLERANCE else ''}",
              flush=True)
        result = {**_corrected(run, baseline, cached, reached, "recalibrated"), "rechecks": cached.get("rechecks", 0) + 1}
        _store(path, result)
    else:
        print(f"network: calibrating {net.name} to {baseline['name']} communication share {share:g} "
              f"({net.probe_epochs}-epoch {baseline['name']} probes)", flush=True)
        result = _solve(_probe(run, baseline, 1.0, "preset"), run)
        reached = _probe(run, baseline, result["scale"], "calibrated_0")
        result = {**_corrected(run, baseline, result, reached, "calibrated"), "against": baseline["name"], "rechecks": 0}
        _store(path, result)
    _CHECKED.add(str(path))
    scaled = _scaled(net, result["scale"])
    print(f"network: calibrated to {result['against']} communication share {share:g} (reached "
          f"{result['reached_share']:.3f}): {net.name} bandwidths x {result['scale']:.4g} = "
          f"{scaled.bandwidth_gbps:.4g} Gbit/s (probe: compute {result['compute_s'] * 1e3:.1f} ms, "
          f"link busy {result['link_busy_s'] * 1e3:.2f} ms at the preset; {path})", flush=True)
    return replace(run, network=replace(scaled, calibration=result))


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


def _corrected(run: RootConfig, baseline: dict, result: dict, reached: RunSummary, name: str) -> dict:
    """``result`` (a calibration) corrected from ``reached`` (a probe under its link) until a
    probe lands within :data:`TOLERANCE` of the share, at most :data:`CORRECTIONS` times."""
    share = run.network.calibrate_share
    result = dict(result)
    correction = 0
    while abs(_share(reached, run) - share) > TOLERANCE and correction < CORRECTIONS:
        correction += 1
        result["scale"] *= _solve(reached, run)["scale"]
        reached = _probe(run, baseline, result["scale"], f"{name}_{correction}")
    return {**result, "reached_share": _share(reached, run), "check_epoch_s": reached.mean_epoch_time,
            "corrections": correction}


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


def _scaled(net: NetworkConfig, scale: float) -> NetworkConfig:
    """``net`` with every bandwidth scaled by ``scale``."""
    intra = net.intra_bandwidth_gbps * scale if net.gpus_per_node else net.intra_bandwidth_gbps
    return replace(net, bandwidth_gbps=net.bandwidth_gbps * scale, intra_bandwidth_gbps=intra)


def _setting_key(run: RootConfig, baseline: dict) -> str:
    net = {k: v for k, v in plain(run.network).items() if k not in ("calibration", "calibrate_against", "recheck")}
    text = json.dumps({"setting": setting(flatten(plain(run))), "baseline": baseline, "network": net,
                       "host": socket.gethostname()}, sort_keys=True)
    return f"{run.dataset.name}-{baseline['name']}-{hashlib.sha1(text.encode()).hexdigest()[:12]}"


def _counted(run: RootConfig) -> tuple[str, ...]:
    """The categories whose exposed time the share counts (``network.calibrate_traffic``)."""
    return ("data",) if run.network.calibrate_traffic == "data" else TRAINING_CATEGORIES


def _share(summary: RunSummary, run: RootConfig) -> float:
    """The communication share of a probe's epoch, of the traffic ``network.calibrate_traffic`` names."""
    return summary.comm_share if run.network.calibrate_traffic == "data" else summary.training_comm_share


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
                   network=replace(_scaled(run.network, scale), calibrate_share=None),
                   train=replace(probe.train, epochs=epochs, warmup_epochs=1, eval_every=epochs),
                   wandb=replace(probe.wandb, mode="disabled"),
                   run_dir=str(Path(run.run_dir) / "calibration_probe" / name))


def _probe(run: RootConfig, baseline: dict, scale: float, name: str) -> RunSummary:
    """Run the baseline's probe (:func:`probe_config`); its summary."""
    probe = probe_config(run, baseline, scale, name)
    launch(probe, run_training)
    return RunSummary.read(Path(probe.run_dir))


def _solve(summary: RunSummary, run: RootConfig) -> dict:
    share = run.network.calibrate_share
    compute, epoch = summary.mean_compute_time, summary.mean_epoch_time
    exposed, busy = summary.mean_comm_time_by_category, summary.mean_link_busy_time_by_category
    counted = _counted(run)
    data_busy = sum(v for k, v in busy.items() if k in counted)
    other_busy = sum(v for k, v in busy.items() if k not in counted)
    if data_busy <= 0:
        raise ConfigError(f"network.calibrate_share={share}: {summary.strategy} moves no bytes in this setting "
                          f"(cluster.world_size={summary.world_size}); valid: a setting with 2 or more workers")
    fixed = sum(v for k, v in exposed.items() if k in counted) - data_busy
    other_fixed = sum(v for k, v in exposed.items() if k not in counted) - other_busy
    room = share * (compute + fixed + other_fixed) - fixed
    need = data_busy * (1 - share) - share * other_busy
    if room <= 0 or need <= 0:
        raise ConfigError(f"network.calibrate_share={share} is out of reach: communication that does not depend on "
                          f"the bandwidth (latency, the real transfer, waits) already takes {fixed * 1e3:.2f} ms of a "
                          f"{epoch * 1e3:.2f} ms epoch, and all-reduces {other_busy * 1e3:.2f} ms of link time; "
                          "valid: a larger share or a smaller network.latency_us")
    return {"share": share, "scale": need / room, "compute_s": compute, "link_busy_s": data_busy,
            "other_link_busy_s": other_busy, "fixed_comm_s": fixed, "preset_bandwidth_gbps": run.network.bandwidth_gbps,
            "probe_epoch_s": epoch}
