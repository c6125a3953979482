"""An epoch's accounting for the speed tables: where each rank's epoch went, measured, and the
bounds on what hiding communication can give.

Per rank and timed epoch (``metrics.jsonl``'s ``per_rank``), the epoch ``T`` splits into

    T = C + W + X + A + O

* ``C``, compute: under the virtual clock (``cluster.clock=virtual``) the rank's own compute
  time, measured by its clock (:mod:`gnntrain.timing.virtual_clock`) independently of the meter;
  under the wall clock there is no such measurement and ``C`` is *defined* as ``T`` minus the
  exposed communication, so the identity holds by construction;
* ``W``, imbalance wait: the exposed time the rank waited for its peers to post the data
  (halos, features, activations) it needed;
* ``X``, transfer: the exposed time the data moved on the link;
* ``A``, the all-reduce: the exposed time of ``sync`` traffic (the gradients' all-reduce,
  batch-norm statistics; its own wait included);
* ``O``, other exposed time (``control`` traffic: HopGNN's merge timing, AdaQP's plans);

and ``H``, hidden, is the data traffic that moved while the rank computed (part of no sum).
The meter splits ``W``, ``X``, ``A``, ``O`` from each operation's posting, peers' postings and
completion (:mod:`gnntrain.comm.meter`), so under the virtual clock the identity is a check of
two independent measurements: :func:`largest_gap` is its largest relative miss over every rank
and timed epoch, which a table prints (and :data:`ADDS_UP` bounds).

Bounds on hiding the baseline's data communication (PipeGCN Sec. 3, HopGNN Sec. 3 argue them):
with ``D = W + X`` the baseline's exposed data time, a method that hides all of it behind
compute reaches at best

* :func:`hide_all_bound`, ``T / max(D, T - D)``: the papers' ``1 / max(s, 1 - s)`` for the
  share ``s = D / T``, which lets the all-reduce overlap the data traffic;
* :func:`shared_link_bound`, ``T / (T - min(C, D))``: only compute and data traffic overlap.
  The all-reduce shares the link with the data and cannot overlap the compute that produces
  the gradients it sums, nor the next epoch's compute that needs the updated weights; what
  neither compute nor data is (the all-reduce, control traffic, the waits of an imbalance)
  stays. Where compute dominates (``C >= D``) the two agree; where the link does, this one is
  the lower: ``T / (D + A + O)`` against ``T / D``.
"""

from __future__ import annotations

from dataclasses import dataclass
from statistics import mean

from gnntrain.engine.metrics import EpochRecord
from gnntrain.report import markdown
from gnntrain.report.runs import Run, one_clock

ADDS_UP = 0.01
"""The largest relative gap between a rank's epoch and the sum of its parts a virtual-clock
table accepts."""


def hide_all_bound(share: float) -> float:
    """``1 / max(s, 1 - s)``: hiding all data traffic, the all-reduce free to overlap it."""
    return 1 / max(share, 1 - share)


def shared_link_bound(epoch: float, compute: float, data: float) -> float:
    """``T / (T - min(C, D))``: hiding all data traffic behind compute, everything else serial."""
    return epoch / (epoch - min(compute, data))


@dataclass(frozen=True)
class Accounting:
    """Mean seconds per rank and timed epoch of each part (module docstring)."""

    epoch: float
    compute: float
    wait: float
    transfer: float
    allreduce: float
    other: float
    hidden: float
    gap: float
    """The largest ``|C + W + X + A + O - T| / T`` over every rank and timed epoch."""
    clock: str

    @property
    def data(self) -> float:
        """``D``: exposed data communication (wait and transfer)."""
        return self.wait + self.transfer

    @property
    def hide_all_bound(self) -> float:
        return hide_all_bound(self.data / self.epoch)

    @property
    def shared_link_bound(self) -> float:
        return shared_link_bound(self.epoch, self.compute, self.data)

    def cells(self) -> dict[str, str]:
        """The table's columns: each part in ms, the check, both bounds."""
        ms = {"compute ms": self.compute, "imbalance wait ms": self.wait, "transfer ms": self.transfer,
              "all-reduce ms": self.allreduce, "other exposed ms": self.other, "hidden ms": self.hidden}
        check = (f"{self.gap:.2%}" + ("" if self.gap <= ADDS_UP else " (**over 1%**)") if self.clock == "virtual"
                 else "by definition (wall clock)")
        return {**{k: f"{v * 1e3:.1f}" for k, v in ms.items()}, "parts vs epoch": check}


def _parts(record: EpochRecord) -> list[tuple[float, ...]]:
    """Each rank's (T, C, W, X, A, O, H) in one epoch (a record older than ``exposed_time`` was
    timed on the wall clock: its exposed time is the epoch minus its compute)."""
    ranks = record.per_rank
    rows = []
    for r, epoch in enumerate(ranks["epoch_time"]):
        wait, transfer = ranks["comm_wait_time"][r], ranks["comm_transfer_time"][r]
        allreduce = ranks["reduce_wait_time"][r] + ranks["reduce_transfer_time"][r]
        exposed = ranks["exposed_time"][r] if "exposed_time" in ranks else epoch - ranks["compute_time"][r]
        other = exposed - wait - transfer - allreduce
        rows.append((epoch, ranks["compute_time"][r], wait, transfer, allreduce, other,
                     ranks["comm_hidden_time"][r] + ranks["reduce_hidden_time"][r]))
    return rows


def account(runs: list[Run], start: int) -> Accounting:
    """The accounting of ``runs`` (one setting's rounds, one clock) over their epochs from ``start``."""
    rows = [row for run in runs for record in run.records if record.epoch >= start for row in _parts(record)]
    if not rows:
        raise ValueError(f"no per-rank figures from epoch {start} in {runs[0].path if runs else 'no runs'}")
    columns = [mean(column) for column in zip(*rows)]
    gap = max(abs(sum(row[1:6]) - row[0]) / row[0] for row in rows if row[0] > 0)
    return Accounting(*columns, gap=gap, clock=one_clock(runs))


def accounting_table(settings: dict[str, list[Run]], start: int) -> str:
    """A table's accounting section: one row per labelled setting (its rounds), its clock named."""
    accounts = {label: account(runs, start) for label, runs in settings.items()}
    clock = next(iter(accounts.values())).clock
    rows = [{"setting": label, "epoch ms": f"{a.epoch * 1e3:.1f}", **a.cells()} for label, a in accounts.items()]
    identity = ("compute is each rank's own, measured by its virtual clock, so the last column checks two "
                "independent measurements" if clock == "virtual" else
                "compute is the epoch minus the exposed communication, so the parts add up by definition")
    return (f"Where each rank's epoch went ({clock} clock; mean per rank and timed epoch over the rounds; "
            f"epoch = compute + imbalance wait + transfer + all-reduce + other exposed, hidden apart; "
            f"{identity}; the last column is the largest miss over every rank and epoch):\n\n{markdown(rows)}\n")
