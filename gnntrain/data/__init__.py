"""Datasets and partitions: where a graph comes from (:mod:`.sources`, declared without torch, and
the loaders, :mod:`.registry`), its partition (:mod:`.partition`) and everything a job needs
before its workers start (:mod:`.job`)."""
