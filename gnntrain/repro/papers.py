"""The papers whose tables gnntrain reproduces, each declared in its own module."""

from gnntrain.repro import adaqp, beyond, bns, gnnpipe, hopgnn, pipegcn
from gnntrain.repro.paper import Paper

PAPERS: dict[str, Paper] = {paper.name: paper for paper in (pipegcn.PAPER, bns.PAPER, adaqp.PAPER, gnnpipe.PAPER,
                                                          hopgnn.PAPER, beyond.NEUTRONTP_PAPER, beyond.SANCUS_PAPER,
                                                          beyond.SYLVIE_PAPER, beyond.PIPEQS_PAPER,
                                                          beyond.GRANNDIS_PAPER)}
"""Every paper, by the name ``make repro-<name>`` and ``python -m gnntrain.repro <name>`` take."""
