"""Views that do what a typical page does: a filtered, joined, paginated list and an aggregate."""

from __future__ import annotations

from django.db.models import Avg, Count
from django.http import HttpRequest, JsonResponse

from servelab.apps.django_app.models import Author, Book


def books(request: HttpRequest) -> JsonResponse:
    """Books in a price band with their authors (one JOIN), 20 a page, plus the band's count."""
    low = int(request.GET.get("min", 1000))
    high = int(request.GET.get("max", 3000))
    page = max(0, int(request.GET.get("page", 0)))
    band = Book.objects.filter(price_cents__gte=low, price_cents__lte=high)
    rows = band.select_related("author").order_by("price_cents", "id")[page * 20 : page * 20 + 20]
    return JsonResponse(
        {
            "count": band.count(),
            "books": [
                {"title": b.title, "author": b.author.name, "price_cents": b.price_cents}
                for b in rows
            ],
        }
    )


def author(request: HttpRequest, author_id: int) -> JsonResponse:
    """One author with the number and mean price of their books (GROUP BY)."""
    found = (
        Author.objects.filter(id=author_id)
        .annotate(n=Count("books"), mean=Avg("books__price_cents"))
        .values("name", "country", "n", "mean")
        .first()
    )
    if found is None:
        return JsonResponse({"error": "no such author"}, status=404)
    return JsonResponse(found)


def health(request: HttpRequest) -> JsonResponse:
    return JsonResponse({"ok": True})
