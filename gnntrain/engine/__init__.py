"""The epoch loop and where its records go."""
