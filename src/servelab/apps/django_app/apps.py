from django.apps import AppConfig


class BookshopConfig(AppConfig):
    name = "servelab.apps.django_app"
    label = "bookshop"
