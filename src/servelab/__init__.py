"""servelab: measure how to serve a Python web app, on your own machine."""

__version__ = "0.1.0"
