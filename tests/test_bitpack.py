"""Bit packing of small integers into bytes."""

from __future__ import annotations

import pytest
import torch

from gnntrain.comm.bitpack import pack, packed_size, unpack


@pytest.mark.parametrize("bits", [1, 2, 4, 8])
@pytest.mark.parametrize("count", [0, 1, 7, 8, 9, 1001])
def test_round_trip_and_size(bits: int, count: int) -> None:
    values = torch.randint(0, 2 ** bits, (count,), generator=torch.Generator().manual_seed(count))
    packed = pack(values, bits)
    assert packed.dtype == torch.uint8 and packed.numel() == packed_size(count, bits) == -(-count * bits // 8)
    assert torch.equal(unpack(packed, bits, count), values.to(torch.uint8))


def test_first_value_in_lowest_bits() -> None:
    assert pack(torch.tensor([1, 0, 0, 0, 0, 0, 0, 1]), 1).tolist() == [0b1000_0001]
    assert pack(torch.tensor([3, 0, 1]), 2).tolist() == [0b01_00_11]


def test_bad_width_names_the_valid_ones() -> None:
    with pytest.raises(ValueError, match="bits=3 is invalid; valid: 1, 2, 4, 8"):
        pack(torch.tensor([1]), 3)
