"""The reproduction of the papers' tables, run from a checkout of gnntrain (``make repro-<paper>``,
``make compare``, ``make zoo``, ``make check-tables``).

* :mod:`.paper` — what a paper's reproduction declares (:class:`~.paper.Paper`: sweeps, speed
  sweeps, tables, share curve), and :mod:`.papers` the five: :mod:`.pipegcn`, :mod:`.bns`,
  :mod:`.adaqp`, :mod:`.gnnpipe`, :mod:`.hopgnn` (each with the paper's figures it quotes);
* :mod:`.build` — ``python -m gnntrain.repro <paper>``: runs a paper's sweeps in interleaved
  rounds and writes its tables to ``results/<paper>/``; :mod:`.plan` — the sweeps a build runs and
  ``--dry-run``; :mod:`.replayed` — the share curve, replayed; :mod:`.accounting` — where an epoch went; :mod:`.tables` — what the tables share;
* :mod:`.compare` — every strategy tuned and compared on time to accuracy; :mod:`.zoo` — every
  model with its paper's settings; :mod:`.locality` — HopGNN's Table 1;
* :mod:`.staleness` — which committed tables are older than the code they measure;
* :mod:`.jobs` — running one job and what the benchmarks in ``scripts/`` share.
"""

import os
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parents[2]
"""The checkout the reproduction runs in: its ``conf/``, ``results/`` and ``multirun/``."""
SHARED_DATA = CHECKOUT.parent / "shared" / "datasets" / "pyg"
"""Where the real graphs are read from when ``GNNTRAIN_DATA`` is unset (as the tests do)."""


def use_shared_data() -> None:
    """Read the real graphs from :data:`SHARED_DATA` where ``GNNTRAIN_DATA`` is unset and it exists:
    for a build's jobs (which inherit the environment) and its own reads."""
    if "GNNTRAIN_DATA" not in os.environ and SHARED_DATA.is_dir():
        os.environ["GNNTRAIN_DATA"] = str(SHARED_DATA)
