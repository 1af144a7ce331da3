"""Load drivers: one module per tool behind the ``LoadDriver`` protocol, registered in
``servelab.registry``."""
