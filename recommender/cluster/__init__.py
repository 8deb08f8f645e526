"""Kubernetes in and out: discovery, and (later) pod patches, evictions and in-place resizes."""
