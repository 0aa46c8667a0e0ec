"""A `Statement` for finance: JSON for programs, CSV for import, printable HTML with one page per team.

Nothing here reads a clock or the database: the same statement gives the
same bytes, which is what keeps a closed month's statement stable.
"""

from __future__ import annotations

import csv
import io
import json
from decimal import Decimal

from billing.money import plain_number, to_the_cent, total
from billing.publish.choices import STATEMENT_FORMATS
from billing.publish.credits import CREDIT_WORDS
from billing.publish.formatting import COST_RECOVERY, UNITS, resource_name
from billing.publish.pages import render_template
from billing.publish.report_formats import day_ranges, spreadsheet_safe
from billing.publish.statement import CORRECTION, LINE_COLUMNS, RECOVERY, Statement, StatementLine

CSV_COLUMNS = ["month", *LINE_COLUMNS, "currency"]


def _closing(statement: Statement) -> dict | None:
    closing = statement.closing
    if closing is None:
        return None
    return {"closed_at": closing.closed_at.isoformat(timespec="seconds"), "closed_by": closing.closed_by}


def json_text(statement: Statement) -> str:
    """Every number unrounded, as in the ledger; teams in name order, each with its lines and total."""
    document = {
        "month": f"{statement.month:%Y-%m}",
        "currency": statement.currency,
        "closed": _closing(statement),
        "missing_days": [day.isoformat() for day in statement.missing_days],
        "total": statement.total,
        "clusters": statement.clusters(),
        "teams": [
            {"team": team, "cost_center": center, "total": total(line.amount for line in lines),
             "lines": [{c: _plain(getattr(line, c)) for c in LINE_COLUMNS[2:]} for line in lines]}
            for team, center, lines in statement.teams()
        ],
        "allocations": [status.as_dict() for status in statement.allocations],
    }
    return json.dumps(document, indent=1) + "\n"


def _plain(value: object) -> object:
    return value.isoformat() if hasattr(value, "isoformat") else value


def csv_text(statement: Statement) -> str:
    """One line per statement line with its team, cost centre, month and currency; no totals (sums stay right)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(CSV_COLUMNS)
    for line in statement.lines:
        values = [getattr(line, c) for c in LINE_COLUMNS]
        writer.writerow([f"{statement.month:%Y-%m}", *("" if v is None else _cell(v) for v in values),
                         statement.currency])
    return buffer.getvalue()


def _cell(value: object) -> object:
    """A CSV cell: a number without float noise (21.95966, not 21.959660000000003), text safe in a spreadsheet."""
    return plain_number(value) if isinstance(value, float) else spreadsheet_safe(value)


def describe(line: StatementLine) -> str:
    """What a line is, for people: `GPU NVIDIA-H100`, `Discount, CPU`, `Correction of 2026-10-14, GPU`,
    `Correction of 2026-10-14, Cost recovery` (a recovered cluster's cost split again)."""
    name = resource_name(line.resource)
    model = f" {line.gpu_model}" if line.gpu_model else ""
    if line.kind == "discount":
        return f"Priority-class discount, {name}{model}"
    if line.kind == CORRECTION:
        return f"Correction of {line.corrects}, {name}"
    if line.kind == RECOVERY:
        return COST_RECOVERY
    if line.kind in CREDIT_WORDS:  # an allocation's line names its account in the model column
        return f"{CREDIT_WORDS[line.kind]}, {line.gpu_model}" if line.gpu_model else CREDIT_WORDS[line.kind]
    return f"{name}{model}"


def _quantity(line: StatementLine) -> str:
    if line.quantity is None:
        return ""
    return f"{line.quantity:,.2f} {UNITS.get(line.resource, '')}".rstrip()


def shown_amounts(statement: Statement) -> dict[StatementLine, Decimal]:
    """Each line to the cent as the printed statement shows it: a line is part of its cluster's month, so each
    cluster's lines are rounded to add up to the cluster's total (largest remainder), whichever team's page they
    are on: a recovered cluster's lines add up to its cost. A team's page then shows a Rounding row where its
    lines do not add up to its own total, rounded once (docs/spec.md "Rounding: one figure everywhere")."""
    shown: dict[StatementLine, Decimal] = {}
    every = statement.whole or statement.lines  # a team's statement: its lines rounded among every team's
    for cluster in {line.cluster for line in statement.lines}:
        lines = [line for line in every if line.cluster == cluster]
        shown.update(zip(lines, to_the_cent([line.amount for line in lines])))
    return shown


def html(statement: Statement) -> str:
    """A printable page per team (CSS page breaks), every name escaped."""
    shown = shown_amounts(statement)
    return render_template("statement.html.j2", statement=statement, closing=_closing(statement), describe=describe,
                           line_quantity=_quantity, date_ranges=day_ranges, clusters=statement.clusters(lambda lines: sum((shown[line] for line in lines), Decimal(0))),
                           shown=lambda lines: [shown[line] for line in lines])


FORMATS = dict(zip(STATEMENT_FORMATS, (csv_text, json_text, html), strict=True))  # in the order of the names
