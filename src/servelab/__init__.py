"""servelab: measure how to serve a Python web app, on your own machine.

The library's front door (what the command line calls)::

    import servelab

    experiment = servelab.load_experiment("exp.toml")  # checked whole, plug-ins included
    result = servelab.measure(experiment, servelab.RunOptions(results_dir=Path("out")))
    for variant in result.analysis.variants:
        print(variant.variant, variant.workload, variant.comparisons["rps"].verdict)

``servelab.Experiment.from_toml`` reads a file and checks its shapes only (the model names
no plug-in); ``measure`` and ``run`` check the rest before anything starts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"
__all__ = [
    "Experiment", "RunOptions", "UserApp", "__version__", "load_experiment", "measure", "run",
]

if TYPE_CHECKING:
    from servelab.api import load_experiment, measure, run
    from servelab.config.experiment import Experiment
    from servelab.config.run import RunOptions, UserApp

# Imported on first use, so that `import servelab` (and the CLI's start) stays light.
_LAZY = {
    "load_experiment": "servelab.api",
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
