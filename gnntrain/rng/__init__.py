"""Random draws that repeat: keyed generators (:mod:`~gnntrain.rng.keyed`) and 16-bit draws for
stochastic rounding and dropout (:mod:`~gnntrain.rng.random16`)."""
