"""Usage history in, as numpy batches: Prometheus, metrics-server, simulated cluster."""
