"""Ready-made experiments, each reproducing a question from the seed articles."""

from __future__ import annotations

from servelab.errors import SpecError
from servelab.studies.base import Study, StudyOptions

# StudyOptions fields that only some studies read, with their CLI flags.
FAILURE_OPTIONS = {
    "rate": "--rate", "sleep_s": "--sleep", "somaxconn": "--somaxconn", "netns": "--netns",
    "timeout_s": "--timeout",
}


def check_options_apply(study: Study, options: StudyOptions) -> None:
    """A failure-mode option given to a study that does not read it is a mistake (the
    run would measure something other than what the user asked for): one line naming
    the studies it applies to."""
    for name, flag in FAILURE_OPTIONS.items():
        if getattr(options, name) is not None and name not in study.reads:
            readers = [s.name for s in all_studies().values() if name in s.reads]
            raise SpecError(
                f"{flag} does not apply to study {study.name!r}",
                f"drop {flag}, or use it with {', '.join(readers)}",
            )


def all_studies() -> dict[str, Study]:
    from servelab.studies.failures import FAILURE_STUDIES
    from servelab.studies.fronts import FRONT_STUDIES
    from servelab.studies.seeds import SEED_STUDIES
    from servelab.studies.shootout import SHOOTOUT_STUDIES

    return {
        study.name: study
        for study in (*SEED_STUDIES, *SHOOTOUT_STUDIES, *FRONT_STUDIES, *FAILURE_STUDIES)
    }


def get_study(name: str) -> Study:
    studies = all_studies()
    if name not in studies:
        raise SpecError(
            f"unknown study {name!r}",
            f"choose one of: {', '.join(studies)} (see `servelab studies`)",
        )
    return studies[name]
