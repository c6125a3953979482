"""``gnntrain``: compose the Hydra config, validate it, resolve it, launch the job.

Errors a user can cause (an unknown option, a misspelt key, a wrong type, a missing dataset,
a dead worker) are printed as one line, ``gnntrain: error: ...``, with exit code 2 (bad
input) or 1 (the job failed). ``GNNTRAIN_DEBUG=1`` shows the full traceback instead.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.errors import HydraException, MissingConfigException
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from gnntrain.config import register_schemas, validate
from gnntrain.errors import GnntrainError, WorkerFailed

register_schemas()


@hydra.main(config_path="pkg://gnntrain.conf", config_name="config", version_base="1.3")
def _job(cfg: DictConfig) -> None:
    from gnntrain.engine.calibration import calibrated
    from gnntrain.engine.loop import run_training
    from gnntrain.launch import launch

    try:
        plain = OmegaConf.to_container(cfg, resolve=True, enum_to_str=True)
        plain["run_dir"] = str(Path(HydraConfig.get().runtime.output_dir).resolve())
        validate(plain)
        launch(calibrated(plain), run_training)
    except (GnntrainError, OmegaConfBaseException) as exc:
        _exit_with(exc)  # here, not in main(): Hydra would print an extra line for a failed job


def _one_line(exc: BaseException) -> str:
    """The user-facing line for a composition error, naming the valid choices or keys."""
    if isinstance(exc, MissingConfigException) and exc.missing_cfg_file:
        group, _, option = exc.missing_cfg_file.rpartition("/")
        choices = ", ".join(sorted(exc.options or []))
        return f"unknown {group or 'config'} '{option}'; valid: {choices}"
    cause = exc.__cause__ if isinstance(exc, HydraException) and exc.__cause__ else exc
    if isinstance(cause, OmegaConfBaseException):
        key = getattr(cause, "full_key", None)
        msg = str(cause).splitlines()[0]
        valid = _valid_keys(cause)
        return f"{key}: {msg}{valid}" if key else msg + valid
    return " ".join(str(exc).split())


def _valid_keys(cause: OmegaConfBaseException) -> str:
    from omegaconf.errors import ConfigAttributeError, ConfigKeyError

    parent = getattr(cause, "parent_node", None)
    if isinstance(cause, (ConfigKeyError, ConfigAttributeError)) and isinstance(parent, DictConfig):
        return f" (valid keys here: {', '.join(str(k) for k in parent.keys())})"
    return ""


def _exit_with(exc: BaseException) -> None:
    """Print the one-line error and exit: 1 when a started job failed, 2 for bad input."""
    if os.environ.get("GNNTRAIN_DEBUG") == "1":
        raise exc
    print(f"gnntrain: error: {_one_line(exc)}", file=sys.stderr)
    sys.exit(1 if isinstance(exc, WorkerFailed) else 2)


def main() -> None:
    os.environ["HYDRA_FULL_ERROR"] = "1"  # let composition errors reach us, not Hydra's printer
    try:
        _job()
    except (HydraException, OmegaConfBaseException) as exc:
        _exit_with(exc)


if __name__ == "__main__":
    main()
