"""The refresh pipeline: discovery, ingestion, the cycle, back-fill, expiry."""
