"""Use cases composed from the engine, the sources, the cluster adapters and the models."""
