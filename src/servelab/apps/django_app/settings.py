"""Settings of the Django reference app, from the environment.

SERVELAB_DJANGO_DB: ``sqlite`` (default; file SERVELAB_DJANGO_SQLITE) or
``postgresql`` (SERVELAB_PG_HOST, _PORT, _NAME, _USER; no password: servelab's
own cluster trusts loopback).
"""

from __future__ import annotations

import os
import tempfile

SECRET_KEY = "servelab-reference-app-not-secret"  # a benchmark app, never deployed
DEBUG = False
ALLOWED_HOSTS = ["*"]
USE_TZ = True
ROOT_URLCONF = "servelab.apps.django_app.urls"
INSTALLED_APPS = ["servelab.apps.django_app"]
MIDDLEWARE: list[str] = []
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

_engine = os.environ.get("SERVELAB_DJANGO_DB", "sqlite")
if _engine == "postgresql":
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.postgresql",
            "HOST": os.environ["SERVELAB_PG_HOST"],
            "PORT": os.environ["SERVELAB_PG_PORT"],
            "NAME": os.environ["SERVELAB_PG_NAME"],
            "USER": os.environ["SERVELAB_PG_USER"],
            # One connection per worker thread, kept between requests, as deployed.
            "CONN_MAX_AGE": 60,
        }
    }
elif _engine == "sqlite":
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": os.environ.get(
                "SERVELAB_DJANGO_SQLITE", os.path.join(tempfile.gettempdir(), "servelab-django.db")
            ),
        }
    }
else:
    raise RuntimeError(f"SERVELAB_DJANGO_DB must be 'sqlite' or 'postgresql', not {_engine!r}")
