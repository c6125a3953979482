"""The entry points: ``gnntrain`` and ``gnntrain-partition`` (:mod:`~gnntrain.commands.train`),
``gnntrain-predict`` (:mod:`~gnntrain.commands.predict`), ``gnntrain-replay``
(:mod:`~gnntrain.commands.replay`) and ``python -m gnntrain.commands.docs``."""
