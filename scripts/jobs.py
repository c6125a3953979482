"""Run a gnntrain job from a benchmark script: compose the config as the CLI does, launch
the workers, return ``summary.json``."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from hydra import compose, initialize_config_module
from omegaconf import OmegaConf

from gnntrain.config import register_schemas, validate
from gnntrain.launch import launch
from gnntrain.train import run_training


def run_job(overrides: list[str]) -> dict:
    register_schemas()
    with initialize_config_module("gnntrain.conf", version_base="1.3"):
        cfg = OmegaConf.to_container(compose("config", overrides=[*overrides, "wandb.mode=disabled"]),
                                     resolve=True, enum_to_str=True)
    validate(cfg)
    with tempfile.TemporaryDirectory() as run_dir:
        cfg["run_dir"] = run_dir
        launch(cfg, run_training)
        return json.loads((Path(run_dir) / "summary.json").read_text())
