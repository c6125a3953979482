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

A probe of ``network.probe_epochs`` epochs (the first excluded) runs the baseline in the run's
setting (its workload keys, :func:`gnntrain.config.keys.setting`: dataset, model, workers,
partition, precision and optimizer; every other key at its default) under the preset network,
and measures per epoch the
compute time ``C`` (epoch less exposed communication), the exposed communication ``X`` and,
within it, the links' busy time ``B`` (bytes / bandwidth); the rest, ``X - B`` (latency, the
real transfer, waiting for a slower peer), does not depend on the bandwidth. The baselines
overlap nothing, so with every bandwidth scaled by ``f`` the exposed communication is
``X - B + B / f``, and asking it to be the share ``s`` of the epoch, ``s C / (1 - s)``, gives

    f = B / (s C / (1 - s) - (X - B)).

A probe under the calibrated link measures the share reached; where it misses by more than
:data:`TOLERANCE`, the bandwidth is solved again from that probe, at most :data:`CORRECTIONS`
times. The last share reached is printed and recorded with the calibration
(``network.calibration`` in ``summary.json``: ``against``, ``share``, ``reached_share``,
``scale``, ``corrections``, the first probe's figures). The result is cached per setting
and machine (``<partition.cache_dir>/calibration/``), so every job of a sweep runs under the
same link; delete the file to measure again.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
import os
import socket
from pathlib import Path

from omegaconf import MISSING, OmegaConf

from gnntrain.cache import cache_folder
from gnntrain.config import flatten
from gnntrain.config.keys import keys_playing, plays, setting
from gnntrain.config.schema import PLACE, ROLE, WORKLOAD, RootConfig
from gnntrain.engine.loop import run_training
from gnntrain.errors import ConfigError
from gnntrain.launch import launch, under_torchrun
from gnntrain.strategies import baseline_of, schema_of

PROBE_SEED = 0
"""The seed every probe runs at, whatever the run's (model initialisation, dropout, sampling)."""
TOLERANCE = 0.03
"""How far from the asked share a probe under the calibrated link may land before a correction."""
CORRECTIONS = 2
"""Corrections at most: each solves again from the last probe (the waits that do not scale with the
bandwidth are measured anew under the slower link)."""


def calibrated(cfg: dict) -> dict:
    """``cfg`` with its network's bandwidths calibrated, if ``network.calibrate_share`` asks for
    it (the config unchanged otherwise); prints the result."""
    net = cfg["network"]
    share = net["calibrate_share"]
    if share is None:
        return cfg
    if under_torchrun():
        raise ConfigError("network.calibrate_share runs a local probe; under torchrun pass the bandwidth a local "
                          "run printed instead: network.bandwidth_gbps=<Gbit/s>")
    baseline = probe_strategy(cfg)
    path = cache_folder(cfg["partition"]["cache_dir"], "calibration") / f"{_setting_key(cfg, baseline)}.json"
    if path.exists():
        result = json.loads(path.read_text())
    else:
        print(f"network: calibrating {net['name']} to {baseline['name']} communication share {share:g} "
              f"({net['probe_epochs']}-epoch {baseline['name']} probes)", flush=True)
        result = _solve(_probe(cfg, baseline, 1.0, "preset"), cfg)
        for correction in range(CORRECTIONS + 1):
            reached = _probe(cfg, baseline, result["scale"], f"calibrated_{correction}")
            if abs(_share(reached) - share) <= TOLERANCE or correction == CORRECTIONS:
                break
            result["scale"] *= _solve(reached, cfg)["scale"]
        result.update(against=baseline["name"], reached_share=_share(reached), check_epoch_s=reached["mean_epoch_time"],
                      corrections=correction)
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        tmp.write_text(json.dumps(result, indent=2) + "\n")
        tmp.replace(path)
    out = _scaled(cfg, result["scale"])
    out["network"]["calibration"] = result
    print(f"network: calibrated to {result['against']} communication share {share:g} (reached "
          f"{result['reached_share']:.3f}): {net['name']} bandwidths x {result['scale']:.4g} = "
          f"{out['network']['bandwidth_gbps']:.4g} Gbit/s (probe: compute {result['compute_s'] * 1e3:.1f} ms, "
          f"link busy {result['link_busy_s'] * 1e3:.2f} ms at the preset; {path})", flush=True)
    return out


def probe_strategy(cfg: dict) -> dict:
    """The strategy section the probes run: the baseline, with the run's values of its workload
    options, :data:`PROBE_SEED`, and its own defaults for the others."""
    name = cfg["network"]["calibrate_against"] or baseline_of(cfg["strategy"]["name"])
    section = {"name": name}
    for field in dataclasses.fields(schema_of(name)):
        if field.name == "name":
            continue
        if field.name == "seed":
            section["seed"] = PROBE_SEED
        elif field.metadata.get(ROLE) == WORKLOAD and field.name in cfg["strategy"]:
            section[field.name] = cfg["strategy"][field.name]
        elif field.default is not dataclasses.MISSING:
            section[field.name] = field.default
        else:
            section[field.name] = field.default_factory()  # type: ignore[misc]
    return json.loads(json.dumps(section, default=str))


def _scaled(cfg: dict, scale: float) -> dict:
    """``cfg`` with every bandwidth of its network scaled by ``scale``."""
    out = copy.deepcopy(cfg)
    net = out["network"]
    net["bandwidth_gbps"] = cfg["network"]["bandwidth_gbps"] * scale
    if net["gpus_per_node"]:
        net["intra_bandwidth_gbps"] = cfg["network"]["intra_bandwidth_gbps"] * scale
    return out


def _setting_key(cfg: dict, baseline: dict) -> str:
    net = {k: v for k, v in cfg["network"].items() if k not in ("calibration", "calibrate_against")}
    text = json.dumps({"setting": setting(flatten(cfg)), "baseline": baseline, "network": net,
                       "host": socket.gethostname()}, sort_keys=True)
    return f"{cfg['dataset']['name']}-{baseline['name']}-{hashlib.sha1(text.encode()).hexdigest()[:12]}"


def _share(summary: dict) -> float:
    """The exposed communication's share of a probe's epoch."""
    return (summary["mean_epoch_time"] - summary["mean_compute_time"]) / summary["mean_epoch_time"]


def probe_config(cfg: dict, baseline: dict, scale: float, name: str) -> dict:
    """The config of a probe: the run's setting and place keys, every other key of the root
    schema at its default, the ``baseline`` strategy section, the network with its bandwidths
    scaled by ``scale``, ``network.probe_epochs`` epochs (the first a warm-up) evaluated once,
    :data:`PROBE_SEED`, no W&B, under the run dir's ``calibration_probe/<name>``."""
    probe = _scaled(cfg, scale)
    kept = keys_playing(WORKLOAD, PLACE)
    for key, default in flatten(OmegaConf.to_container(OmegaConf.structured(RootConfig), enum_to_str=True)).items():
        if default != MISSING and not plays(key, kept):
            section, _, leaf = key.rpartition(".")
            (probe[section] if section else probe)[leaf] = default
    epochs = cfg["network"]["probe_epochs"]
    probe["strategy"] = baseline
    probe["seed"] = PROBE_SEED
    probe["network"]["calibrate_share"] = None
    probe["train"].update(epochs=epochs, warmup_epochs=1, eval_every=epochs)
    probe["wandb"]["mode"] = "disabled"
    probe["run_dir"] = str(Path(cfg["run_dir"]) / "calibration_probe" / name)
    return probe


def _probe(cfg: dict, baseline: dict, scale: float, name: str) -> dict:
    """Run the baseline's probe (:func:`probe_config`); its summary."""
    probe = probe_config(cfg, baseline, scale, name)
    launch(probe, run_training)
    return json.loads((Path(probe["run_dir"]) / "summary.json").read_text())


def _solve(summary: dict, cfg: dict) -> dict:
    share = cfg["network"]["calibrate_share"]
    compute, busy, epoch = (summary[f"mean_{k}"] for k in ("compute_time", "link_busy_time", "epoch_time"))
    if busy <= 0:
        raise ConfigError(f"network.calibrate_share={share}: {summary['strategy']} moves no bytes in this setting "
                          f"(cluster.world_size={summary['world_size']}); valid: a setting with 2 or more workers")
    fixed = (epoch - compute) - busy
    room = share * compute / (1 - share) - fixed
    if room <= 0:
        raise ConfigError(f"network.calibrate_share={share} is out of reach: communication that does not depend on "
                          f"the bandwidth (latency, the real transfer, waits) already takes {fixed * 1e3:.2f} ms of a "
                          f"{epoch * 1e3:.2f} ms epoch; valid: a larger share or a smaller network.latency_us")
    return {"share": share, "scale": busy / room, "compute_s": compute, "link_busy_s": busy,
            "fixed_comm_s": fixed, "preset_bandwidth_gbps": cfg["network"]["bandwidth_gbps"],
            "probe_epoch_s": epoch}
