"""Rows through the models' dense maps (``projected_rows``): the compute counterpart of bytes.

Counted at the call site, forward passes only:

* a message-passing layer counts the rows it passes through its weight map: every source row
  when it maps before aggregating (GCN and SAGE where that is cheaper, GAT and FiLM always),
  every target row when the map follows the aggregation (GCN and SAGE aggregating first,
  GCNII's ``W_l``, GENConv's MLP); maps that read only the targets beside the message map
  (SAGE's ``lin_r``, FiLM's modulations) are not counted again;
* a model counts the rows through its input maps where they are a block of their own (GCNII,
  DeepGCN), and a strategy the rows it projects for a model (P3's partial projections, as the
  fraction of the columns each rank projects; Naive's).

Output maps are not counted. The count belongs to the process (a process trains one job at a
time); the epoch loop takes it before and after each training epoch, so a record's
``projected_rows`` is that epoch's training, summed over the ranks.
"""

from __future__ import annotations

_counted = 0.0


def add(rows: float) -> None:
    """Count ``rows`` passed through a dense map."""
    global _counted
    _counted += rows


def take() -> float:
    """The rows counted since the last call."""
    global _counted
    counted, _counted = _counted, 0.0
    return counted
