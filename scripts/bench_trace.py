"""Benchmark: what tracing costs a virtual epoch. The trace (``cluster.trace=true``) names every
compute span by layer, forward or backward, and by the strategy's phase, and the virtual clock
charges a rank its thread's CPU time, so the hooks and span records that tracing adds land in the
epoch it times. The tables keep tracing on for their share curves; this measures, side by side,
the same job with tracing on and off.

Each round runs the two jobs once, in alternating order (interleaved rounds), on the virtual clock;
a round's figure is the ratio of the traced job's mean steady virtual epoch to the untraced one's.
Printed: per strategy, the median ratio over the rounds with its 95% interval (log scale). Results
go to ``results/bench_trace.json``. Usage: ``python scripts/bench_trace.py [--rounds N]``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from gnntrain.engine.summary import RunSummary
from gnntrain.report.stats import Ratio

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
SETTING = ["dataset=synthetic", "dataset.num_nodes=20000", "dataset.avg_degree=10", "model=gcn", "model.layers=2",
           "model.hidden=64", "cluster.world_size=2", "cluster.clock=virtual", "network=eth10g",
           "train.epochs=14", "train.eval_every=14", "train.warmup_epochs=2"]
STRATEGIES = ("vanilla", "pipegcn", "adaqp")


def epoch(run_dir: Path, traced: bool, strategy: str, seed: int) -> float:
    """One job's mean steady virtual epoch (s)."""
    command = [str(BIN / "gnntrain"), *SETTING, f"strategy={strategy}", f"cluster.trace={str(traced).lower()}",
               f"seed={seed}", f"hydra.run.dir={run_dir}"]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"bench_trace: {' '.join(command)} failed:\n{done.stderr[-2000:]}")
    return RunSummary.read(run_dir / "summary.json").mean_epoch_time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--out", type=Path, default=ROOT / "results" / "bench_trace.json")
    args = parser.parse_args()
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for strategy in STRATEGIES:
            ratios = []
            for r in range(args.rounds):
                order = (True, False) if r % 2 == 0 else (False, True)
                times = {traced: epoch(Path(tmp) / f"{strategy}_{r}_{traced}", traced, strategy, r) for traced in order}
                ratios.append(times[True] / times[False])
                print(f"{strategy} round {r}: traced {times[True] * 1e3:.1f} ms, untraced {times[False] * 1e3:.1f} ms "
                      "(virtual clock)", flush=True)
            ratio = Ratio(ratios)
            results[strategy] = {"ratios": ratios, "median": ratio.median, "bounds": ratio.bounds}
            print(f"{strategy}: traced / untraced virtual epoch {ratio}", flush=True)
    args.out.write_text(json.dumps({"setting": SETTING, "clock": "virtual", "results": results}, indent=1) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
