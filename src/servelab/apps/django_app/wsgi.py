"""WSGI entry point: ``servelab.apps.django_app.wsgi:application``."""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "servelab.apps.django_app.settings")
application = get_wsgi_application()
