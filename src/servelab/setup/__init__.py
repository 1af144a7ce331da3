"""`servelab setup`: everything the asked-for commands need on this machine, installed by
the package itself, so that a tool install (pipx, uv tool) sets up a machine as a
checkout does. scripts/setup.sh makes a checkout's .venv and then calls it: one route.

``servelab.host.parts`` is the table of what each part brings (doctor and the
errors name its parts in their fixes), ``steps`` the idempotent steps, ``run``
the order they go in."""
