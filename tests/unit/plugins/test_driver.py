"""run_load: an unsupported load is refused before anything runs."""

from pathlib import Path

import pytest

from servelab.config.load import LoadSpec, RequestSpec
from servelab.errors import SpecError
from servelab.load.ab import AbDriver
from servelab.plugins.driver import run_load

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "load"  # captured outputs
URL = "http://127.0.0.1:8080/items"
GET = RequestSpec()



def test_run_load_refuses_an_unsupported_load_before_running_anything(tmp_path):
    with pytest.raises(SpecError, match="ab cannot do this: ab has no fixed-rate"):
        run_load(
            AbDriver(program="/nonexistent/ab"),
            URL,
            GET,
            LoadSpec(model="open", rate=100, requests=10),
            tmp_path,
        )


class Talking(AbDriver):
    """A driver whose program says who it is sending with on stderr, twice the same, then
    something else, while it runs; its output is read by ``parse`` as ab's would be."""

    @property
    def watches(self) -> bool:
        return True

    def watch(self, stderr: str) -> str | None:
        said = [line for line in stderr.splitlines() if line.startswith("with ")]
        return said[-1] if said else None

    def command(self, url, request, load, body_path, workdir):
        script = (
            "echo 'with b' >&2; sleep 0.5; echo 'with b' >&2; sleep 0.5; "
            "echo 'with b, c' >&2; sleep 0.5; cat " + str(FIXTURES / "ab_keepalive.txt")
        )
        return ["sh", "-c", script]


def test_what_the_driver_says_while_it_runs_is_heard_once_per_change(tmp_path):
    heard: list[str] = []
    run_load(Talking(program="sh"), URL, GET, LoadSpec(requests=10), tmp_path,
             on_note=heard.append)
    assert heard == ["with b", "with b, c"]
