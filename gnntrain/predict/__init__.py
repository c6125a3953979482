"""Every method's epoch time, traffic and memory on a described cluster, predicted without
training (``gnntrain-predict``; :mod:`gnntrain.predict.predictor` says how)."""
