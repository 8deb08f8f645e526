"""Read models: what the pages (and the webhook's cache) read, kept current by the
write side through one call per refresh (``upkeep.kept_current``) and read by
``dashboard/``, the API and notifications; nothing here imports a use case."""
