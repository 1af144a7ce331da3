"""What stands in front of the app server (nothing, nginx, Apache): one module per front,
registered in ``servelab.registry``."""
