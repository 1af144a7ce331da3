"""run_load: an unsupported load is refused before anything runs."""

import pytest

from servelab.config.load import LoadSpec
from servelab.errors import SpecError
from servelab.load.ab import AbDriver
from servelab.load.base import run_load

from .common import GET, URL


def test_run_load_refuses_an_unsupported_load_before_running_anything(tmp_path):
    with pytest.raises(SpecError, match="ab cannot do this: ab has no fixed-rate"):
        run_load(
            AbDriver(program="/nonexistent/ab"),
            URL,
            GET,
            LoadSpec(model="open", rate=100, requests=10),
            tmp_path,
        )
