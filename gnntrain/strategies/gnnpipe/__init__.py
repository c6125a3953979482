"""GNNPipe (``strategy=gnnpipe``): declared in :mod:`.config`, implemented in :mod:`.pipeline`,
whose docstring describes it."""

from gnntrain.strategies.gnnpipe.config import FAMILY

__all__ = ["FAMILY"]
