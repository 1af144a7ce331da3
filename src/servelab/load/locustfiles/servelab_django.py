"""servelab's built-in scenario for the Django reference app (``--app django``): a
visitor browses the bookshop's list pages (a random price band and page; grouped as
``/books/``), and one time in four opens an author's page (``/authors/[id]/``), with
no think time. FastHttpUser. Any answer but 200 is a failure named after its status.
"""

from __future__ import annotations

import random

from locust import FastHttpUser, constant, task

AUTHORS = 200  # servelab.apps.django_app.populate
LOW, HIGH = 500, 6000  # book prices in cents


class BookshopVisitor(FastHttpUser):
    wait_time = constant(0)

    def _get(self, path: str, name: str) -> None:
        with self.client.get(
            path, name=name, catch_response=True, headers={"Accept-Encoding": "identity"}
        ) as response:
            if response.status_code == 200:
                response.success()
            elif response.status_code:
                response.failure(f"status {response.status_code}, expected 200")
            else:
                response.failure(response.error or "no answer")

    @task(3)
    def books(self) -> None:
        low = random.randrange(LOW, HIGH - 500, 100)
        high = low + random.choice((500, 1000, 2000))
        self._get(f"/books/?min={low}&max={high}&page={random.randrange(3)}", "/books/")

    @task(1)
    def author(self) -> None:
        self._get(f"/authors/{random.randrange(1, AUTHORS + 1)}/", "/authors/[id]/")
