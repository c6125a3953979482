"""The cluster in virtual time (``cluster.clock=virtual``): a clock per rank that advances by the
rank's own compute and by the waits a network model gives (:mod:`gnntrain.virtual.clock`,
:mod:`gnntrain.virtual.ops`, :mod:`gnntrain.virtual.link_model`), the trace of every run
(:mod:`gnntrain.virtual.trace`), which :mod:`gnntrain.report.replay` times again under another
network. Nothing here imports the communicator (:mod:`gnntrain.comm.communicator`), which posts
to it."""
