"""What a person asked: the day, month, range, subject and breakdown of a question, read once from what they typed,
for `billing report`, `statement`, `close`, `invoice import`, `billing serve` and `billing mcp` alike.

Each interface names its arguments in its own words (`to=` in serve, `last_day` for an assistant, `--to` on the
command line, where click names the option itself), so a refusal is one sentence about what the person typed, and
the same typed value is refused in the same words everywhere. What a question is answered with is
billing/publish/answers.py; who may ask it is billing/web/access.py.

This module imports nothing heavy: the command line reads its options with it as it starts
(tests/cli/test_cli_imports.py).
"""

from __future__ import annotations

from datetime import date, datetime
from typing import TYPE_CHECKING
from zoneinfo import ZoneInfo

from billing.days import NotADay, parse_day, parse_month, yesterday
from billing.errors import UsageError
from billing.publish.choices import GROUPINGS, LABEL_PREFIX, WORKLOAD

if TYPE_CHECKING:
    from billing.ledger.questions import Subject

LONGEST_RANGE = 366  # days one question of billing serve or billing mcp may span (the command line has no limit)


class ReportError(UsageError):
    """The question cannot be answered as asked (a day that is none, an unknown team, mixed currencies)."""


def _named(name: str, error: NotADay) -> ReportError:
    """The refusal of a typed value, naming the argument as `name=value` where the interface has a name to give."""
    return ReportError(f"{name}={error}" if name else str(error))


def day(value: str | None, name: str = "") -> date | None:
    """A typed day (billing.days.parse_day), None when not given; ReportError naming the argument `name`."""
    if value is None:
        return None
    try:
        return parse_day(value)
    except NotADay as exc:
        raise _named(name, exc) from None


def month(value: str, name: str = "") -> date:
    """A typed month, YYYY-MM (billing.days.parse_month), as its first day; ReportError naming the argument `name`."""
    try:
        return parse_month(value)
    except NotADay as exc:
        raise _named(name, exc) from None


def report_range(zone: ZoneInfo, first: date | None, last: date | None, now: datetime | None = None
                 ) -> tuple[date, date]:
    """The days asked for; by default the month to date (on the 1st: all of last month).

    Without --to the range ends yesterday; without --from it starts on the
    first day of the month of its end.
    """
    last = last or yesterday(zone, now)
    first = first or last.replace(day=1)
    if last < first:
        raise ReportError(f"the range ends ({last}) before it starts ({first})")
    return first, last


def bounded_range(zone: ZoneInfo, first: str | None, last: str | None, names: tuple[str, str]) -> tuple[date, date]:
    """The range of a question to serve or mcp, from its first and last day as typed (left out or empty: the
    defaults of `report_range`), errors naming the arguments `names`; at most LONGEST_RANGE days, so that one
    question cannot make the server read years of rows."""
    begin, end = report_range(zone, day(first or None, names[0]), day(last or None, names[1]))
    if (end - begin).days >= LONGEST_RANGE:
        raise ReportError(f"the range {begin} to {end} is longer than {LONGEST_RANGE} days; ask for a shorter one")
    return begin, end


def subject(team: str | None, person: str | None, everyone: bool = False,
            names: tuple[str, ...] = ("team", "person")) -> Subject | None:
    """The team, person or everyone a question names; None when it names none (serve and mcp then answer for the
    viewer, billing/web/access.py). ReportError when it names more than one, in the words `names` (how the
    interface spells its choices)."""
    from billing.ledger.questions import Subject  # when asked: the ledger's questions import SQLAlchemy

    named = [Subject(kind, name) for kind, name in (("team", team), ("person", person)) if name is not None]
    named += [Subject("all")] if everyone else []
    if len(named) > 1:
        choices = f"{', '.join(names[:-1])} or {names[-1]}"
        raise ReportError(f"give {choices}, not {'both' if len(names) == 2 else 'more than one'}")
    return named[0] if named else None


def breakdown(by: str | None, cost_labels: list[str]) -> str | None:
    """`by` checked: a GROUPINGS word, `workload`, or `label:NAME` of a configured cost label (else ReportError)."""
    if by is None or by in GROUPINGS or by == WORKLOAD:
        return by
    if by.startswith(LABEL_PREFIX):
        name = by.removeprefix(LABEL_PREFIX)
        if name in cost_labels:
            return by
        configured = f"names {', '.join(cost_labels)}" if cost_labels else "is empty"
        raise ReportError(f"cannot break down by label {name!r}: it is not in the config key cost_labels, "
                          f"which {configured}")
    raise ReportError(f"cannot group by {by!r}: give one of {', '.join(GROUPINGS)}, {WORKLOAD} or {LABEL_PREFIX}NAME")
