"""gnntrain's Hydra sweeper (``hydra/sweeper=gnntrain``, the default in ``conf/config.yaml``).
Hydra instantiates sweepers only from the ``hydra_plugins`` namespace package; the sweep's
logic is :func:`gnntrain.job.sweep.sweep_jobs`. The CLI registers it
(:func:`gnntrain.commands.train.register_sweeper`)."""

from __future__ import annotations

from typing import Any

from hydra._internal.core_plugins.basic_sweeper import BasicSweeper

from gnntrain.job.sweep import sweep_jobs


class KnobSweeper(BasicSweeper):
    """Hydra's basic sweeper, launching :func:`gnntrain.job.sweep.sweep_jobs`: a strategy's or
    model's own knob reaches only the jobs whose strategy or model has it
    (``hydra/sweeper=basic`` launches the plain cartesian product)."""

    def split_arguments(self, overrides: list[Any], max_batch_size: int | None) -> list[list[list[str]]]:
        return list(self.split_overrides_to_chunks(sweep_jobs(self.config), max_batch_size))
