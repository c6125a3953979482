"""The graph-parallel family: every rank owns one partition of the graph (its inner nodes, the
halo rows it reads from other parts) and a replica of the whole model.

One epoch on rank ``r`` (:class:`GraphParallel`): the rank's *halo policy* picks the graph the
epoch trains on and how each layer obtains its halo rows, then the shared full-batch step
(:mod:`gnntrain.parallel.full_batch`) runs forward, loss share, backward, gradient all-reduce
over the ``gp`` axis (the whole world) and the optimizer step. Evaluation runs on the full
local graph with the policy's evaluation halo. The methods are presets of the policy:

* ``vanilla``: synchronous, full precision (:mod:`.synchronous`);
* ``pipegcn``: one epoch stale, overlapped, with smoothing (:mod:`.stale`);
* ``bns``: sampled boundary nodes; ``bes``, ``dropedge``: sampled edges (:mod:`.sampled`);
* ``adaqp``: quantized, with the central/marginal overlap (:mod:`.quantized`, :mod:`.overlap`).

``model.precompute_first`` (the authors' ``--use-pp``) aggregates the input features for the
first layer once (:meth:`~gnntrain.parallel.full_batch.FullBatchStep.model_input`), so no
policy exchanges layer 0's input (BNS never samples it). With ``dataset.inductive`` the ranks
train on the training nodes' subgraph and rank 0 scores validation and test on the graphs of
:mod:`gnntrain.parallel.inductive`.

Combinations come from the family's mechanisms (e.g. ``pipegcn`` with ``strategy.bits`` sends
its stale halos through the bit plans of :mod:`.bit_plans`).

The methods are declared, with their configs, in :mod:`.config`, which imports no torch.
"""

from gnntrain.strategies.graph_parallel.config import FAMILY

__all__ = ["FAMILY"]
