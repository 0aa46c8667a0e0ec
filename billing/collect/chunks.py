"""How one cluster-day is cut for asking: into step-aligned chunks of instants (docs/spec.md "Rule 1: sampling
instants"), sized so that no query holds more samples than a small Prometheus allows, and into hours. The queries'
text (promql.py) reads a chunk's window from it; the machinery that asks (asking.py) goes through the pieces."""

from __future__ import annotations

from dataclasses import dataclass

from billing.collect.prometheus import PrometheusError
from billing.days import BillingDay

CHUNK_INSTANTS = 360  # instants per query: 6 h at a 60 s step
# samples one query may hold at once: a fifth of Prometheus' default --query.max-samples (50 M). The usage query's
# subquery holds one per pod and instant; chunks are made shorter where the busiest hour's pods would hold more.
SAMPLES_PER_QUERY = 10_000_000
HOUR = 3600


@dataclass(frozen=True)
class Chunk:
    """Instants start, start+step, ..., end-step of one piece of the day (unix seconds)."""

    start: int
    end: int
    step: int

    @property
    def last(self) -> int:
        return self.end - self.step


def chunks(day: BillingDay, step: int, busiest: int = 0) -> list[Chunk]:
    """The day cut into step-aligned pieces of CHUNK_INSTANTS instants; or, where that many instants of `busiest`
    pods (Store.busiest) would hold more than SAMPLES_PER_QUERY samples, of as many whole hours as keep within it
    (one at least): 3 hours for 48,000 pods at a 60 s step."""
    instants = CHUNK_INSTANTS
    if busiest * instants > SAMPLES_PER_QUERY:
        instants = min(instants, whole_hours(busiest, step, CHUNK_INSTANTS) * (HOUR // step))
    return _pieces(day, step, instants)


def whole_hours(busiest: int, step: int, most: int) -> int:
    """The most whole hours, `most` at most and one at least, whose instants of `busiest` pods hold no more than
    SAMPLES_PER_QUERY samples."""
    return max(1, min(most, SAMPLES_PER_QUERY // max(1, busiest * (HOUR // step))))


def hours_of(day: BillingDay, step: int) -> list[Chunk]:
    """The day cut into its hours (the last is half an hour where daylight saving moves clocks by half an hour)."""
    return _pieces(day, step, HOUR // step)


def _pieces(day: BillingDay, step: int, instants: int) -> list[Chunk]:
    """The day cut into step-aligned pieces of at most `instants` instants."""
    start, end = int(day.start.timestamp()), int(day.end.timestamp())
    if start % step:
        raise PrometheusError(
            f"local midnight of {day.date} is not a multiple of the {step}s step in Unix time; "
            "choose a step that divides the time zone's UTC offset"
        )
    size = instants * step
    return [Chunk(t, min(t + size, end), step) for t in range(start, end, size)]



def hour_groups(hours: list[Chunk], per_group: int) -> list[list[Chunk]]:
    """Runs of at most `per_group` consecutive hours of one length (a day's last may be shorter), each
    asked in one range query."""
    groups: list[list[Chunk]] = []
    for hour in hours:
        last = groups[-1] if groups else None
        if last and len(last) < per_group and last[0].end - last[0].start == hour.end - hour.start:
            last.append(hour)
        else:
            groups.append([hour])
    return groups
