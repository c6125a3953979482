"""Reading files that may come from someone else without running code.

A ``.pt`` file is a pickle, and unpickling can call any function the file names. Every file
gnntrain reads (checkpoints, partitions, part files, datasets, PyG's processed caches) holds
tensors and plain data only, so it is read with torch's restricted unpickler
(``weights_only=True``), which builds tensors, containers and numbers and refuses anything
else. A file that names anything more is refused in one line (:class:`UnsafeFile`) and never
loaded another way; :func:`names_code` tells, before a library loads a file itself, whether it
would be refused, reading only the file's pickle, not its tensors.
"""

from __future__ import annotations

import pickle
import re
from collections.abc import Iterator
from contextlib import contextmanager
import warnings
from pathlib import Path
from typing import Any

import torch

from gnntrain.errors import GnntrainError


class UnsafeFile(GnntrainError):
    """A file whose pickle names more than tensors and plain data: refused, not loaded."""

    def __init__(self, path: Path | str, what: str) -> None:
        super().__init__(f"{path} is refused: it names {what}, beyond the tensors and plain data gnntrain "
                         "writes; gnntrain never loads code from a file (delete it, or write it again)")


def load_plain(path: Path | str, **kwargs: Any) -> Any:
    """``torch.load(path, weights_only=True, **kwargs)``; :class:`UnsafeFile` where the pickle
    names anything beyond tensors and plain data (other failures to read, a damaged file's,
    propagate as torch raises them)."""
    try:
        with _quiet():
            return torch.load(path, weights_only=True, **kwargs)
    except pickle.UnpicklingError as exc:
        named = re.search(r"GLOBAL (\S+)", str(exc))
        if named is None:  # refused an instruction, not a name: a damaged file, or none of torch's
            raise
        raise UnsafeFile(path, named.group(1)) from None


def names_code(path: Path | str) -> str | None:
    """What the pickle of the ``torch.save`` file ``path`` names beyond tensors and plain data
    (None: nothing); raises as torch does where the file is no such file (damaged, truncated)."""
    with _quiet():
        unsafe = torch.serialization.get_unsafe_globals_in_checkpoint(path)
    return ", ".join(sorted(set(unsafe))) if unsafe else None


@contextmanager
def _quiet() -> Iterator[None]:
    """Torch's warning about a pickle protocol it did not write (a crafted file's) held back:
    the refusal is the one line the user sees."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Detected pickle protocol")
        yield
