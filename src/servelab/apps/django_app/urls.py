from django.urls import path

from servelab.apps.django_app import views

urlpatterns = [
    path("books/", views.books),
    path("authors/<int:author_id>/", views.author),
    path("health/", views.health),
]
