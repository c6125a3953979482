"""Data parallelism (``strategy=data_parallel``): declared in :mod:`.config`, implemented in
:mod:`.replicas`, whose docstring describes it."""

from gnntrain.strategies.data_parallel.config import FAMILY

__all__ = ["FAMILY"]
