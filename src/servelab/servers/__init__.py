"""App servers: one module per server, registered in ``servelab.registry``."""
