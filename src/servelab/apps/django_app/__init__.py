"""The Django reference app: a minimal project in code whose views run real ORM queries.

A bookshop: authors and their books. ``settings`` reads the database from the
environment (SQLite by default, or the PostgreSQL of ``servelab.services.postgres``:
``PostgresServer.django_env()``); ``populate`` creates the tables and a fixed data
set; ``wsgi:application`` and ``asgi:application`` are what servers load.
"""
