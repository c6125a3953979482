"""Time, one model of it: the clocks a rank reads (:mod:`~gnntrain.timing.clock`, wall;
:mod:`~gnntrain.timing.virtual_clock`, virtual), the network model that times transfers from the
ranks' post times (:mod:`~gnntrain.timing.links`, :mod:`~gnntrain.timing.ops`), the trace of a run
(:mod:`~gnntrain.timing.trace`), replay (:mod:`~gnntrain.timing.replay`), the trace a prediction
writes (:mod:`~gnntrain.timing.builder`), the traffic kinds and the one accounting of an epoch's
time (:mod:`~gnntrain.timing.kinds`, :mod:`~gnntrain.timing.accounting`). It sits below the
communicator, the strategies, the engine, the job and the report, and imports none of them."""
