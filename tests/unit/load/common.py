"""What the driver tests share: captured outputs, a URL, requests."""

from pathlib import Path

from servelab.config.load import RequestSpec

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "load"
URL = "http://127.0.0.1:8080/items"
GET = RequestSpec()
POST = RequestSpec(method="POST", path="/items", body='{"a": 1}', headers={"X-Trace": "on"})
BODY = Path("/work/body")
WORK = Path("/work")


def read(name: str) -> str:
    return (FIXTURES / name).read_text()
