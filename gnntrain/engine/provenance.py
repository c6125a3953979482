"""What code a run executed: the package's modules loaded in its processes, so that a table
built from runs is stale only when one of those files changed (``make check-tables``).

A run's rank 0 lists, when the run completes, the modules of ``gnntrain`` its process has
loaded, joined with those the launcher had loaded when it started the workers (exported in
:data:`LAUNCHER_CODE`, which spawned workers inherit; under torchrun rank 0 is the launcher).
Paths are relative to the repository (``gnntrain/comm/meter.py``). A module a run imported
but never called counts: an import is what Python can tell, and a changed import-time value
can move a figure. In a sweep the launcher's list also holds what the jobs before it loaded:
more files, never fewer. Under submitit the workers do not see the launcher's environment, so only
the workers' modules are listed.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

LAUNCHER_CODE = "GNNTRAIN_LAUNCHER_CODE"
"""The environment variable that carries the launcher's modules to the workers."""
PACKAGE = Path(__file__).resolve().parents[1]


def _own_code() -> set[str]:
    files = set()
    for name, module in list(sys.modules.items()):
        path = getattr(module, "__file__", None)
        if (name == "gnntrain" or name.startswith("gnntrain.")) and path:
            resolved = Path(path).resolve()
            if resolved.is_relative_to(PACKAGE):
                files.add(str(resolved.relative_to(PACKAGE.parent)))
    return files


def export_launcher_code() -> None:
    """Hand the launcher's modules to the workers it starts next."""
    os.environ[LAUNCHER_CODE] = ",".join(sorted(_own_code()))


def loaded_code() -> list[str]:
    """The package's files this process and its launcher have loaded, sorted."""
    launcher = os.environ.get(LAUNCHER_CODE, "")
    return sorted(_own_code() | set(filter(None, launcher.split(","))))
