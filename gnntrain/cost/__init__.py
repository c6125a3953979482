"""What a training step costs before it runs: a rank's memory (:mod:`~gnntrain.cost.memory`, the
arithmetic the launcher's estimate and the predictor share), a step's kernel counts
(:mod:`~gnntrain.cost.kernels`) priced by a device profile (:mod:`~gnntrain.cost.profile`) into
seconds (:mod:`~gnntrain.cost.compute`), and a partition's shape (:mod:`~gnntrain.cost.shape`).
Below the strategies, whose timing models read it, and above the models and the data."""
