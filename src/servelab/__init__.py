"""servelab: measure how to serve a Python web app, on your own machine.

The library's front door (what the command line calls)::

    import servelab

    experiment = servelab.Experiment.from_toml("exp.toml")
    result = servelab.measure(experiment, servelab.RunOptions(results_dir=Path("out")))
    for variant in result.analysis.variants:
        print(variant.variant, variant.workload, variant.comparisons["rps"].verdict)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"
__all__ = ["Experiment", "RunOptions", "UserApp", "__version__", "measure", "run"]

if TYPE_CHECKING:
    from servelab.api import measure, run
    from servelab.config.experiment import Experiment
    from servelab.config.run import RunOptions, UserApp

# Imported on first use, so that `import servelab` (and the CLI's start) stays light.
_LAZY = {
    "measure": "servelab.api",
    "run": "servelab.api",
    "Experiment": "servelab.config.experiment",
    "RunOptions": "servelab.config.run",
    "UserApp": "servelab.config.run",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'servelab' has no attribute {name!r}")
