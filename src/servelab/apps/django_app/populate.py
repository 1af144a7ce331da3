"""Create the tables and a fixed data set: ``python -m servelab.apps.django_app.populate``.

Deterministic (a fixed random state), so every database holds the same rows and runs
compare. Run in a subprocess with the database's environment (``populate_database``).
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from servelab.errors import StackStartError

AUTHORS = 200
BOOKS = 5000


def sqlite_env(path: Path) -> dict[str, str]:
    """The environment that points the app at the SQLite file ``path``."""
    return {"SERVELAB_DJANGO_DB": "sqlite", "SERVELAB_DJANGO_SQLITE": str(path.resolve())}


def populate_database(
    env: Mapping[str, str], *, authors: int = AUTHORS, books: int = BOOKS, timeout_s: float = 120
) -> None:
    """Seed the database ``env`` names (see settings), in a fresh interpreter."""
    from servelab.apps import app_environment

    done = subprocess.run(
        [sys.executable, "-m", "servelab.apps.django_app.populate", str(authors), str(books)],
        capture_output=True,
        text=True,
        env=app_environment(env, None),
        timeout=timeout_s,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    if done.returncode != 0:
        tail = "\n".join(done.stderr.strip().splitlines()[-10:])
        last = tail.splitlines()[-1] if tail else f"exit code {done.returncode}"
        raise StackStartError(
            f"populating the Django app's database failed: {last}",
            "see the output below",
            detail=tail,
        )


def main(authors: int, books: int) -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "servelab.apps.django_app.settings")
    import django
    from django.core.management import call_command

    django.setup()
    from servelab.apps.django_app.models import Author, Book

    call_command("migrate", run_syncdb=True, verbosity=0)
    Book.objects.all().delete()
    Author.objects.all().delete()
    rng = random.Random(0)
    countries = ["DE", "FR", "HU", "IT", "JP", "US", "BR", "IN"]
    made = Author.objects.bulk_create(
        Author(name=f"Author {i}", country=rng.choice(countries)) for i in range(authors)
    )
    Book.objects.bulk_create(
        (
            Book(
                title=f"Book {i}",
                author=rng.choice(made),
                price_cents=rng.randrange(500, 6000),
                year=rng.randrange(1950, 2026),
            )
            for i in range(books)
        ),
        batch_size=1000,
    )


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]))
