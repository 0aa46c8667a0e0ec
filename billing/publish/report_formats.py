"""A `Report` as text for a terminal, a spreadsheet, a program or a browser.

Money is shown with its currency, two decimals and thousands separators;
resource-hours with their unit. Only the table and HTML round, each figure
once (money.cents), with a Rounding row where a money column's rows do
not add up to its total (money.rounding); CSV
carries the ledger's values to 12 significant digits (no float noise), JSON
as they are. Names come from the directory and Kubernetes, so
every format guards against what they may contain: control characters in
the table, formulas in CSV cells, markup in HTML.
"""

from __future__ import annotations

import csv
import io
import json
import shutil
import textwrap
import unicodedata
from datetime import date
from decimal import Decimal
from typing import Any

from billing.charge.workload_names import UNATTRIBUTED
from billing.days import day_runs, days_in_month
from billing.ledger.questions import LIST_COST
from billing.money import cents, money, plain_number, rounding, total
from billing.publish.choices import LABEL_PREFIX, REPORT_FORMATS, WORKLOAD
from billing.publish.credits import CREDIT_MEANINGS, CREDIT_SUMS
from billing.publish.formatting import (
    COST_RECOVERY,
    COST_RECOVERY_RULE,
    KUEUE_QUOTAS,
    KUEUE_QUOTAS_RULE,
    NO_WORKLOAD_RULE,
    ROUNDING,
    ROUNDING_NOTE,
    TEAM_NAMESPACES,
    UNREQUESTED_SHARE_RULE,
    held_gpus,
    person,
    price_change_note,
    quantity,
    resource_name,
)
from billing.publish.formatting import UNREQUESTED_SHARE as UNREQUESTED_SHARE_NAME
from billing.publish.report import (
    HELD_COLUMN,
    HOURS_COLUMNS,
    NOT_BROKEN_DOWN,
    REQUESTED_COST,
    SERVICE_UNITS,
    UNREQUESTED_SHARE,
    Report,
)
from billing.resources import GPU, LENT, QUOTA, QUOTA_PREFIX, RECOVERY, REGISTRY, RESOURCES, UNITS, Derived, Names

WIDTH = 80  # the narrowest terminal the table is fitted to (a wider one, or $COLUMNS, gives it more room)
MONEY = ["cost", REQUESTED_COST, UNREQUESTED_SHARE, LIST_COST]  # with a Rounding row where they miss their totals
SUMMED = Names(lambda: [*HOURS_COLUMNS.values(), *MONEY])  # not held_hours: slices, replicas and GPUs are no one unit
NUMERIC = Names(lambda: [*SUMMED, "held_hours", "quantity", "unit_price", SERVICE_UNITS])
NAMED_AS_THEY_ARE = RESOURCES  # a report's requested resources keep the names it groups by
FOR_MACHINES = {LIST_COST}  # in CSV and JSON; the table and HTML show the discount on the day's pages instead
LABELS = Derived(lambda: {**{column: _hours_label(resource) for resource, column in HOURS_COLUMNS.items()},
                          "unit_price": "unit price", "held_hours": "held unit-h", HELD_COLUMN: "GPUs held",
                          SERVICE_UNITS: "SU"})
# hours columns of resources no node offers (storage): in the table and HTML only where a row has some, so that a
# cluster without them reads as before; CSV and JSON always have every column, a schema that does not move
SHOWN_IF_USED = Names(lambda: [HOURS_COLUMNS[name] for name, resource in REGISTRY.items() if not resource.offered_by_nodes])
SHARE_LABEL = "unrequested"  # short for the terminal; the note under the table names it in full
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
CURRENCY = "currency"  # each row's, in CSV; a column of the table and JSON's rows where they are in several


def _in(report: Report) -> str:
    """` EUR` after a money column's name where the rows are in one currency; '' where a column of its own says it."""
    return "" if _several(report) else f" {report.currency}"


def _several(report: Report) -> bool:
    return len(report.totals.currencies) > 1


def _hours_label(resource: str) -> str:
    """A resource-hours column's label, its unit (`GiB-h`); a later resource's of the same unit names its word too
    (`storage GiB-h` beside memory's)."""
    unit = UNITS[resource]
    first = next(name for name in REGISTRY if UNITS[name] == unit)
    return unit if first == resource else f"{REGISTRY[resource].word} {unit}"


def _label(report: Report, column: str) -> str:
    if column == "cost":
        return f"cost{_in(report)}"
    if column == REQUESTED_COST:
        return f"requested{_in(report)}"
    if column == UNREQUESTED_SHARE:
        return f"{SHARE_LABEL}{_in(report)}"
    if column == "gpu_hours" and (HELD_COLUMN in report.columns or report.by == "resource"):
        return f"{UNITS[GPU]} (physical)"  # beside what was held, which was slices or replicas
    return LABELS.get(column, column.replace("_", " "))


def _text(column: str, value: object) -> str:
    """A key cell for people: a team namespace has no owner, a CPU row no GPU model."""
    if column == HELD_COLUMN and isinstance(value, list):
        return held_gpus(value) or "-"
    if value is None:
        return TEAM_NAMESPACES if column in ("person", "owner") else "-"
    if value == "" and column == "gpu_model":
        return "(none)"
    if value == "" and column.startswith("label_"):
        return "(no label)"  # a pod without the cost label
    return value.isoformat() if isinstance(value, date) else str(value)


def _number(column: str, value: float) -> str:
    if column == "unit_price":
        return f"{value:,.4f}"
    return f"{cents(value):,.2f}" if value or column == "cost" else "-"


def _cell(column: str, value: Any, people: dict[str, str] | None = None) -> str:
    if column in ("person", "owner") and value and people:
        return person(value, people)  # `Alice Example (alice)`
    if column == "resource" and value not in NAMED_AS_THEY_ARE:
        return resource_name(value)  # `Unrequested capacity (shared), GPU` for the ledger's unrequested-gpu
    return _number(column, value) if column in NUMERIC else _text(column, value)


def _columns(report: Report) -> list[str]:
    """The columns people read: without FOR_MACHINES; where the rows are in several currencies, each row's
    currency after its key."""
    columns = [c for c in report.columns if c not in FOR_MACHINES
               and (c not in SHOWN_IF_USED or any(row[c] for row in report.rows))]
    if _several(report):
        columns.insert(next((i for i, c in enumerate(columns) if c in NUMERIC or c == HELD_COLUMN), len(columns)), CURRENCY)
    return columns


def _shown(report: Report, names: bool) -> tuple[list[str], list[list[str]], list[list[str]]]:
    """Columns, cells and total lines as people read them: with `names`, display names beside uids; each money
    figure rounded once, a total line per currency, and a Rounding row after the rows where a money column's rows
    of a currency do not add up to its total."""
    columns = _columns(report)
    people = report.people if names else None
    rows = [[_cell(c, row[c], people) for c in columns] for row in report.rows]  # a fraction of a cent reads 0.00
    lines = []
    for currency, part in _per_currency(report):
        sums, differences = _rounded(report, part)
        if any(differences.values()):
            rows.append(_line(columns, ROUNDING, currency, {c: v for c, v in differences.items() if c in columns}))
        lines.append(_line(columns, "total", currency, sums))
    return columns, rows, lines


def _line(columns: list[str], name: str, currency: str, figures: dict) -> list[str]:
    """A Rounding or total line: its name first, its currency in the currency column, its figures as cells."""
    return [name if i == 0 else currency if c == CURRENCY else _cell(c, figures[c]) if c in figures
            else "-" if c == "held_hours" and name == "total" else "" for i, c in enumerate(columns)]


def _per_currency(report: Report) -> list[tuple[str, list[dict]]]:
    """The rows of each currency the report holds (its `totals`' order); one currency without rows has none."""
    return [(currency, [row for row in report.rows if report.currency_of(row) == currency])
            for currency in report.totals.currencies]


def _rounded(report: Report, rows: list[dict]) -> tuple[dict[str, float], dict[str, Decimal]]:
    """The totals of the summed columns of rows in one currency, and what each money column's rows, each its exact
    sum rounded once, miss of its total (the Rounding row): requested and unrequested too (docs/spec.md "Rounding:
    one figure everywhere"), so that a group's requested cost reads the same in the table, its JSON and on serve's
    pages, and the total is the rows' exact sum rounded once (a requested 280.655 beside 10.00 read 290.65, cost less
    unrequested, where its sum is 290.66)."""
    sums = totals(report, rows)
    return sums, {c: rounding([row[c] for row in rows], sums[c]) for c in report.columns if c in MONEY}


def explanations(report: Report) -> list[str]:
    """The sentences a reader of the table needs: what the unrequested share and the part of no workload are,
    and, where a table has a Rounding row, what it is."""
    found = ([f"{SHARE_LABEL}{_in(report)} = {UNREQUESTED_SHARE_NAME}: {UNREQUESTED_SHARE_RULE}; "
              f"requested{_in(report)} is what the requested hours cost. Each is its exact sum rounded once: "
              f"beside reserved pools, quotas and their credits, and shares of unattributed energy (in the cost, in "
              f"neither), or by a cent of rounding, they need not add up to the cost."]
             if UNREQUESTED_SHARE in report.columns else [])
    if any(row.get("workload") == UNATTRIBUTED for row in report.rows):
        found.append(f"{UNATTRIBUTED} is {NO_WORKLOAD_RULE}.")
    if any(str(row.get("resource", "")).startswith((QUOTA, LENT)) or str(row.get("namespace", "")).startswith(QUOTA_PREFIX)
           for row in report.rows):
        found.append(f"{KUEUE_QUOTAS}: {KUEUE_QUOTAS_RULE}.")
    if report.recovered:
        found.append(recovery_note(report.recovered))
    if report.recovery_apart:
        found.append(recovery_apart_note(report.recovery_apart))
    if any(difference for _, part in _per_currency(report)
           for c, difference in _rounded(report, part)[1].items() if c not in FOR_MACHINES):
        found.append(ROUNDING_NOTE)
    return found


def recovery_note(recovered: list[dict]) -> str:
    """What a figure holding closed months' cost recovery, subsidies and monthly credits (ledger.read.recovered)
    says of them."""
    notes = []
    for kind, words, rule in ((RECOVERY, f"{COST_RECOVERY} ({{}}) is", COST_RECOVERY_RULE),
                              *((kind, f"{words} ({{}}) are", CREDIT_MEANINGS[kind])
                                for kind, words in CREDIT_SUMS.items())):
        months = ", ".join(sorted({f"{line['month']:%Y-%m}" for line in recovered if line["kind"] == kind}))
        if months:
            notes.append(f"{words.format(months)} in these figures: {rule}")
    return "; ".join(notes) + "; as the month's statement and billing export have it."


def recovery_apart_note(months: list[date]) -> str:
    """What a range holding part of a closed month with cost recovery says: the figures are without it."""
    named = ", ".join(f"{month:%Y-%m}" for month in months)
    return (f"{COST_RECOVERY} of {named} is booked on the whole closed month, which this range holds part of: "
            f"these figures are without it; ask for the whole month to see it.")


def _printable(text: str) -> str:
    """No terminal escapes or line breaks from a name reach the screen."""
    return "".join("?" if unicodedata.category(ch).startswith("C") else ch for ch in text)


def _shorten(text: str, width: int) -> str:
    return text if len(text) <= width else text[: max(width - 1, 0)] + "…"


def _least_width(values: list[str]) -> int:
    """The narrowest (at least 8) a column may be shortened to with its different values still different."""
    longest = max(map(len, values), default=0)
    different = len(set(values))
    return next((width for width in range(8, longest) if len({_shorten(v, width) for v in values}) == different),
                max(longest, 8))


def totals(report: Report, rows: list[dict]) -> dict[str, float]:
    """The summed columns of the report's `rows` in one currency; the cost total is that currency's total."""
    return {column: total(row[column] for row in rows) for column in report.columns if column in SUMMED}


def title(report: Report) -> str:
    grouping = f", by {report.by}" if report.by else ""
    return f"{report.subject.title}, {report.first} to {report.last}{grouping}"


def table(report: Report) -> str:
    """Aligned columns with units and a totals row, shortening names to fit 80 columns (uids, not names)."""
    columns, rows, sums = _shown(report, names=False)
    lines = [[_label(report, c) for c in columns]]
    lines += [[_printable(cell) for cell in row] for row in rows]
    lines += sums
    widths = [max(len(line[i]) for line in lines) for i in range(len(columns))]
    # a text column is shortened no further than its values stay apart (the grouping's header stays whole):
    # a table wider than the terminal wraps, one whose days all read `2026-11-…` tells nothing
    least = [_least_width([line[i] for line in lines[1:len(rows) + 1]]) for i in range(len(columns))]
    least[0] = max(least[0], len(lines[0][0]))
    room = max(WIDTH, shutil.get_terminal_size((WIDTH, 24)).columns)  # $COLUMNS, the terminal's, or 80
    text_columns = [i for i, c in enumerate(columns) if c not in NUMERIC]
    while sum(widths) + 2 * (len(widths) - 1) > room:
        shrinkable = [i for i in text_columns if widths[i] > least[i]]
        if not shrinkable:
            break
        widths[max(shrinkable, key=lambda i: widths[i])] -= 1
    out = [_shorten(_printable(title(report)), room)]
    for line in lines:
        cells = [
            _shorten(cell, width).rjust(width) if column in NUMERIC else _shorten(cell, width).ljust(width)
            for cell, width, column in zip(line, widths, columns)
        ]
        out.append("  ".join(cells).rstrip())
    out += budget_lines(report)
    out += [line for sentence in held_lines(report) for line in textwrap.wrap(_printable(sentence), WIDTH)]
    out += [line for sentence in explanations(report) for line in textwrap.wrap(sentence, WIDTH)]
    return "\n".join(out) + "\n"


def held_lines(report: Report) -> list[str]:
    """Per resource (and workload where asked by workload), what pods bound to a node held before they ran, and
    whether the rows above include it."""
    return [(f"{row['workload']}: " if "workload" in row else "")
            + f"held before running: {quantity(row['quantity'], row['resource'])}, {money(row['cost'], row[CURRENCY])}"
            f", {'charged (in the rows above)' if row['charged'] else 'shown, not charged'}"
            + (f"; mostly {row['reason']}" if row["reason"] else "") for row in report.held_before_running]


def budget_lines(report: Report) -> list[str]:
    """A budgeted team's month against its budget, and the forecast; none without a budget."""
    status = report.budget
    if status is None or not status.budget:
        return []
    currency = report.currency
    if status.closed:  # nothing to forecast: the month's figure is its statement's
        return [f"budget {status.as_of:%B %Y} (closed): {money(status.budget, currency)}, "
                f"{money(status.month_to_date, currency)} ({status.used:.1%}) spent, cost recovery included"]
    return [f"budget {status.as_of:%B %Y}: {money(status.budget, currency)}, {money(status.month_to_date, currency)} "
            f"({status.used:.1%}) spent to {status.as_of}",
            f"forecast for {status.as_of:%B} {days_in_month(status.as_of)}: {money(status.forecast, currency)} "
            f"({status.forecast_share:.1%})"]


def spreadsheet_safe(value: object) -> object:
    """A text cell that a spreadsheet would run as a formula is kept as text."""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value.isoformat() if isinstance(value, date) else value


def _csv_value(column: str, value: object) -> object:
    """A CSV cell: numbers without float noise (67.85, not 67.85000000000001), text safe in a spreadsheet."""
    if column == HELD_COLUMN and isinstance(value, list):
        return spreadsheet_safe(held_gpus(value))
    if column in NUMERIC and isinstance(value, (int, float)):
        return plain_number(value)
    return spreadsheet_safe(value)


def csv_text(report: Report) -> str:
    """One line per row with a header (list cost included), every text cell safe to open in a spreadsheet."""
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow([*report.columns, CURRENCY])
    for row in report.rows:
        writer.writerow([_csv_value(c, row[c]) for c in report.columns] + [report.currency_of(row)])
    return buffer.getvalue()


def json_text(report: Report) -> str:
    """The shape of docs/spec.md "Command line"; `person`, `incomplete_days`, `by`, `leads`, `list_cost` and the rows' `owner_name`
    (`person_name` by person; the directory's display name) are extra keys."""
    document: dict[str, object] = {
        "team": report.subject.name if report.subject.kind == "team" else None,
        **({"person": report.subject.name} if report.subject.kind == "person" else {}),
        "from": report.first.isoformat(),
        "to": report.last.isoformat(),
        # rows in one currency: that currency and their total; in several, null (no one figure) and each row's own
        **({"currency": None, "total_cost": None} if _several(report)
           else {"currency": report.currency, "total_cost": report.total_cost}),
        "total_costs": dict(report.totals.amounts),
        "missing_days": [day.isoformat() for day in report.missing_days],
        "incomplete_days": [
            {"day": day.isoformat(), "cluster": cluster, "coverage": coverage}
            for day, cluster, coverage in report.incomplete
        ],
    }
    if report.budget is not None:  # team reports: the month that `to` falls in
        closed = report.budget.closed  # the month's figure is its statement's; nothing to forecast
        document |= {"budget": report.budget.budget, "forecast": None if closed else report.budget.forecast,
                     "budget_month": f"{report.budget.as_of:%Y-%m}", "month_to_date": report.budget.month_to_date,
                     "month_closed": closed}
    if report.recovered:  # in the rows and the total: say so, per closed month, team and cluster
        document["cost_recovery"] = [{**line, "month": f"{line['month']:%Y-%m}"} for line in report.recovered]
    if report.price_changes:
        document["price_changes"] = [{"cluster": cluster, "from": day.isoformat()} for cluster, day in report.price_changes]
    if report.held_before_running:
        document["held_before_running"] = [_held_row(report, row) for row in report.held_before_running]
    if report.energy:  # beside the cost: kWh and grams of CO2e per team and cluster, null where unknown
        document["energy"] = report.energy
    if report.by:
        document["by"] = report.by
    if report.without_breakdown is not None:
        document["days_without_breakdown"] = [day.isoformat() for day in report.without_breakdown]
    if report.subject.kind == "team":
        document["leads"] = [{"uid": uid, "name": report.people.get(uid, "")} for uid in report.leads]
    document["rows"] = [_json_row(report, row) for row in report.rows]
    return json.dumps(document, indent=1) + "\n"


def _held_row(report: Report, row: dict) -> dict:
    """A held row with its `currency` where the report is in several or it is not the report's; else as before."""
    if _several(report) or row[CURRENCY] != report.currency:
        return row
    return {key: value for key, value in row.items() if key != CURRENCY}


def _json_row(report: Report, row: dict) -> dict:
    found = {c: row[c].isoformat() if isinstance(row[c], date) else row[c] for c in report.columns}
    if _several(report):
        found[CURRENCY] = report.currency_of(row)
    for column in ("owner", "person"):
        if column in found and report.people:
            found[f"{column}_name"] = report.people.get(found[column] or "", "")
    return found


def html(report: Report) -> str:
    """A small self-contained page, every name escaped."""
    from billing.publish.pages import render_template  # Jinja2 and the day's pages, for this format only

    return render_template("adhoc.html.j2", **html_table(report))


def html_table(report: Report) -> dict:
    """What an HTML page shows of a report: title, labels, cells and totals as display text, and the
    sentences that explain them."""
    columns, rows, sums = _shown(report, names=True)
    return dict(
        title=title(report),
        labels=[_label(report, c) for c in columns],
        numeric=[c in NUMERIC for c in columns],
        rows=rows,
        totals=sums,
        explanations=explanations(report),
        total_cost=str(report.totals),
        missing=day_ranges(report.missing_days),
        gaps=gaps(report),
        budget=budget_lines(report),
        held=held_lines(report),
        without_breakdown=breakdown_notice(report),
    )


def day_ranges(days: list[date]) -> list[str]:
    """Consecutive days joined: ["2026-11-03 to 2026-11-05", "2026-11-09"]."""
    return [f"{first} to {last}" if last > first else str(first) for first, last in day_runs(days)]


def gaps(report: Report) -> list[str]:
    """Each cluster-day with holes in its data: "2026-11-03 on jaguar (7.5 % of the day)"."""
    return [f"{day} on {cluster} ({100 * (1 - coverage):.1f} % of the day)" for day, cluster, coverage in report.incomplete]


def breakdown_notice(report: Report) -> str:
    """Which days of a breakdown below the namespace have costs it shows as NOT_BROKEN_DOWN, and why; '' if none."""
    if not report.without_breakdown or report.by is None:
        return ""
    label = report.by.removeprefix(LABEL_PREFIX)
    what, why = ("workload", "") if report.by == WORKLOAD else (f"label {label}", f", or {label} not yet in cost_labels")
    return (f"{', '.join(day_ranges(report.without_breakdown))} had costs without a breakdown by {what} "
            f"(billed with workloads off, before workload costs were kept or beyond workloads.keep_days{why}); "
            f"they show as {NOT_BROKEN_DOWN}")


def notices(report: Report) -> list[str]:
    """Sentences for stderr: days no run completed, and days whose data had gaps."""
    found = []
    if report.missing_days:
        count = len(report.missing_days)
        days = "day was never billed and is" if count == 1 else "days were never billed and are"
        found.append(f"{count} {days} not in this report: {', '.join(day_ranges(report.missing_days))}")
    if report.without_breakdown:
        found.append(breakdown_notice(report))
    if report.incomplete:
        found.append(
            "Prometheus had no kube-state-metrics data, so pods running then were not billed, on "
            + ", ".join(gaps(report))
        )
    found += [price_change_note(cluster, day) for cluster, day in report.price_changes]
    return found


FORMATS = dict(zip(REPORT_FORMATS, (table, csv_text, json_text, html), strict=True))  # in the order of the names
