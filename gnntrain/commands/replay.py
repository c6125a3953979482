"""gnntrain-replay: a run's trace timed again under another network, in seconds, without training.

    gnntrain-replay RUN_DIR [network=... network.bandwidth_gbps=... ...]

prints the run's mean epoch (its steady epochs, as its summary counts them) under the network it
ran on and under the one the overrides describe (the run's own where none is given), with the
compute and the exposed communication per category. ``--bandwidths LO:HI:N`` times it at N link
bandwidths from LO to HI Gbit/s (log-spaced) instead, with the communication share at each and,
with ``--baseline RUN_DIR`` (another method's traced run), the speed-up over it; ``--plot`` draws
that curve. ``--chrome FILE`` writes the trace for Perfetto or ``chrome://tracing``. The run must
have been made with ``cluster.clock=virtual cluster.trace=true``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from gnntrain.errors import GnntrainError

MAX_BANDWIDTHS = 200
"""The most points ``--bandwidths`` draws (each is a replay or a prediction)."""


def bandwidths(text: str) -> np.ndarray:
    """``LO:HI:N``: N bandwidths (Gbit/s) spaced geometrically from LO to HI, finite, 0 < LO < HI,
    2 <= N <= :data:`MAX_BANDWIDTHS`; one line naming the bad value otherwise."""
    try:
        low, high, count = text.split(":")
        low, high, count = float(low), float(high), int(count)
    except ValueError:
        raise GnntrainError(f"--bandwidths {text}: valid: LO:HI:N, e.g. 0.1:100:24 (Gbit/s, N >= 2)") from None
    if not (np.isfinite(low) and np.isfinite(high) and 0 < low < high and 2 <= count <= MAX_BANDWIDTHS):
        raise GnntrainError(f"--bandwidths {text}: valid: LO:HI:N with finite 0 < LO < HI and "
                            f"2 <= N <= {MAX_BANDWIDTHS}")
    return np.geomspace(low, high, count)


def parser() -> argparse.ArgumentParser:
    """The command's arguments; parsing them imports nothing heavy, so a usage error is at once."""
    parser = argparse.ArgumentParser(prog="gnntrain-replay", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run", type=Path, help="the run dir of a run made with cluster.clock=virtual cluster.trace=true")
    parser.add_argument("overrides", nargs="*", help="network overrides, as gnntrain takes them (network=eth25g ...)")
    parser.add_argument("--bandwidths", default=None, help="LO:HI:N: replay at N bandwidths from LO to HI Gbit/s")
    parser.add_argument("--baseline", type=Path, default=None, help="another traced run, for the speed-up over it")
    parser.add_argument("--plot", type=Path, default=None, help="with --bandwidths: draw the curve into this PNG")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures to this JSON file")
    parser.add_argument("--chrome", type=Path, default=None, help="write the trace for Perfetto / chrome://tracing")
    return parser


def main(argv: list[str] | None = None) -> None:
    args = parser().parse_args(argv)
    from gnntrain.commands.replay_trace import replay

    replay(args)


if __name__ == "__main__":
    main()
