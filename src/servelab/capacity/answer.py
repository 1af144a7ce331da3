"""A capacity search's answer in words: a line per variant for the terminal, and the
markdown summary (capacity.md)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from servelab.capacity.curve import SharePoint
from servelab.capacity.drift import drift
from servelab.capacity.machine import SLOW_SHARE
from servelab.capacity.plan import VariantCapacity, log_speed_limit
from servelab.capacity.slo import Slo
from servelab.capacity.trials import Trial, percent, sender_words

if TYPE_CHECKING:  # matplotlib is an extra
    from servelab.report.drawing import Chart


MIXED_SAID = 3  # fewer trials where held and broken overlap: noise at the boundary
# A stack that kept more than this share of its CPUs busy in the trials where it broke
# ran out of CPU there; below it, it broke with CPU to spare (it waited on something).
CPU_BOUND = 0.9
NEAR = 0.15  # trials within 15 % of the capacity speak for it


# Where one driver cannot send the rate: how to split it (docs/locust.md).
SPLIT_THE_DRIVER = (
    "split the load over machines: --driver locust with workers on others (--expect-workers)"
)


def rate(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


def speed(value: float | None) -> str:
    """A replay's speed: "2.40x"."""
    return "-" if value is None else f"{value:,.2f}x"


def amounts(answer: VariantCapacity) -> tuple[Callable[[float | None], str], str]:
    """How this answer's rates read: requests/s, or a replay's speeds (times its log's
    traffic); and the unit's words after an amount."""
    if answer.traffic is None:
        return rate, " req/s"
    return speed, " this log's traffic"


def point_words(
    point: SharePoint, amount: Callable[[float | None], str], unit: str, confidence: float
) -> str:
    """``1,380 req/s [1,320, 1,430] (90 %)``; the interval left out where the trials do
    not bound it."""
    if point.interval is None:
        return f"{amount(point.rate)}{unit} (no interval yet)"
    low, high = point.interval
    return f"{amount(point.rate)}{unit} [{amount(low)}, {amount(high)}] ({100 * confidence:g} %)"


def band_percent(ratio: float) -> str:
    """The band's width in words: one decimal under 10 % (a ratio of 1.005 is 0.5 %, not
    0 %), none above."""
    percent = 100 * (ratio - 1)
    return f"{percent:.1f} %" if percent < 10 else f"{percent:.0f} %"


def curve_words(answer: VariantCapacity, confidence: float) -> str | None:
    """The answer on the holding curve: a sharp edge as one number ("holds 177 req/s
    [170, 185] (90 %) in 90 % of trials; a sharp edge: held in half of them at 179, within
    that interval"), a wide band as both points and the band between them ("... in 90 %
    of trials, and 1,470 req/s [1,440, 1,500] in half of them: between the two a trial
    may hold or break, a band of 6.5 %"). None: no curve with a point."""
    curve = answer.curve
    if curve is None or curve.hold.rate is None:
        return None
    amount, unit = amounts(answer)
    share = f"{100 * curve.hold.share:g} %"
    said = f"holds {point_words(curve.hold, amount, unit, confidence)} in {share} of trials"
    if curve.half.rate is None:
        return said
    if curve.steep:
        return (
            f"{said}; a sharp edge: held in half of them at {amount(curve.half.rate)}, "
            "within that interval"
        )
    band = curve.ratio
    width = f", a band of {band_percent(band)}" if band is not None else ""
    return (
        f"{said}, and {point_words(curve.half, amount, unit, confidence)} in half of them: "
        f"between the two a trial may hold or break{width}"
    )


def ran_out_of_log(answer: VariantCapacity) -> str:
    """Where a replay's search stopped because its log ran out (a trial at a higher speed
    would be shorter than MIN_REPLAY_TRIAL_S), the words that say so; else ""."""
    e, traffic = answer.estimate, answer.traffic
    if traffic is None or not e.highest_held:
        return ""
    if e.highest_held < log_speed_limit(traffic.duration_s) / 1.01:
        return ""
    return (
        f", where the log runs out: its {traffic.duration_s:g} s last "
        f"{traffic.duration_s / e.highest_held:.1f} s at that speed, the shortest trial "
        f"that tells (replay a longer log or window to search higher)"
    )


def estimate_words(answer: VariantCapacity, confidence: float) -> str:
    """The answer where the trials fitted no curve yet (or the search has none): the
    bracket's ends, or where the SLO broke or held at every rate tried."""
    e = answer.estimate
    amount, unit = amounts(answer)
    if e.below_min:
        return f"breaks the SLO at every rate tried, down to {amount(e.lowest_broken)}{unit}"
    if e.above_max:
        said = f"holds the SLO at every rate tried, up to {amount(e.highest_held)}{unit}"
        return said + ran_out_of_log(answer)
    if e.interval is not None and e.rate is not None:
        low, high = e.interval
        return (
            f"holds {amount(e.rate)}{unit} [{amount(low)}, {amount(high)}] "
            f"({100 * confidence:g} %)"
        )
    if e.rate is not None:
        more = "--budget" if answer.budget_spent_s is not None else "--max-trials"
        return (
            f"holds about {amount(e.rate)}{unit}, no interval yet (held "
            f"{amount(e.highest_held)}, broke at {amount(e.lowest_broken)}): give it more "
            f"{more}"
        )
    # Ended (its budget, the driver) before any trial broke, or before any held.
    if e.highest_held is not None:
        return f"holds the SLO at every rate tried, up to {amount(e.highest_held)}{unit}"
    if e.lowest_broken is not None:
        return f"breaks the SLO at every rate tried, down to {amount(e.lowest_broken)}{unit}"
    return "no answer"


def fidelity_words(answer: VariantCapacity) -> str:
    """A replay's fidelity over its trials: "; the sender kept the log's schedule in 9
    trials (send lag p99 at most 1.6 ms, 100 % sent); 3 broken ones held it up (send lag
    p99 up to 874 ms, its connections all busy)". Empty for a fixed rate."""
    replayed = [t for t in answer.trials if t.send_lag_p99_ms is not None]
    if not replayed:
        return ""
    said = ""
    kept = [t for t in replayed if t.trusted and not t.held_up]
    if kept:
        lag = max(t.send_lag_p99_ms or 0.0 for t in kept)
        share = min(t.sent_share if t.sent_share is not None else 1.0 for t in kept)
        said += (
            f"; the sender kept the log's schedule in {len(kept)} trials (send lag p99 at "
            f"most {lag:,.1f} ms, {percent(share)} sent)"
        )
    held_up = [t for t in replayed if t.held_up]
    if held_up:
        lag = max(t.send_lag_p99_ms or 0.0 for t in held_up)
        said += (
            f"; {len(held_up)} broken {'one' if len(held_up) == 1 else 'ones'} held it up "
            f"(send lag p99 up to {lag:,.1f} ms, its connections all busy)"
        )
    return said


def ending_words(answer: VariantCapacity) -> str:
    """Where the load driver ran out of CPU ("; the load driver ran out of CPU at 12.00x:
    searched below it; to search higher, split ..."), and whether the budget ended the
    search; empty otherwise."""
    amount, unit = amounts(answer)
    said = ""
    if answer.sender_limit is not None:
        said += (
            f"; the load driver ran out of CPU at {amount(answer.sender_limit)}{unit}: "
            f"searched below it; to search higher, {SPLIT_THE_DRIVER}"
        )
    if answer.budget_spent_s is not None:
        said += (
            f"; its budget spent ({answer.budget_spent_s:.0f} s): a longer --budget "
            "narrows it"
        )
    return said


def variant_line(answer: VariantCapacity, slo: Slo, confidence: float) -> str:
    """``base: holds 812 req/s [781, 845] (90 %) in 90 % of trials; a sharp edge: ... at
    p99 < 100 ms, errors < 0.1 %; 11 trials; first failed requests at 1,040 req/s``; a
    replay's in times its log's traffic, with its peak second at that speed."""
    e = answer.estimate
    trials = f"{len(answer.trials)} trials"
    said = curve_words(answer, confidence) or estimate_words(answer, confidence)
    if answer.traffic is not None and e.rate is not None and not e.below_min:
        said += f" (the log's peak second then {answer.traffic.peak_second * e.rate:,.0f} req/s)"
    first = (
        speed(answer.first_errors_rate) if answer.traffic is not None
        else f"{rate(answer.first_errors_rate)} req/s"
    )
    tail = (
        f"; first failed requests at {first}" if answer.first_errors_rate is not None else ""
    )
    stopped = f"; stopped: {answer.stopped_because}" if answer.stopped_because else ""
    tail += mixed_words(answer, confidence) + fidelity_words(answer) + ending_words(answer)
    waited = sum(t.waited_s for t in answer.trials)
    slow = sum(t.started_slow for t in answer.trials)
    if waited:
        tail += f"; its starts waited {waited:g} s for the machine's own speed"
    if slow:
        tail += f" ({slow} started slow all the same)"
    return f"{answer.variant}: {said} at {slo}; {trials}{tail}{stopped}"


def markdown(
    answers: Sequence[VariantCapacity], slo: Slo, confidence: float, where: str
) -> str:
    unit = "req/s" if all(a.traffic is None for a in answers) else "x the log's traffic"
    share = next((a.curve.hold.share for a in answers if a.curve is not None), None)
    held_in = f"held in {100 * share:g} % of trials" if share is not None else "capacity"
    lines = [
        f"# Capacity at {slo}",
        "",
        f"The arrival rate each variant holds in {100 * share:g} % of trials (the planning "
        "figure) and in half of them, from the holding curve fitted to its trials, each "
        f"with its {100 * confidence:g} % interval; {where}." if share is not None else
        f"The largest arrival rate each variant holds, with its {100 * confidence:g} % "
        f"interval; {where}.",
        "",
        f"| variant | {held_in} [{unit}] | interval | held in half | interval | edge | "
        "trials | held / broke at | first errors |",
        "|---|---:|---|---:|---|---|---:|---|---:|",
    ]
    for a in answers:
        e = a.estimate
        amount = rate if a.traffic is None else speed

        def span(interval: tuple[float, float] | None, amount: Any = amount) -> str:
            return f"[{amount(interval[0])}, {amount(interval[1])}]" if interval else "-"

        half, half_interval, edge = "-", "-", "-"
        if a.curve is not None:
            half, half_interval = amount(a.curve.half.rate), span(a.curve.half.interval)
            band = a.curve.ratio
            edge = "sharp" if a.curve.steep else (
                f"a band of {band_percent(band)}" if band is not None else "-"
            )
        lines.append(
            f"| {a.variant} | {amount(e.rate)} | {span(e.interval)} | {half} | "
            f"{half_interval} | {edge} | {len(a.trials)} | "
            f"{amount(e.highest_held)} / {amount(e.lowest_broken)} | "
            f"{amount(a.first_errors_rate)} |"
        )
    replayed = next((a.traffic for a in answers if a.traffic is not None), None)
    if replayed is not None:
        lines += ["", f"Capacities of a replayed log are speeds: its traffic times them (1x: "
                  f"{replayed.requests:,} requests over {replayed.duration_s:,.1f} s, mean "
                  f"{replayed.mean_rate:,.1f} req/s, peak second {replayed.peak_second:,.0f} "
                  "req/s)."]
    ran_out = [line for a in answers if (line := cpu_line(a, slo)) is not None]
    if ran_out:
        lines += ["", "What ran out (the stack's CPUs busy in the trials within "
                  f"{100 * NEAR:g} % of the capacity):", ""]
        lines += [f"- {line}" for line in ran_out]
    moved = [line for a in answers for line in drift(a.trials).lines(a.variant)]
    if moved:
        lines += ["", "What moved during the search (over each variant's trusted trials, in "
                  "the order they ran):", ""]
        lines += [f"- {line}" for line in moved]
    said = [(a.variant, mixed_words(a, confidence)) for a in answers]
    if any(words for _, words in said):
        lines += ["", "Where held and broken trials overlap (the share held, its "
                  f"{100 * confidence:g} % Wilson interval):", ""]
        lines += [f"- {variant}{words.replace(';', ':', 1)}" for variant, words in said if words]
    if len(answers) > 1:
        from servelab.capacity.compare import compare_capacities

        lines += ["", f"Against {answers[0].variant} (ratio of capacities, its "
                  f"{100 * confidence:g} % interval, Holm over the variants):", ""]
        lines += [
            f"- {c.describe(answers[0].variant)}"
            for c in compare_capacities(answers, confidence)
        ]
    lines += ["", "## Trials", "",
              "| variant | # | rate | sent at | p99 ms | errors | trusted | machine speed | "
              "stack CPU |",
              "|---|---:|---:|---:|---:|---:|---|---|---|"]
    for a in answers:
        for t in a.trials:
            trusted = "yes" if t.trusted else "no: " + "; ".join(t.problems)
            at = f"{t.rate:,.1f}" if a.traffic is None else speed(t.rate)
            lines.append(
                f"| {a.variant} | {t.number} | {at} | {sent_at(t)} | "
                f"{t.latency_ms.get('p99', 0):,.1f} | {t.errors} | {trusted} | "
                f"{machine_speed(t)} | {stack_cpu(t)} |"
            )
    if any(t.cpu_speed is not None for a in answers for t in a.trials):
        lines += ["", "Machine speed: a fixed CPU loop on the stack's CPU before the trial's "
                  "start (units/s); a start waits while it reads below "
                  f"{100 * SLOW_SHARE:g} % of the usual speed, for at most --machine-wait "
                  "seconds."]
    if any(t.stack_cpu_share is not None for a in answers for t in a.trials):
        lines += ["", "Stack CPU: the share of the stack's CPUs its processes kept busy "
                  "during the trial, and their CPU time per answered request."]
    return "\n".join(lines) + "\n"


def cpu_line(answer: VariantCapacity, slo: Slo) -> str | None:
    """"base: near its capacity the stack's CPUs were 85-99 % busy where it held, 97-103 %
    where it broke: out of CPU" (from the trusted trials within NEAR of the capacity;
    None where the stack's CPU was not measured). Out of CPU, more workers will not raise
    the capacity; with CPU to spare, something else held the requests."""
    centre = answer.estimate.rate or answer.estimate.highest_held
    near = [
        (share, t.outcome(slo).held) for t in answer.trials
        if t.trusted and (share := t.stack_cpu_share) is not None
        and (centre is None or abs(t.rate / centre - 1) <= NEAR)
    ]
    if not near:
        return None
    held = [share for share, kept in near if kept]
    broke = [share for share, kept in near if not kept]

    def span(shares: list[float]) -> str:
        low, high = min(shares), max(shares)
        return f"{100 * low:.0f} %" if round(100 * low) == round(100 * high) else (
            f"{100 * low:.0f}-{100 * high:.0f} %"
        )

    said = [f"{span(held)} busy where it held"] if held else []
    if broke:
        said.append(f"{span(broke)} where it broke")
    line = f"{answer.variant}: near its capacity the stack's CPUs were {', '.join(said)}"
    if broke:
        bound = sorted(broke)[len(broke) // 2] >= CPU_BOUND
        line += ": out of CPU" if bound else ": with CPU to spare, it waited on something"
    return line


def stack_cpu(trial: Trial) -> str:
    """"93 % (0.64 ms a request)": the stack's CPUs busy over the trial."""
    per_request = trial.stack_cpu_ms_per_request
    if trial.stack_cpu_share is None or per_request is None:
        return "-"
    return f"{100 * trial.stack_cpu_share:.0f} % ({per_request:.2f} ms a request)"


def mixed_words(answer: VariantCapacity, confidence: float) -> str:
    """"; between 1,405 and 1,462 req/s 9 of 15 trials held (60 % [39, 78])": where held
    and broken trials overlap, with at least MIXED_SAID trials there (empty otherwise)."""
    band = answer.mixed
    if band is None or band.trials < MIXED_SAID:
        return ""
    low, high = band.share_interval(confidence)
    amount, unit = amounts(answer)
    return (
        f"; between {amount(band.low)} and {amount(band.high)}{unit} {band.held} of "
        f"{band.trials} trials held ({100 * band.held / band.trials:.0f} % "
        f"[{100 * low:.0f}, {100 * high:.0f}])"
    )


def machine_speed(trial: Trial) -> str:
    """The machine's speed before the trial's start, and any wait for it."""
    if trial.cpu_speed is None:
        return "-"
    waited = ""
    if trial.waited_s:
        waited = f" (waited {trial.waited_s:g} s{', still slow' if trial.started_slow else ''})"
    return f"{trial.cpu_speed:,.0f}{waited}"


def sent_at(trial: Trial) -> str:
    """The rate a trial was sent at, and by machine when workers on several sent it; a
    replay's with its fidelity."""
    by_machine = trial.by_machine()
    said = sender_words(trial)
    return (
        f"{trial.send_rate:,.1f}" + (f" ({by_machine})" if by_machine else "")
        + (f" ({said})" if said else "")
    )


def capacity_chart(answers: Sequence[VariantCapacity], slo: Slo, confidence: float) -> Chart:
    """Each variant's trials (p99 and failed share against the rate, every trial marked),
    the SLO's p99 and error bounds, each capacity's interval shaded."""
    from servelab.report.charts import ramp_chart

    p99 = next((b.limit_ms for b in slo.bounds if b.stat == "p99"), None)
    shaded = {a.variant: a.estimate.interval for a in answers if a.estimate.interval}
    return ramp_chart(
        {a.variant: [(t.rate, t.latency_ms.get("p99", 0.0), t.error_ratio) for t in a.trials]
         for a in answers},
        p99_limit_ms=p99, max_error_ratio=slo.max_error_ratio, name="capacity",
        shaded=shaded, joined=False,
        title=f"Capacity at {slo}: trials, and each {100 * confidence:g} % interval shaded",
    )


def curve_chart(answers: Sequence[VariantCapacity], slo: Slo) -> Chart | None:
    """The holding curves (report.holding): each variant's trials held or broken, its
    fitted curve and two points; None where no variant was searched on a curve."""
    from servelab.report.holding import HoldingSeries, holding_chart

    curves = [a.curve for a in answers if a.curve is not None]
    if not curves:
        return None
    series = {}
    for a in answers:
        outcomes = [(t.rate, t.outcome(slo).held) for t in a.trials if t.trusted]
        c = a.curve
        series[a.variant] = HoldingSeries(
            outcomes, c.points() if c is not None else (),
            c.hold.rate if c is not None else None, c.half.rate if c is not None else None,
        )
    unit = "req/s" if all(a.traffic is None for a in answers) else "x the log's traffic"
    return holding_chart(series, curves[0].hold.share, unit=unit)


def html_page(markdown_text: str, *charts: Chart | None) -> str:
    """capacity.html: the charts inline and capacity.md's text, self-contained."""
    from servelab.report.html import standalone_page

    figures = [(chart, chart.description) for chart in charts if chart is not None]
    return standalone_page("servelab capacity", figures, markdown_text)


def trials_csv(answers: Sequence[VariantCapacity]) -> str:
    """Every trial, one row each (--export-csv)."""
    import csv
    import io

    from servelab.capacity.slo import LATENCY_STATS

    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(["variant", "trial", "rate", "send_rate", "sent", "answered", "errors",
                     *(f"{stat}_ms" for stat in LATENCY_STATS), "driver_cpu_share",
                     "trusted", "problems", "sent_by_machine", "start", "cpu_speed",
                     "waited_s", "started_slow", "stack_cpu_share",
                     "stack_cpu_ms_per_request", "sender", "send_lag_p99_ms", "sent_share",
                     "peak_in_flight"])
    for answer in answers:
        for t in answer.trials:
            writer.writerow([
                t.variant, t.number, t.rate, f"{t.send_rate:.3f}", t.sent, t.answered,
                t.errors, *(f"{t.latency_ms.get(stat, 0):.3f}" for stat in LATENCY_STATS),
                f"{t.driver_cpu_share:.3f}", t.trusted, "; ".join(t.problems),
                "; ".join(f"{m} {rate:.3f}" for m, rate in t.delivered.items()),
                t.start, "" if t.cpu_speed is None else f"{t.cpu_speed:.0f}",
                f"{t.waited_s:g}", t.started_slow,
                "" if t.stack_cpu_share is None else f"{t.stack_cpu_share:.4f}",
                "" if t.stack_cpu_ms_per_request is None
                else f"{t.stack_cpu_ms_per_request:.4f}",
                t.sender.value, _blank(t.send_lag_p99_ms, ".3f"), _blank(t.sent_share, ".5f"),
                _blank(t.peak_in_flight, "d"),
            ])
    return buffer.getvalue()


def _blank(value: float | None, spec: str) -> str:
    return "" if value is None else format(value, spec)
