"""The day's HTML reports, laid out from a `DayReport` (billing/publish/dayview.py).

The pages and emails are Jinja2 templates in `reports/`, all rendered through
one environment (`render_template`; the email bodies are billing/notify/letters.py) with the money, quantity and chart helpers; they only lay
out the numbers the view model holds, so a report of a re-run or back-filled
day is the same as the original.

Pages go to `<output_dir>/<day>/index.html` and `<output_dir>/<day>/teams/`
(billing/publish/links.py), so every day keeps its own report; `<output_dir>/index.html`
is the archive of every day that ran, and each day's pages link to the run
days before and after it.
"""

from __future__ import annotations

import itertools
import math
import os
import re
import tempfile
from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path

from jinja2 import Environment, FileSystemLoader, StrictUndefined
from markupsafe import Markup

from billing.charge.workload_names import UNATTRIBUTED
from billing.days import day_runs, days_in_month
from billing.money import cents, money, rounding, total
from billing.private import REPORT_DIRECTORY_MODE, private_directory, write_whole
from billing.publish.budgets import FORECAST_METHOD
from billing.publish.dayview import DayReport, RenderError, TrendDay, held_table
from billing.publish.formatting import (
    BORROWED_BEYOND,
    COST_RECOVERY,
    COST_RECOVERY_RULE,
    HELD_BEFORE_RUNNING,
    HELD_BEFORE_RUNNING_RULE,
    HELD_CHARGED,
    HELD_UNUSED,
    HELD_UNUSED_RULE,
    KUEUE_QUOTAS,
    KUEUE_QUOTAS_RULE,
    NO_WORKLOAD_RULE,
    RESOURCE_NAMES,
    ROUNDING,
    ROUNDING_NOTE,
    TEAM_NAMESPACES,
    TEAM_NAMESPACES_RULE,
    UNREQUESTED_SHARE,
    UNREQUESTED_SHARE_RULE,
    month_lines,
    person,
    price_change_note,
    quantity,
    su_text,
)
from billing.publish.links import day_page, team_page
from billing.resources import UNREQUESTED_RESOURCES

EMAIL_BAR_PX = 60  # tallest bar of the email trend chart


def _nice_ceiling(value: float) -> float:
    """The smallest of 1, 2, 2.5, 5 × 10^k that is at least value: a readable axis top."""
    if value <= 0:
        return 1.0
    power = 10 ** math.floor(math.log10(value))
    return next(step * power for step in (1, 2, 2.5, 5, 10) if step * power >= value)


@dataclass(frozen=True)
class Bar:
    day: date
    cost: float | None
    x: float
    height: float  # fraction of the chart's height, 0..1


@dataclass(frozen=True)
class Chart:
    bars: list[Bar]
    top: float  # the value at the top of the axis


def trend_chart(trend: list[TrendDay]) -> Chart:
    """Bar positions of a trend: x in bar widths, height relative to a readable axis top."""
    top = _nice_ceiling(max((t.cost or 0.0) for t in trend) if trend else 0.0)
    return Chart([Bar(t.day, t.cost, n, (t.cost or 0.0) / top) for n, t in enumerate(trend)], top)


def axis_label(value: float, top: float) -> str:
    """A value on the chart's axis, short enough for a phone: `0`, `5k`, `12.5k`, `2,500`, `0.50`."""
    if top >= 10_000:
        return f"{value / 1000:,.1f}".removesuffix(".0") + "k" if value else "0"
    return f"{value:,.0f}" if top >= 10 else f"{value:,.2f}"


def day_ranges(days: list[date]) -> str:
    """Days of one month as runs: `2–9, 11–18, 25`."""
    return ", ".join(f"{first.day}\u2013{last.day}" if last > first else str(first.day) for first, last in day_runs(days))


def trend_lines(trend: list[TrendDay], currency: str) -> list[str]:
    """The trend as text: one line per billed day with a bar of #, and one line per run of days never run
    (`never run: 27 days, 2026-10-20 … 2026-11-15`) rather than a line for each."""
    lines = []
    for never_run, run in itertools.groupby(trend_chart(trend).bars, key=lambda bar: bar.cost is None):
        bars = list(run)
        if never_run:
            days = f"{bars[0].day} … {bars[-1].day}" if len(bars) > 1 else str(bars[0].day)
            lines.append(f"never run: {len(bars)} day{'s' if len(bars) > 1 else ''}, {days}")
        else:
            lines += [f"{bar.day}  {money(bar.cost or 0.0, currency):>16}  {'#' * round(30 * bar.height)}".rstrip()
                      for bar in bars]
    return lines


def text_table(rows: list[list[str]], right: tuple[int, ...] = ()) -> str:
    """Rows of cells as aligned plain-text columns, each as wide as its widest cell; the columns whose
    indices are in `right` (amounts) right-aligned. Two spaces between columns."""
    widths = [max(len(row[i]) for row in rows if i < len(row)) for i in range(max(map(len, rows), default=0))]
    lines = ("  ".join(cell.rjust(widths[i]) if i in right else cell.ljust(widths[i]) for i, cell in enumerate(row))
             for row in rows)
    return "\n".join(line.rstrip() for line in lines)


# --- templates --------------------------------------------------------------


def measured(value: float | None, resource: str) -> str:
    """Resource-hours of waste, or a dash where the cluster does not measure it."""
    return "–" if value is None else quantity(value, resource)


def whole_unit(figure: str) -> Markup:
    """`48.00 GPU-h` with its unit in a span an email's CSS keeps on one line: where a phone's column is narrow,
    the unit goes under the figure whole instead of breaking at its hyphen ("GPU-" / "h")."""
    number, _, unit = figure.partition(" ")
    return Markup('{} <span class="unit">{}</span>').format(number, unit) if unit else Markup.escape(figure)


def template_dir() -> Path:
    """`reports/` of a checkout, or `billing/reports/` where pyproject installs it."""
    package = Path(__file__).parents[1]
    installed = package / "reports"
    return installed if installed.is_dir() else package.parent / "reports"


def _environment() -> Environment:
    env = Environment(
        loader=FileSystemLoader(template_dir()),
        autoescape=lambda name: name is None or not name.endswith(".txt.j2"),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters.update(money=money, quantity=quantity, cents=cents, day_ranges=day_ranges, measured=measured)
    env.filters.update(rounding=rounding, total=total, person=person, whole_unit=whole_unit, service_units=su_text)
    env.globals.update(axis_label=axis_label, trend_lines=trend_lines, text_table=text_table, rounding_note=ROUNDING_NOTE,
                       rounding_label=ROUNDING,
                       unrequested_share=UNREQUESTED_SHARE, unrequested_share_rule=UNREQUESTED_SHARE_RULE,
                       held_unused=HELD_UNUSED, held_unused_rule=HELD_UNUSED_RULE, team_namespaces=TEAM_NAMESPACES,
                       kueue_quotas=KUEUE_QUOTAS, kueue_quotas_rule=KUEUE_QUOTAS_RULE, borrowed_beyond=BORROWED_BEYOND,
                       held_before_running=HELD_BEFORE_RUNNING, held_before_running_rule=HELD_BEFORE_RUNNING_RULE,
                       held_charged=HELD_CHARGED,
                       team_namespaces_rule=TEAM_NAMESPACES_RULE, no_workload=UNATTRIBUTED, no_workload_rule=NO_WORKLOAD_RULE,
                       cost_recovery=COST_RECOVERY, cost_recovery_rule=COST_RECOVERY_RULE, price_change_note=price_change_note)
    env.globals.update(
        resource_names=RESOURCE_NAMES, unrequested_resources=UNREQUESTED_RESOURCES, trend_chart=trend_chart, timedelta=timedelta, email_bar_px=EMAIL_BAR_PX
    )
    env.globals.update(forecast_method=FORECAST_METHOD, days_in_month=days_in_month, held_view=held_table,
                       month_lines=month_lines)
    return env


_env = _environment()


def render_template(template: str, **values) -> str:
    """A template of `reports/` with the money, quantity and chart helpers (also for `billing serve`)."""
    return _env.get_template(template).render(**values)


def _write(path: Path, text: str) -> None:
    """Write whole or not at all: a reader never sees half a page. Pages show names and bills: 0640 in 0750
    directories (billing.private). The partial file is this writer's own: two runs of a day at once write the
    same pages, and a shared name would be moved away under the other."""
    write_whole(path, text.encode("utf-8"))


def _unwritable(output_dir: Path, exc: OSError) -> RenderError:
    return RenderError(f"cannot write the reports to output_dir {output_dir}: {exc.strerror or exc}")


def check_output_dir(output_dir: Path) -> None:
    """Raise RenderError now if the reports could not be written at the end of a run.

    A run checks this before it collects anything, so that it never replaces
    the day in the ledger and then fails for want of a place for its pages:
    it writes PROBE_BYTES to the disk (an empty file still fits on a full one)
    and takes them away again.
    """
    try:
        private_directory(output_dir, REPORT_DIRECTORY_MODE)
        with tempfile.TemporaryFile(dir=output_dir) as probe:
            probe.write(bytes(PROBE_BYTES))
            probe.flush()
            os.fsync(probe.fileno())  # a filesystem that allocates late says it is full only now
    except OSError as exc:
        raise _unwritable(output_dir, exc) from None


PROBE_BYTES = 4 * 2**20  # room a day's pages need, with a margin (the demo's 10 teams write 0.3 MiB a day)


def write_pages(report: DayReport, output_dir: Path) -> list[Path]:
    """The day's index.html and one page per team, the archive index, and the day links of the pages
    of the run days before and after; returns the files written."""
    days = _published(report, output_dir)
    index = day_page(report.day)
    pages = {output_dir / index: render_template("index.html.j2", report=report,
                                                 nav=_day_links(output_dir, index, days))}
    for team in report.teams:
        page = team_page(report.day, team.team)
        pages[output_dir / page] = render_template("team.html.j2", report=report, team=team,
                                                   nav=_day_links(output_dir, page, days))
    try:
        for path, text in pages.items():
            _write(path, text)
        for neighbour in _neighbours(days, report.day):
            _relink(output_dir, neighbour, days)
        _write(output_dir / "index.html", render_template(
            "archive.html.j2", archive=report.archive, published=set(days)))
    except OSError as exc:
        raise _unwritable(output_dir, exc) from None
    return [*pages, output_dir / "index.html"]


# --- links between the days' pages ---------------------------------------------

_DAY_NAV = re.compile(r'<nav class="days".*?</nav>', re.S)


def _published(report: DayReport, output_dir: Path) -> list[date]:
    """The days a page may link to: days the ledger records a run of, whose pages are in output_dir."""
    ran = {entry.day for month in report.archive for entry in month.days}
    return sorted(d for d in ran if d == report.day or (output_dir / day_page(d)).is_file())


def _neighbours(days: list[date], day: date) -> list[date]:
    """The run days just before and after `day`, where there are."""
    earlier, later = [d for d in days if d < day], [d for d in days if d > day]
    return earlier[-1:] + later[:1]


def _day_links(output_dir: Path, page: str, days: list[date]) -> dict:
    """previous and next: (day, href) of the same page (a team's, or all teams') on the run days before and
    after, or that day's all-teams page where the team has none; None where no such day ran; archive: href."""
    day = date.fromisoformat(page.split("/", 1)[0])
    up = "../" * page.count("/")

    def link(other: date) -> tuple[date, str]:
        same = other.isoformat() + page.removeprefix(day.isoformat())
        return other, up + (same if (output_dir / same).is_file() else day_page(other))

    earlier, later = [d for d in days if d < day], [d for d in days if d > day]
    return {"previous": link(earlier[-1]) if earlier else None, "next": link(later[0]) if later else None,
            "archive": f"{up}index.html"}


def _relink(output_dir: Path, day: date, days: list[date]) -> None:
    """Rewrite the day links of a day's pages already written (a later run day now follows them)."""
    day_nav = _env.get_template("macros.html.j2").module.day_nav  # type: ignore[attr-defined]
    for path in sorted((output_dir / day.isoformat()).rglob("*.html")):
        html = path.read_text(encoding="utf-8")
        found = _DAY_NAV.search(html)
        if found:  # pages written before day links were added have none
            nav = str(day_nav(_day_links(output_dir, path.relative_to(output_dir).as_posix(), days))).strip()
            _write(path, html[:found.start()] + nav + html[found.end():])
