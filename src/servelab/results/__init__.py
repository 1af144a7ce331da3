"""What was measured: frozen run records, the SQLite store, files written for the user."""
