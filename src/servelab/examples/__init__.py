"""Example experiment files (``servelab example NAME``)."""
