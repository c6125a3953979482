"""Tensor parallelism (``strategy=neutrontp``): declared in :mod:`.config`, implemented in
:mod:`.neutrontp`, whose docstring describes it."""

from gnntrain.strategies.tensor_parallel.config import FAMILY

__all__ = ["FAMILY"]
