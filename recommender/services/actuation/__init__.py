"""Acting on clusters: approvals of resize changes (the updater comes next)."""
