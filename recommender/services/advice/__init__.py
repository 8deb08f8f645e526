"""What should this pod request: one advice path for every caller."""
