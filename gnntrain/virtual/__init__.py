"""The cluster in virtual time (``cluster.clock=virtual``): a clock per rank that advances by the
rank's own compute and by the waits a network model gives (:mod:`gnntrain.virtual.clock`,
:mod:`gnntrain.virtual.ops`, :mod:`gnntrain.comm.link_model`), the trace of every run
(:mod:`gnntrain.virtual.trace`) and its replay under another network
(:mod:`gnntrain.virtual.replay`)."""
