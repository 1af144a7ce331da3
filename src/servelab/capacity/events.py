"""What a capacity search shows as it goes (``run``): a line per variant's rates, a line
per trial, and a note where the search turns (below the load driver's limit, or its
budget spent)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from servelab.capacity.plan import CapacityPlan
from servelab.capacity.search import Estimate, SearchSettings
from servelab.capacity.trials import Trial, sender_words

if TYPE_CHECKING:
    from rich.console import Console


class CapacityEvents:
    """What the CLI shows as a search goes: a line per trial, the answer per variant."""

    def on_variant(self, variant: str, settings: SearchSettings) -> None: ...

    def on_trial(self, trial: Trial, estimate: Estimate) -> None: ...

    def on_note(self, variant: str, note: str) -> None:
        """A turn the search took: it went on below the driver's limit, or its budget
        was spent."""


class ConsoleEvents(CapacityEvents):
    """A line per trial on the console: its rate (a replay's: its speed, times the log's
    traffic), what it measured, the estimate so far."""

    def __init__(self, console: Console, plan: CapacityPlan, replay: bool = False) -> None:
        self.console = console
        self.plan = plan
        self.replay = replay

    def _amount(self, value: float, digits: int = 0) -> str:
        return f"{value:,.2f}x" if self.replay else f"{value:,.{digits}f}"

    def on_variant(self, variant: str, settings: SearchSettings) -> None:
        what = "speeds" if self.replay else "rates"
        unit = " the log's traffic" if self.replay else " req/s"
        self.console.print(
            f"{variant}: {what} {self._amount(settings.start_rate)} to "
            f"{self._amount(settings.max_rate)}{unit}, at most {settings.max_trials} trials",
            highlight=False,
        )

    def on_note(self, variant: str, note: str) -> None:
        self.console.print(f"{variant}: {note}", highlight=False, markup=False)

    def on_trial(self, trial: Trial, estimate: Estimate) -> None:
        held = "held" if trial.outcome(self.plan.slo).held else "broke"
        so_far = ""
        if estimate.interval is not None and estimate.rate is not None:
            so_far = (
                f"; so far {self._amount(estimate.rate)} [{self._amount(estimate.interval[0])}, "
                f"{self._amount(estimate.interval[1])}]"
            )
        untrusted = f" (not trusted: {'; '.join(trial.problems)})" if trial.problems else ""
        if trial.delivered:
            so_far += f"; sent by {trial.by_machine()}"
        if trial.waited_s:
            so_far += (
                f"; its start waited {trial.waited_s:g} s for the machine's own speed to come "
                f"back{' (it did not: started slow)' if trial.started_slow else ''}"
            )
        sent = (
            f"{trial.rate:,.2f}x ({trial.asked_rps:,.1f} req/s)" if trial.asked_rps is not None
            else f"{trial.rate:,.1f} req/s"
        )
        fidelity = sender_words(trial)
        self.console.print(
            f"  trial {trial.number}: {sent}, p99 "
            f"{trial.latency_ms['p99']:,.1f} ms, {trial.errors} errors"
            f"{f', {fidelity}' if fidelity else ''}: {held}{untrusted}{so_far}",
            highlight=False, markup=False,
        )
