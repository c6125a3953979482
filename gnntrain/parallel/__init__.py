"""Mechanisms of parallel training that name no strategy: the device mesh, halo exchange, the
full-batch step."""
