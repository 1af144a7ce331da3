"""Renderers of results: one module per format."""
