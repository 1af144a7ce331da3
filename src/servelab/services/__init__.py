"""Backing services servelab starts for an app: its own PostgreSQL, a slowed link to it."""
