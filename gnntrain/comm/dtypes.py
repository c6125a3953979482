"""The tensor dtypes each backend moves, checked before a transfer starts.

A collective (all-to-all, all-reduce) hands the backend a typed buffer and the backend must
know the type: gloo (measured here, torch 2.13) moves float32, float64, float16, bfloat16,
int8, uint8, int32, int64, bool and complex but refuses int16 and the unsigned 16/32/64-bit
types in an all-to-all ("Invalid scalar type", raised only once the transfer runs, with no
hint of the call); NCCL takes what torch's ``ncclDataType`` map lists (int8, uint8, int32,
int64, float16, bfloat16, float32, float64, bool and the float8 types), for point-to-point
too. Complex tensors travel as their real pairs. gloo's point-to-point moves any dtype (its
bytes). A dtype outside these is refused in one line naming it and the valid ones; sending
the tensor's bytes (``t.view(torch.uint8)``) or widening it works on every backend.
"""

from __future__ import annotations

import torch

_COMMON = frozenset({torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int8, torch.uint8,
                     torch.int32, torch.int64, torch.bool, torch.complex64, torch.complex128})
COLLECTIVE_DTYPES: dict[str, frozenset[torch.dtype]] = {
    "gloo": _COMMON,
    "nccl": _COMMON | {torch.float8_e5m2, torch.float8_e4m3fn, torch.float8_e5m2fnuz, torch.float8_e4m3fnuz},
}
"""Per backend, the dtypes its collectives take."""

POINT_TO_POINT_DTYPES: dict[str, frozenset[torch.dtype] | None] = {"gloo": None, "nccl": COLLECTIVE_DTYPES["nccl"]}
"""Per backend, the dtypes its sends and receives take (None: any)."""


def check_sendable(backend: str | None, dtype: torch.dtype, kind: str, point_to_point: bool = False) -> None:
    """Raise TypeError where ``backend`` cannot move a ``dtype`` tensor (a transfer of ``kind``)."""
    table = POINT_TO_POINT_DTYPES if point_to_point else COLLECTIVE_DTYPES
    valid = table.get(backend) if backend is not None else None
    if valid is None or dtype in valid:
        return
    names = ", ".join(sorted(str(d).removeprefix("torch.") for d in valid))
    how = "point-to-point" if point_to_point else "in a collective"
    raise TypeError(f"{backend} cannot send {str(dtype).removeprefix('torch.')} tensors {how} (traffic kind "
                    f"'{kind}'); valid: {names} (or send the bytes: tensor.view(torch.uint8))")
