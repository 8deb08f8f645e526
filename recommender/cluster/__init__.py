"""Kubernetes in and out: discovery; later patches, evictions, in-place resizes."""
