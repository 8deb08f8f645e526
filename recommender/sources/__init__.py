"""Usage history in, as numpy batches: Prometheus, metrics-server and the simulated cluster."""
