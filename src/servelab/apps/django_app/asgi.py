"""ASGI entry point: ``servelab.apps.django_app.asgi:application`` (sync views, threads)."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "servelab.apps.django_app.settings")
application = get_asgi_application()
