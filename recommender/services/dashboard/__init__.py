"""Read models of the dashboard's pages."""
