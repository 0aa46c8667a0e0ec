"""What an assistant may ask of the ledger through `billing mcp`, each question answered by billing/publish/answers.py
for one viewer under the rules of `billing serve` (billing/web/access.py).

A tool's answer is the JSON document the command line prints for the same question (`billing report --format json`,
`billing statement --format json`) or, where the command line has no such question (what changed, waste, where a
figure comes from), one built from those same answers, so that an assistant quotes the figures of the pages and
reports to the cent. Nothing here knows the MCP SDK: billing/web/mcp_server.py registers the tools and turns their
errors into one-sentence tool errors.
"""

from __future__ import annotations

import json
from datetime import date

import pandas as pd
from sqlalchemy import Engine

from billing.config import Config
from billing.days import yesterday
from billing.publish import answers, asked
from billing.publish.asked import ReportError
from billing.publish.choices import GROUPINGS, LABEL_PREFIX, WORKLOAD
from billing.publish.report import Report, Subject, UnknownSubject, known_names
from billing.publish.report_formats import json_text
from billing.publish.statement_formats import json_text as statement_json
from billing.resources import REGISTRY, hours_columns
from billing.web.access import Viewer, spelled

RULES = [  # how a ledger row's figures are made (docs/spec.md "Billing arithmetic")
    "quantity: resource-hours the pod requested while Running, sampled every step (docs/spec.md Rule 4)",
    "unit_price: the cluster's price in force that day, per GPU model for GPUs (Rule 6, 'Prices over time')",
    "list_cost = quantity × unit_price; cost = list_cost less the pod's priority-class discount (Rule 8)",
    "a person's namespace on k teams is split equally among them (Rule 7); unrequested-* rows are the "
    "cluster's capacity nobody requested, shared by requests",
]
AUDIT = ("a day is written only when its self-audit agreed (audit.enabled; a sample of pods billed again instant by "
         "instant), so every day the ledger holds passed it, or was run with audit.enabled false")


ROWS = "rows"  # costs' `by` for the ledger's own rows
NAMES = ("costs", "changes", "waste", "budget", "statement", "figure_source")  # the tools, in the order listed
DEFAULT_BY = {"person": "namespace", "team": "namespace", "all": "team"}  # costs without `by`: one row a group


class Tools:
    """The tools over one ledger and configuration; each takes the viewer it answers for."""

    def __init__(self, ledger: Engine, config: Config) -> None:
        self.ledger, self.config = ledger, config
        self.arguments = argument_schemas(config.cost_labels)

    def answer(self, viewer: Viewer, name: str, arguments: dict[str, object]) -> dict:
        """Tool `name` (one of NAMES) asked with `arguments` as an assistant sent them, checked against the tool's
        argument schema first: ReportError of one sentence for an argument it does not take or of the wrong kind."""
        given = _checked(name, self.arguments[name], arguments)
        return getattr(self, name)(viewer, **given)

    def subject(self, viewer: Viewer, team: str | None, person: str | None) -> Subject:
        """A team, a person, or by default everything for an admin and one's own costs for anyone else, as serve's
        /api/v1/costs decides it; Forbidden when the viewer may not see it."""
        named = asked.subject(team or None, person or None)
        if team and team.casefold() not in {known.casefold() for known in known_names(self.ledger, "team")}:
            # said to leads as to admins (docs/mcp.md); a person's existence is not told to others
            raise UnknownSubject(f"no team named {team!r} in the ledger")
        return spelled(self.ledger, viewer.asked(named))

    def range(self, first: str | None, last: str | None, names: tuple[str, str] = ("first_day", "last_day")
              ) -> tuple[date, date]:
        """The first and last day (YYYY-MM-DD; errors name the arguments `names`), by default the month to
        yesterday; at most asked.LONGEST_RANGE days, as in serve."""
        return asked.bounded_range(self.config.zone, first, last, names)

    def costs(self, viewer: Viewer, team: str | None = None, person: str | None = None, first_day: str | None = None,
              last_day: str | None = None, by: str | None = None) -> dict:
        """`billing report --by BY --format json` of the subject and range; without `by` summed per namespace (per
        team for everyone), which a person reads, where the ledger's rows (`by: rows`) of a team's three days run
        to thousands."""
        subject = self.subject(viewer, team, person)
        begin, end = self.range(first_day, last_day)
        grouping = None if by == ROWS else asked.breakdown(by or DEFAULT_BY[subject.kind], self.config.cost_labels)
        return _json(answers.report(self.ledger, self.config, subject, begin, end, grouping))

    def changes(self, viewer: Viewer, before_first_day: str, before_last_day: str, after_first_day: str,
                after_last_day: str, team: str | None = None, person: str | None = None) -> dict:
        """Each breakdown's groups with cost before, after and the change, and the price sets in force between."""
        subject = self.subject(viewer, team, person)
        found = answers.changes(self.ledger, self.config, subject,
                                self.range(before_first_day, before_last_day, ("before_first_day", "before_last_day")),
                                self.range(after_first_day, after_last_day, ("after_first_day", "after_last_day")))
        before, after = found.before["namespace"], found.after["namespace"]
        return {
            **_whose(subject), "currency": after.currency,
            "before": {"from": before.first.isoformat(), "to": before.last.isoformat(), "total_cost": before.total_cost,
                       "missing_days": [day.isoformat() for day in before.missing_days]},
            "after": {"from": after.first.isoformat(), "to": after.last.isoformat(), "total_cost": after.total_cost,
                      "missing_days": [day.isoformat() for day in after.missing_days]},
            "change": after.total_cost - before.total_cost,
            **{f"by_{by}": found.differences(by) for by in answers.CHANGE_BREAKDOWNS},
            "price_changes": [{"cluster": cluster, "from": day.isoformat()} for cluster, day in found.price_changes],
        }

    def waste(self, viewer: Viewer, team: str | None = None, person: str | None = None, first_day: str | None = None,
              last_day: str | None = None) -> dict:
        """Idle GPU-hours and unused CPU core-hours over the range, as serve's pages show them."""
        subject = self.subject(viewer, team, person)
        begin, end = self.range(first_day, last_day)
        frame = answers.waste(self.ledger, subject, begin, end)
        return {**_whose(subject), "from": begin.isoformat(), "to": end.isoformat(),
                "per": answers.WASTE_KEYS[subject.kind], "rows": _records(frame)}

    def budget(self, viewer: Viewer, team: str, as_of: str | None = None) -> dict:
        """The team's month of `as_of` (default yesterday) against its budget, and the month's forecast: the
        figures `billing report --team TEAM --to AS_OF --format json` carries, with the month's days never billed,
        which month to date leaves out; and the prepaid allocations its charges draw on, as its page shows them."""
        subject = self.subject(viewer, team, None)
        day = asked.day(as_of or None, "as_of") or yesterday(self.config.zone)
        answer = answers.report(self.ledger, self.config, subject, day.replace(day=1), day, "namespace")
        status = answer.budget
        assert status is not None  # a team's report always carries its budget status
        return {"team": subject.name, "currency": answer.currency, "budget_month": f"{day:%Y-%m}",
                "as_of": day.isoformat(), "budget": status.budget, "month_to_date": status.month_to_date,
                "forecast": None if status.closed else status.forecast, "used": status.used,
                "forecast_share": None if status.closed else status.forecast_share, "days_left": status.days_left,
                "forecast_method": answers.FORECAST_METHOD, "month_closed": status.closed,
                "missing_days": [missing.isoformat() for missing in answer.missing_days],
                "allocations": [status.as_dict() for status in
                                answers.allocation_statuses(self.ledger, self.config, day, subject.name)]}

    def statement(self, viewer: Viewer, month: str, team: str | None = None) -> dict:
        """`billing statement --month MONTH [--team TEAM] --format json`: a team's for its leads, all for admins."""
        first = asked.month(month, "month")
        subject = self.subject(viewer, team, None) if team else viewer.everything()
        return json.loads(statement_json(answers.statement(self.ledger, self.config, first, subject.name)))

    def figure_source(self, viewer: Viewer, day: str, team: str | None = None, person: str | None = None) -> dict:
        """Where a day's figures come from: its ledger rows, the prices in force, the rules, the run and its audit."""
        subject = self.subject(viewer, team, person)
        found = answers.source(self.ledger, self.config, subject,
                               asked.day(day or None, "day") or yesterday(self.config.zone))
        return {**_json(found.rows), "prices": found.prices, "rules": RULES, "run": found.run,
                "data_coverage": [{"cluster": cluster, "coverage": share} for cluster, share in found.coverage],
                "audit": AUDIT}


def _json(report: Report) -> dict:
    """The report as `billing report --format json` prints it."""
    return json.loads(json_text(report))


def _whose(subject: Subject) -> dict:
    return {"team": subject.name if subject.kind == "team" else None,
            **({"person": subject.name} if subject.kind == "person" else {})}


def _records(frame: pd.DataFrame) -> list[dict]:
    """Rows with None where a measure is NaN (no day of the group measured it)."""
    return [{k: None if pd.isna(v) else v for k, v in row.items()} for row in frame.to_dict("records")]


def _checked(tool: str, schema: dict, arguments: dict[str, object]) -> dict[str, str]:
    """The arguments a tool was sent, as its schema (`argument_schemas`) takes them, JSON null as left out;
    ReportError of one sentence for the first that it does not take, lacks, or that is no string or no word of its
    enumeration. What a string must hold (a day, a month, a team) the tool says itself."""
    properties = schema["properties"]
    unknown = [name for name in arguments if name not in properties]
    if unknown:
        raise ReportError(f"{tool} takes no argument {unknown[0]!r}: it takes {_listed(list(properties))}")
    missing = [name for name in schema.get("required", ()) if arguments.get(name) is None]
    if missing:
        raise ReportError(f"{tool} needs {missing[0]} ({properties[missing[0]]['description']})")
    given: dict[str, str] = {}
    for name, value in arguments.items():
        if value is None:
            continue
        if not isinstance(value, str):
            raise ReportError(f"{name}={json.dumps(value)} is not a string: give it in quotes, "
                              f"{properties[name]['description']}")
        words = properties[name].get("enum")
        if words is not None and value not in words:
            raise ReportError(f"{name}={value!r} is not one of {_listed(words)}")
        given[name] = value
    return given


def _listed(words: list[str]) -> str:
    return f"{', '.join(words[:-1])} or {words[-1]}" if len(words) > 1 else words[0]


def argument_schemas(cost_labels: list[str]) -> dict[str, dict]:
    """Each tool's arguments as a JSON Schema: strings, days with `format: date`, `by` an enumeration (with
    `label:NAME` of each configured cost label), no other argument."""
    team = {"type": "string", "description": "a team's name (a lead sees their teams, admins all)"}
    person = {"type": "string", "description": "a person's uid (people see only themselves, admins all)"}
    whose = {"team": team, "person": person}

    def day(what: str) -> dict:
        return {"type": "string", "format": "date", "description": f"{what}, YYYY-MM-DD"}

    days = {"first_day": day("the first day (default: the first of the month of the last day)"),
            "last_day": day("the last day, inclusive (default: yesterday)")}
    by = {"type": "string", "enum": [*GROUPINGS, WORKLOAD, *(LABEL_PREFIX + name for name in cost_labels), ROWS],
          "description": "sum per team, person, namespace, cluster, resource, gpu_model or day; below the namespace "
                         "per workload or label:NAME of a cost label; rows: the ledger's own rows; default namespace "
                         "(team for everyone)"}
    ranges = {f"{side}_{end}_day": day(f"the {end} day of the range {'compared' if side == 'before' else 'asked'}")
              for side in ("before", "after") for end in ("first", "last")}

    def arguments(properties: dict, *required: str) -> dict:
        return {"type": "object", "properties": properties, "required": list(required), "additionalProperties": False}

    return {
        "costs": arguments({**whose, **days, "by": by}),
        "changes": arguments({**ranges, **whose}, *ranges),
        "waste": arguments({**whose, **days}),
        "budget": arguments({"team": {**team, "description": "the team's name"},
                             "as_of": day("the day the month runs to (default: yesterday)")}, "team"),
        "statement": arguments({"month": {"type": "string", "pattern": "^[0-9]{4}-(0[1-9]|1[0-2])$",
                                          "description": "the month, YYYY-MM"},
                                "team": {**team, "description": "a team's name (default: every team, for admins)"}},
                               "month"),
        "figure_source": arguments({"day": day("the day"), **whose}, "day"),
    }


def answer_schemas(currency: str) -> dict[str, dict]:
    """Each tool's answer as a JSON Schema, with the unit of every figure: money in `currency`, unrounded as the
    ledger holds it; quantities in resource-hours."""
    money = {"type": "number", "description": f"{currency}, unrounded as the ledger holds it (round to cents)"}
    optional_money = _nullable("number", f"{currency}, unrounded; null: none")
    iso_day = {"type": "string", "format": "date"}
    days = {"type": "array", "items": iso_day, "description": "days never billed (left out of the sums, never zero)"}
    share = _nullable("number", "a fraction (0.5 is 50 %); null without a budget")
    named = _nullable("string", "the team; null for a person or everyone")
    forecast = _nullable("number", f"{currency}, unrounded: the month's end as forecast; null: the month is closed")
    closed = {"type": "boolean", "description": "the month is closed: its figure is its statement's, with cost "
                                                "recovery, and nothing is forecast"}
    row = {"type": "object", "description": (
        f"one row: its key (the `by` word; day, cluster, namespace, owner, resource, gpu_model (a storage row's "
        f"storage class) for the ledger's rows), its currency where the rows hold several, cost and list_cost in "
        f"{currency} (or the row's) unrounded, unit_price in {currency} per resource-hour, quantity "
        f"in resource-hours of its resource ({', '.join(resource.focus_meter for resource in REGISTRY.values())}), {hours_columns()}")}
    price_changes = {"type": "array", "items": {"type": "object", "properties": {
        "cluster": {"type": "string"}, "from": iso_day}}, "description": "price sets that came into force"}
    one_currency = {"type": "string", "description": (f"the money of every figure: {currency} as configured, unless "
                                                       "the ledger's rows hold another")}
    report = {
        "team": named, "person": {"type": "string"}, "from": iso_day, "to": iso_day,
        "currency": _nullable("string", f"the money of every figure: {currency} as configured, unless the ledger's "
                                        "rows hold another; null where they hold several (each row names its own)"),
        "total_cost": _nullable("number", f"{currency}, unrounded as the ledger holds it (round to cents); null where "
                                          "the rows hold several currencies, which never add up"),
        "total_costs": {"type": "object", "additionalProperties": {"type": "number"}, "description": (
            "the cost per currency the rows hold (one where they hold one), unrounded: never added together")},
        "missing_days": days,
        "incomplete_days": {"type": "array", "items": {"type": "object"},
                            "description": "days with a cluster's data partly missing: coverage a fraction"},
        "budget": optional_money, "forecast": forecast, "budget_month": {"type": "string"}, "month_to_date": money,
        "month_closed": closed,
        "cost_recovery": {"type": "array", "items": {"type": "object"}, "description": (
            f"the cost recovery, subsidies and monthly credits of each closed month the range holds whole, in its "
            f"rows and total: month, team, cluster, kind (recovery, subsidy, monthly-credit, allocation, overage) and amount in "
            f"{currency}")},
        "price_changes": price_changes, "by": {"type": "string"},
        "held_before_running": {"type": "array", "items": {"type": "object"}, "description": (
            f"what pods bound to a node held before they ran, per resource and currency: quantity in "
            f"resource-hours, cost in {currency} (in its `currency` where that is another or the rows are in "
            f"several), charged or shown only")},
        "days_without_breakdown": days, "leads": {"type": "array", "items": {"type": "object"}},
        "energy": {"type": "array", "items": {"type": "object"}, "description": (
            "per team and cluster with energy read, the range's gpu_kwh, cpu_kwh (CPU and memory), shared_kwh (its share "
            "of what no pod accounts for, where the cluster shares it) and kwh (all three) in kWh and carbon_g in grams "
            "of CO2e of the team's namespaces, each null where some day of it is unknown; team '' (asked of every team) "
            "is what no pod accounts for (idle power), less what was shared (shared_kwh negative)")},
        "rows": {"type": "array", "items": row},
    }

    def document(properties: dict, *required: str) -> dict:
        return {"type": "object", "properties": properties, "required": list(required)}

    side = document({"from": iso_day, "to": iso_day, "total_cost": money, "missing_days": days},
                    "from", "to", "total_cost", "missing_days")
    compared = {"type": "array", "items": {"type": "object", "description": (
        f"a group: cost_before, cost_after and change in {currency}; by resource also hours_before and "
        f"hours_after in resource-hours and cost_per_hour_before and _after in {currency} per resource-hour")}}
    return {
        "costs": document(report, "from", "to", "currency", "total_cost", "missing_days", "rows"),
        "changes": document({"team": named, "person": {"type": "string"}, "currency": one_currency,
                             "before": side, "after": side, "change": money, "by_namespace": compared,
                             "by_workload": compared, "by_resource": compared, "price_changes": price_changes},
                            "currency", "before", "after", "change", "by_namespace", "by_workload", "by_resource"),
        "waste": document({"team": named, "person": {"type": "string"}, "from": iso_day, "to": iso_day,
                           "per": {"type": "string"}, "rows": {"type": "array", "items": {"type": "object"},
                           "description": "idle_gpu_hours in GPU-hours, unused_cpu_core_hours in core-hours, "
                                          "unused_storage_gib_hours in GiB-hours; null where no day measured it; "
                                          "no money"}}, "from", "to", "per", "rows"),
        "budget": document({"team": {"type": "string"}, "currency": one_currency,
                            "budget_month": {"type": "string"}, "as_of": iso_day, "budget": optional_money,
                            "month_to_date": money, "forecast": forecast, "used": share, "forecast_share": share,
                            "month_closed": closed,
                            "days_left": {"type": "integer", "description": "the month's days not billed yet"},
                            "forecast_method": {"type": "string"}, "missing_days": {
                                **days, "description": "the month's days to as_of never billed: not in month_to_date"},
                            "allocations": {"type": "array", "items": {"type": "object"}, "description": (
                                f"the prepaid allocations the team's charges drew on or its accounts hold, as of "
                                f"as_of: account, from, to, unit (SU, or {currency}), amount, drawn, "
                                f"drawn_this_month, balance and overage in the unit rounded to cents, overage_policy "
                                f"(charge or show), percent_drawn, teams")}},
                           "team", "currency", "as_of", "month_to_date", "forecast", "missing_days"),
        "statement": document({"month": {"type": "string"}, "currency": one_currency,
                               "closed": _nullable("object", "when and by whom the month was closed; null: open"), "missing_days": days, "total": money,
                               "clusters": {"type": "array", "items": {"type": "object"},
                                            "description": f"per cluster: charged, recovered, credited (subsidies, "
                                                           f"monthly credits, allocations drawn and overage not "
                                                           f"charged), corrected, total in {currency}"},
                               "teams": {"type": "array", "items": {"type": "object"}, "description": (
                                   f"per team: total and lines (quantity in resource-hours, amount in {currency})")}},
                              "month", "currency", "total", "teams"),
        "figure_source": document({**report, "prices": {"type": "object", "description": (
                                       f"per cluster the unit prices in force, in {currency} per resource-hour")},
                                   "rules": {"type": "array", "items": {"type": "string"}},
                                   "run": _nullable("object", "the run that wrote the day; null: never run"),
                                   "data_coverage": {"type": "array", "items": {"type": "object"}},
                                   "audit": {"type": "string"}},
                                  "from", "to", "currency", "rows", "prices", "rules"),
    }


def _nullable(kind: str, description: str) -> dict:
    """A value of JSON type `kind` or null, as one `type` per branch (a `type` list is less portable: clients that
    map tool schemas onto a dialect of single types reject it)."""
    return {"anyOf": [{"type": kind}, {"type": "null"}], "description": description}
