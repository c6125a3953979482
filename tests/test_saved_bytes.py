"""The bytes each model keeps for its backward are those its docstring states: what the math
needs, no input kept twice, no per-edge dense messages (probe graph: ``N`` = 512 inner rows,
``S`` = 768 source rows, ``E`` = 4096 in-edges; float32; no dropout unless a case says so)."""

from __future__ import annotations

import pytest

from gnntrain.cost.memory import probe_graph, _saved_bytes
from gnntrain.models import build_model, model_spec

N, HALO, E = 512, 256, 4096
S = N + HALO
B = 4
INDEX = 8


@pytest.mark.parametrize("name,d_in,d_out,layers,own,expected", [
    # mapping first: the input rows
    ("gcn", 64, 8, 1, {}, S * 64 * B),
    # aggregating first: A h alone
    ("gcn", 8, 64, 1, {}, N * 8 * B),
    # mapping first: the input rows once for both maps
    ("sage", 64, 8, 1, {}, S * 64 * B),
    # aggregating first: mean_j h_j and the targets' own rows
    ("sage", 8, 64, 1, {}, 2 * N * 8 * B),
    # aggregating first (64 -> 32), the ReLU's output, mapping first (32 -> 4): the inner rows
    # are the ReLU's output, counted once, the halo rows and the stacked weight (the input has
    # a gradient here)
    ("sage", 64, 4, 2, {}, 2 * N * 64 * B + N * 32 * B + HALO * 32 * B + 8 * 32 * B),
    # input map: x and H_0; each of 2 convolutions: S and its ReLU's output
    ("gcnii", 64, 4, 2, {"alpha": 0.1, "theta": 0.5}, N * 64 * B + N * 32 * B + 2 * 2 * N * 32 * B),
    # input rows, messages (2 heads of 4), per edge or self-loop and head: alpha, its score's
    # sign, the dropped alpha and its mask; the edges' endpoint ids (the graph's own)
    ("gat", 64, 4, 1, {"heads": 1, "out_heads": 2, "att_dropout": 0.5},
     S * 64 * B + S * 2 * 4 * B + (E + N) * 2 * (B + 1 + B + 1) + 2 * (E + N) * INDEX),
])
def test_a_model_keeps_what_its_docstring_states(name: str, d_in: int, d_out: int, layers: int, own: dict,
                                                  expected: int) -> None:
    config = model_spec(name).config(name=name, hidden=32, layers=layers, dropout=0.0, norm="none", **own)
    model = build_model(config, d_in, d_out)
    assert _saved_bytes(model, probe_graph(N, HALO, E, d_in)) == expected
