"""Studies beyond the main table: each one a module with one entry point that writes a table and a plot."""
