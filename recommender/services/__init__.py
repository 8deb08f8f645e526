"""Use cases composed from the engine, sources, cluster adapters and models."""
