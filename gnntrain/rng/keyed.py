"""Random values that are pure functions of their coordinates: keyed, not drawn from a stream.

A value drawn from a generator depends on everything drawn before it, so two processes that
hold the same node draw different values for it. A *keyed* value is a hash of what it is for
(a key made of its coordinates, e.g. seed, epoch, iteration, layer) and of which element it is
(a node or edge id, a column), so every process that needs it computes the same value, in any
order and any grouping: a neighbour sample is the same whoever samples it
(:mod:`gnntrain.data.sampling`), a dropout mask is the same whoever reads the row
(:func:`gnntrain.rng.random16.dropout`).

The hash is SplitMix64's (Steele, Lea & Flood, OOPSLA 2014): a Weyl step of the golden-ratio
increment ``G`` followed by its finaliser :func:`mix`. An element's value is the output of the
SplitMix64 stream seeded by ``mix(key + id G)`` at the position of its column, so the values of
one row are consecutive outputs of a stream of its own.
"""

from __future__ import annotations

import torch

MASK64 = (1 << 64) - 1
GOLDEN = 0x9E3779B97F4A7C15
MIX1, MIX2 = 0xBF58476D1CE4E5B9, 0x94D049BB133111EB
CPU_BLOCK_WORDS = 1 << 15


def signed(value: int) -> int:
    """``value`` mod 2^64 as a signed 64-bit integer (what torch's int64 arithmetic wraps to)."""
    value &= MASK64
    return value - (1 << 64) if value >= 1 << 63 else value


def _xor_shifted(z: torch.Tensor, bits: int) -> None:
    """``z ^= z >>> bits`` (a logical shift: torch shifts int64 arithmetically), in place."""
    z ^= (z >> bits) & ((1 << (64 - bits)) - 1)


def mix(z: torch.Tensor) -> torch.Tensor:
    """SplitMix64's finaliser on int64 (wrapping arithmetic), elementwise, in place."""
    _xor_shifted(z, 30)
    z *= signed(MIX1)
    _xor_shifted(z, 27)
    z *= signed(MIX2)
    _xor_shifted(z, 31)
    return z


def mix_int(value: int) -> int:
    """:func:`mix` of one Python integer (the same result as on a one-element tensor)."""
    z = value & MASK64
    z = ((z ^ (z >> 30)) * MIX1) & MASK64
    z = ((z ^ (z >> 27)) * MIX2) & MASK64
    return signed(z ^ (z >> 31))


def key(*parts: int) -> int:
    """A 64-bit key of the coordinates ``parts``, mixed in order (a signed int)."""
    value = 0
    for part in parts:
        value = mix_int(value * GOLDEN + part)
    return value


def uniform(key_: int, ids: torch.Tensor) -> torch.Tensor:
    """A uniform float64 in [0, 1) per id, a pure function of (key, id)."""
    z = mix(ids * signed(GOLDEN) + key_)
    return ((z >> 11) & ((1 << 53) - 1)).double() / float(1 << 53)


def pair_ids(first: torch.Tensor, second: torch.Tensor) -> torch.Tensor:
    """An int64 id per ordered pair ``(first[i], second[i])`` of node ids (an edge's source and
    target), for values keyed by edge rather than by node: ``mix(first G + second)``, distinct
    for distinct pairs of ids below ``2^32`` (``G`` is odd and ``mix`` a bijection)."""
    return mix(first.to(torch.int64) * signed(GOLDEN) + second.to(torch.int64))


def uniform16(key_: int, ids: torch.Tensor, width: int, first_column: int = 0) -> torch.Tensor:
    """int16 ``[len(ids), width]``: the value of row ``ids[i]``, column ``first_column + j``,
    uniform over ``[-2^15, 2^15)``, a pure function of (key, id, column). Four columns share one
    64-bit stream output (the four 16-bit lanes of word ``column // 4``).

    On a CPU the words are hashed in blocks of about 256 KB, each through the whole finaliser
    while it stays in cache (the finaliser is 11 passes: on the whole tensor at once they would
    be bound by memory bandwidth)."""
    first_word, end_word = first_column // 4, -(-(first_column + width) // 4)
    rows = mix(ids.to(torch.int64) * signed(GOLDEN) + key_)
    steps = torch.arange(first_word + 1, end_word + 1, dtype=torch.int64, device=ids.device) * signed(GOLDEN)
    words = torch.empty(ids.numel(), steps.numel(), dtype=torch.int64, device=ids.device)
    block = ids.numel() if ids.is_cuda else max(1, CPU_BLOCK_WORDS // max(steps.numel(), 1))
    for start in range(0, ids.numel(), block):
        z = words[start: start + block]
        torch.add(rows[start: start + block].unsqueeze(1), steps, out=z)
        mix(z)
    offset = first_column - 4 * first_word
    return words.view(torch.int16)[:, offset: offset + width]
