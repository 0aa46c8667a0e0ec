"""The questions people ask of the ledger, each answered once, whichever interface asks.

`billing report`, `export`, `statement`, `close` and `billing serve` ask the same questions; the answer to each
is assembled here (a subject's costs with its team's budget and the range's price changes, which `billing
report` and serve's API and CSV downloads give alike; an export with its missing days, a month's statement with
its cost centres, a page of `billing serve`, the day's report the nightly pages show), so the command line, the
web and the pages cannot drift apart. The
interfaces only parse the question and show the answer: nothing here prints or knows HTTP.

Statements, the day's pages and the export's FOCUS rows are imported when asked for: closing a month writes the
ledger, whose writer imports collect's invoice reader, and the pages and the export work on pandas frames, none of
which `billing report` has use for: it starts without them (tests/cli/test_cli_imports.py).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import date, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from sqlalchemy import Connection, Engine

from billing import frames
from billing.config import AccountsConfig, Config
from billing.days import billing_day, days_between, yesterday
from billing.directory.accounts import accounts_of
from billing.errors import RunFailed
from billing.ledger.read import (
    completed,
    daily_costs,
    energy_sums,
    invoice_files,
    month_activity,
    month_closed,
    read_bound_pending,
    read_corrections,
    read_energy,
    read_recovery,
    read_rows,
    read_workload_costs,
    recovered,
    run_record,
    stored_directory,
    waste_sums,
)
from billing.money import one_currency, total
from billing.publish.asked import ReportError
from billing.publish.budgets import FORECAST_METHOD as FORECAST_METHOD  # said beside a forecast by the interfaces
from billing.publish.budgets import BudgetStatus, read_budget_status, team_budgets
from billing.publish.choices import BILLING_PERIOD, COST_AND_USAGE, INVOICE_DETAIL
from billing.publish.report import (
    Report,
    Subject,
    UnknownSubject,
    build_report,
    price_changes,
)
from billing.publish.report_formats import day_ranges
from billing.resources import RECOVERY

if TYPE_CHECKING:
    import pandas as pd

    from billing.accounts import Accounts
    from billing.publish.allocations import AllocationStatus
    from billing.publish.dayview import DayReport, TeamReport, TrendDay
    from billing.publish.digest import PersonalDigest
    from billing.publish.statement import Statement

LISTED_RANGES = 10  # runs of missing days a sentence names; the rest are counted


class NeverRun(RunFailed):
    """No day of the range was ever run: a total of 0.00 would read as no spending."""


def listed_ranges(days: list[date]) -> list[str]:
    """Runs of days as ranges, the first LISTED_RANGES of them and a count of the rest."""
    runs = day_ranges(days)
    return runs[:LISTED_RANGES] + ([f"and {len(runs) - LISTED_RANGES:,} more ranges"] if len(runs) > LISTED_RANGES else [])


def _refuse_never_run(first: date, last: date, missing: list[date]) -> None:
    if len(missing) == len(days_between(first, last)):
        raise NeverRun(f"no day in this range was ever run ({', '.join(listed_ranges(missing))}): "
                       "run them with billing run or billing backfill first")


def team_budget(ledger: Engine, config: Config, team: str, as_of: date) -> BudgetStatus:
    """A team's month of `as_of` against its budget (the config's, else the directory's; None if it has none)."""
    budget = team_budgets(config.budgets, stored_directory(ledger)).get(team)
    return read_budget_status(ledger, team, as_of, budget)


def budget_statuses(ledger: Engine, budgets: dict[str, float], day: date) -> dict[str, BudgetStatus]:
    """Each budgeted team's month as of `day`, as its page, email and `billing report` show it: what a budget alert
    compares with its thresholds, so that an alert's figure is the page's."""
    return {team: read_budget_status(ledger, team, day, budget) for team, budget in sorted(budgets.items())}


def allocation_statuses(ledger: Engine, config: Config, day: date, team: str | None = None
                        ) -> list[AllocationStatus]:
    """Each allocation begun by `day` and not ended before its month, as of `day` (docs/spec.md "Allocations"): its
    drawn, balance and overage, as the pages, serve, `billing mcp`, the emails and the alerts show them; of a team,
    those its charges drew on or its accounts hold."""
    from billing.ledger.allocations import allocation_draws_between  # when asked: allocations read pandas frames
    from billing.publish.allocations import statuses

    held = config.prepaid_allocations()
    if not held or config.accounts is None:
        return []
    assigned: dict[str, set[str]] = {}
    for assignment in accounts_of(config.accounts, stored_directory(ledger)).assignments:
        if assignment.subject.kind == "team":
            assigned.setdefault(assignment.account.id, set()).add(assignment.subject.name)
    found = statuses(allocation_draws_between(ledger, min(a.first for a in held), day), held, day, assigned)
    month = day.replace(day=1)
    return [status for status in found if status.allocation.last >= month and (team is None or team in status.teams)]


def closed(ledger: Engine, month: date) -> bool:
    """Whether finance closed the month (its first day): its figures are its statement's, booked, so nothing of it
    is news any more (a budget alert is neither found nor sent again)."""
    return month_closed(ledger, month)


def digests(ledger: Engine, config: Config, day: date) -> list[PersonalDigest]:
    """Each person's own summary that the run of `day` sends (`email.personal`): none on a day without one."""
    from billing.publish.digest import digest_period  # when asked: see the module's docstring

    period = digest_period(day, config.email.personal)
    return personal_digests(ledger, *period, config.currency, config.reports_url) if period else []


def personal_digests(ledger: Engine, first: date, last: date, currency: str, reports_url: str
                     ) -> list[PersonalDigest]:
    """Each person's own summary of first to last, with their month to date to `last`."""
    from billing.publish.digest import digests_of  # when asked: see the module's docstring

    return digests_of(first, last, rows=read_rows(ledger, min(first, last.replace(day=1)), last),
                      waste=waste_sums(ledger, first, last, "owner"), workloads=read_workload_costs(ledger, first, last),
                      pending=read_bound_pending(ledger, first, last), runs=completed(ledger, first, last),
                      currency=currency, reports_url=reports_url)


def day_report(ledger: Engine, config: Config, day: date) -> DayReport:
    """Every figure of a day's pages and emails: the teams with their leads, each budgeted team's status as of the
    day (as `billing report` reads it) and the month's price changes."""
    from billing.publish.dayview import read_report, with_directory, with_service_units  # when asked: see the docstring

    report = read_report(ledger, day, config.currency, config.namespaces.unallocated_team)
    directory = stored_directory(ledger)
    report = with_service_units(with_directory(report, directory, config.namespaces), config.clusters)
    budgets = team_budgets(config.budgets, directory)
    months = recovered(ledger, day.replace(day=1), day)  # a closed month's cost recovery, through its last day
    teams = [with_recovery(replace(team, budget=read_budget_status(ledger, team.team, day, budgets[team.team]))
                           if team.team in budgets else team, [line for line in months if line["team"] == team.team])
             for team in report.teams]
    report = replace(report, teams=teams, price_changes=tuple(price_changes(config.clusters, day.replace(day=1), day)),
                     energy=tuple(energy_sums(ledger, day, day)))
    if config.accounts is not None:  # what ends: as of the morning its summaries go out
        from billing.publish.journal import charged_to_default

        accounts = accounts_of(config.accounts, directory)
        report = replace(report, accounts_ending=tuple(accounts.expiring(day + timedelta(days=1),
                                                                         config.accounts.expiry_notice_days)),
                         default_account=accounts.default,
                         charged_to_default=charged_to_default(read_rows(ledger, day, day), day, accounts),
                         allocations=tuple(allocation_statuses(ledger, config, day)))
    return with_recovery(report, months)


Figures = TypeVar("Figures", "DayReport", "TeamReport", "Headline")


def with_recovery(figures: Figures, months: list[dict]) -> Figures:
    """Figures whose month to date holds the cost recovery, subsidies and monthly credits of a closed month
    (ledger.read.recovered: only through its last day, `months`), as its statement has it; `recovery` the first."""
    if not months:
        return figures
    recovery = total(line["amount"] for line in months if line["kind"] == RECOVERY)
    credited = total(line["amount"] for line in months if line["kind"] != RECOVERY)
    return replace(figures, month_to_date=total([figures.month_to_date, *(line["amount"] for line in months)]),
                   recovery=recovery, credited=credited)


def costs(ledger: Engine, config: Config, subject: Subject, first: date, last: date, by: str | None) -> Report:
    """What a subject spent over a range, with the range's price changes and, for a team, its budget: what
    `billing report` shows and serve's API and CSV downloads answer. Days never run are listed, never zero."""
    answer = build_report(ledger, subject, first, last, by, config.currency, config.clusters)
    answer = replace(answer, price_changes=price_changes(config.clusters, first, last))
    if subject.kind == "team" and subject.name is not None:
        answer = replace(answer, budget=team_budget(ledger, config, subject.name, last))
    return answer


def report(ledger: Engine, config: Config, subject: Subject, first: date, last: date, by: str | None) -> Report:
    """`costs`, for `billing report`: NeverRun when no day of the range was ever run, since a table's total of
    0.00 would read as no spending (serve lists the days on the page and in the JSON instead)."""
    answer = costs(ledger, config, subject, first, last, by)
    _refuse_never_run(first, last, answer.missing_days)
    return answer


@dataclass(frozen=True)
class Headline:
    """The figures above a page's tables (what reports/macros.html.j2 `figures` and `trend_svg` show)."""

    day: date
    currency: str
    cost: float
    discount: float
    previous: float | None
    month_to_date: float
    trend: list[TrendDay]
    missing_in_month: list[date]
    incomplete: tuple = ()  # the range's data gaps are listed under the tables instead
    price_changes: tuple = ()  # the range's price changes likewise
    directory_note: str = ""
    recovery: float = 0.0  # a closed month's cost recovery, in month_to_date (`with_recovery`)
    credited: float = 0.0  # a closed month's subsidies and monthly credits, in month_to_date (`with_recovery`)


@dataclass(frozen=True)
class Page:
    """What a subject's page of `billing serve` shows beside its tables."""

    figures: Headline  # of the range's last day
    tables: list[Report] | None  # the range by each grouping asked; None: the ledger holds no costs of the person
    waste: pd.DataFrame  # of the range, per waste_key: what was held but not used
    budget: BudgetStatus | None  # a budgeted team's month of the last day
    last_day_run: bool
    price_changes: list[tuple[str, date]]
    allocations: tuple[AllocationStatus, ...] = ()  # a team's (everyone's: all) as of the last day


def page(ledger: Engine, config: Config, subject: Subject, first: date, last: date, waste_key: str,
         groupings: tuple[str, ...]) -> Page:
    """The figures of the range's last day (with its trend and month to date), the range by each of `groupings`,
    its waste and, for a budgeted team, its budget; ReportError for a trend window with costs in two currencies,
    UnknownSubject for a team the ledger never saw (a person without costs still has a page, saying so)."""
    from billing.publish.dayview import headline, window_start  # when asked: see the module's docstring

    try:
        tables: list[Report] | None = [build_report(ledger, subject, first, last, by, config.currency)
                                       for by in groupings]
    except UnknownSubject:
        if subject.kind != "person":
            raise
        tables = None
    start = window_start(last)
    runs = completed(ledger, start, last)
    day_costs = daily_costs(ledger, start, last, **_filter(subject))
    currency = one_currency(day_costs["currency"], config.currency, lambda held: ReportError(
        f"the ledger holds costs in {held} between {start} and {last}; ask for a range with one currency"))
    month = days_between(last.replace(day=1), last)
    figures = Headline(last, currency,  # the range's own note
                       missing_in_month=[] if first == month[0] else [d for d in month if d not in runs and d != last],
                       **headline(day_costs, runs, last))
    if subject.kind != "person":  # a closed month's cost recovery, as the tables and the statement have it
        figures = with_recovery(figures, recovered(ledger, month[0], last, subject.name))
    waste = waste_sums(ledger, first, last, waste_key, **_filter(subject))
    waste = waste.dropna(subset=list(frames.WASTE_MEASURES), how="all")
    budget = None
    if subject.kind == "team" and subject.name:
        status = team_budget(ledger, config, subject.name, last)
        budget = status if status.budget is not None else None
    allocations = () if subject.kind == "person" else tuple(
        allocation_statuses(ledger, config, last, subject.name if subject.kind == "team" else None))
    return Page(figures, tables, waste, budget, last in runs, price_changes(config.clusters, first, last), allocations)


def _filter(subject: Subject) -> dict[str, str | None]:
    """The `team=` or `owner=` keyword of the ledger's readers for a subject's rows."""
    return {"team": {"team": subject.name}, "person": {"owner": subject.name}, "all": {}}[subject.kind]


@dataclass(frozen=True)
class Export:
    """The FOCUS rows of a range and its days never run (today and later are still to come, not missing)."""

    rows: pd.DataFrame
    missing_days: list[date]


def export(ledger: Engine, config: Config, first: date, last: date, version: str,
           dataset: str = COST_AND_USAGE) -> Export:
    """The ledger of a range as FOCUS rows of a version (choices.FOCUS_VERSIONS) and dataset (choices.FOCUS_DATASETS:
    FOCUS 1.4's Invoice Detail and Billing Period are those of every month the range touches, whole); NeverRun when
    no day of it was ever run."""
    from billing.publish.focus import broken_down, focus_rows, with_carbon  # when asked: see the module's docstring

    rows = with_carbon(broken_down(read_rows(ledger, first, last), read_workload_costs(ledger, first, last)),
                       read_energy(ledger, first, last))
    focus = focus_rows(rows, config.zone, read_recovery(ledger, first, last), version, read_corrections(ledger, first, last))
    missing = sorted(set(days_between(first, min(last, yesterday(config.zone)))) - completed(ledger, first, last))
    _refuse_never_run(first, last, missing)
    if dataset == COST_AND_USAGE:
        return Export(focus, missing)
    return Export(_invoice_datasets(ledger, config, first, last, focus)[dataset], missing)


def _invoice_datasets(ledger: Engine, config: Config, first: date, last: date, focus: pd.DataFrame
                      ) -> dict[str, pd.DataFrame]:
    """FOCUS 1.4's Invoice Detail and Billing Period datasets of the months first..last touches, beside the Cost and
    Usage rows `focus` of the range."""
    from billing.publish.focus_invoices import InvoicedMonth, billing_periods, invoice_detail, with_unlisted_lines

    months = []
    for month in sorted({day.replace(day=1) for day in days_between(first, last)}):
        found = statement(ledger, config, month)
        clusters = {line.cluster for line in found.lines}
        months.append(InvoicedMonth(found, month_activity(ledger, month),
                                    {cluster: invoice_files(ledger, month, cluster) for cluster in clusters}))
    detail = with_unlisted_lines(invoice_detail(months, config.zone), focus)
    issuers: dict[date, set[str]] = {}
    for invoiced in months:
        first_day = invoiced.statement.month
        starts = detail["BillingPeriodStart"] == billing_day(first_day, config.zone).start
        issuers[first_day] = {str(cluster) for cluster in detail.loc[starts, "InvoiceIssuerName"]}
    return {INVOICE_DETAIL: detail, BILLING_PERIOD: billing_periods(months, issuers, config.zone)}


def statement(ledger: Engine, config: Config, month: date, team: str | None = None) -> Statement:
    """The month's statement, as closed or from the ledger now; optionally of one team."""
    from billing.publish.statement import MonthRules, build_statement, cost_centers  # when asked: see the docstring

    return build_statement(ledger, month, config.currency, cost_centers(stored_directory(ledger)), team,
                           yesterday(config.zone), MonthRules(config.clusters, config.credits, config.prepaid_allocations()))


def close(ledger: Engine, config: Config, month: date, by: str, allow_missing: bool) -> tuple[Statement, list[Path]]:
    """Close the month with cost recovery for the clusters that have it, and post its journal where `accounts` is
    configured, with an invoice per account where `account_invoices` is; returns the statement kept and the files
    written."""
    from billing.publish.statement import MonthRules, close_month, cost_centers  # when asked: see the docstring

    recover = {cluster.name: cluster.recover for cluster in config.clusters if cluster.recover}
    written: list[Path] = []
    section = config.accounts
    directory = stored_directory(ledger)
    journal = None if section is None else (
        lambda conn, statement: written.extend(_post_month(conn, statement, section, config,
                                                           accounts_of(section, directory))))
    statement = close_month(ledger, month, by, yesterday(config.zone), config.currency,
                            cost_centers(directory), allow_missing, recover,
                            MonthRules(config.clusters, config.credits, config.prepaid_allocations()), journal)
    return statement, written


def _post_month(conn: Connection, statement: Statement, section: AccountsConfig, config: Config,
                accounts: Accounts) -> list[Path]:
    """In the close's transaction: the month's journal, then each account's invoice numbered as it, where
    `account_invoices` is configured, both split over `accounts` (the config's with the directory's and
    ColdFront's); the files written."""
    from billing.publish.account_invoices import post_invoices
    from billing.publish.journal import post_journal

    out = Path(config.output_dir)
    written = post_journal(conn, statement, section, out, accounts)
    if config.account_invoices is not None:
        written += post_invoices(conn, statement, section, config.account_invoices, config.clusters, out, accounts)
    return written


def reopen(ledger: Engine, month: date, by: str) -> None:
    """Open the latest closed month again."""
    from billing.publish.statement import reopen_month  # when asked: see the module's docstring

    reopen_month(ledger, month, by)


CHANGE_BREAKDOWNS = ("namespace", "workload", "resource")  # what `changes` compares the two ranges by


@dataclass(frozen=True)
class Changes:
    """A subject's spending in two ranges side by side: each breakdown's groups with their cost before and after
    (the two reports are those of `report`, so each side's figures are `billing report`'s), and the price sets
    that came into force from the first range's start to the second's end."""

    subject: Subject
    before: dict[str, Report]  # per CHANGE_BREAKDOWNS word
    after: dict[str, Report]
    price_changes: list[tuple[str, date]]

    def differences(self, by: str) -> list[dict]:
        """The groups of a breakdown (namespace; namespace and workload; the ledger's resource) with cost, hours and
        cost per hour before and after, the largest change in cost first; a group absent from a range counts 0 there."""
        keys = ["resource"] if by == "resource" else [c for c in self.after[by].columns if c in ("namespace", "workload")]
        sides = {side: _measured(report, keys) for side, report in (("before", self.before[by]), ("after", self.after[by]))}
        found = []
        for key in sorted(set(sides["before"]) | set(sides["after"]), key=str):
            row = dict(zip(keys, key))
            for side, groups in sides.items():
                cost, hours = groups.get(key, (0.0, 0.0))
                row[f"cost_{side}"] = cost
                if by == "resource":
                    row[f"hours_{side}"] = hours
                    row[f"cost_per_hour_{side}"] = cost / hours if hours else None
            row["change"] = row["cost_after"] - row["cost_before"]
            found.append(row)
        return sorted(found, key=lambda row: -abs(row["change"]))


def _measured(report: Report, keys: list[str]) -> dict[tuple, tuple[float, float]]:
    """Cost and resource-hours per group of `keys`, summed over the report's rows (by resource: the ledger's own
    rows, whose quantity is in the hours of their resource, `unrequested-gpu` as `gpu`)."""
    found: dict[tuple, tuple[float, float]] = {}
    for row in report.rows:
        key = tuple(row[k] for k in keys)
        cost, hours = found.get(key, (0.0, 0.0))
        found[key] = (cost + row["cost"], hours + row.get("quantity", 0.0))
    return found


def changes(ledger: Engine, config: Config, subject: Subject, before: tuple[date, date],
            after: tuple[date, date]) -> Changes:
    """What changed between two ranges of a subject, per namespace, workload and resource (the ledger's resource
    names, from its rows: `billing report --by resource` holds GPUs apart by their Kubernetes resources), and the
    prices that changed from the first's start to the second's end; NeverRun when no day of either range was run."""
    sides = [{by: report(ledger, config, subject, first, last, None if by == "resource" else by)
              for by in CHANGE_BREAKDOWNS} for first, last in (before, after)]
    start, end = min(before[0], after[0]), max(before[1], after[1])
    return Changes(subject, sides[0], sides[1], price_changes(config.clusters, start, end))


WASTE_KEYS = {"person": "namespace", "team": "owner", "all": "team"}  # what a subject's waste is summed per


def waste(ledger: Engine, subject: Subject, first: date, last: date) -> pd.DataFrame:
    """What a subject's pods held but did not use over a range (shown, never billed): idle GPU-hours, unused
    CPU core-hours and unused storage GiB-hours per namespace of a person, per owner of a team, per team of all; as serve's pages show it."""
    frame = waste_sums(ledger, first, last, WASTE_KEYS[subject.kind], **_filter(subject))
    return frame.dropna(subset=list(frames.WASTE_MEASURES), how="all")


@dataclass(frozen=True)
class Source:
    """Where a day's figures come from: the ledger's rows of the day (quantity × unit price, less discounts: cost),
    the price set in force on each cluster, the run that wrote the day and how complete its data was."""

    rows: Report  # the day's ledger rows of the subject, as `billing report --from DAY --to DAY` without --by
    prices: dict[str, dict]  # cluster -> the config's price set in force on the day
    run: dict | None  # completed_at, rows, directory_note of the run that wrote the day; None if never run
    coverage: list[tuple[str, float]]  # (cluster, share of the day with data) where the data had gaps


def source(ledger: Engine, config: Config, subject: Subject, day: date) -> Source:
    """Where a day's figures come from; NeverRun when the day was never run."""
    rows = report(ledger, config, subject, day, day, None)
    prices = {cluster.name: cluster.prices_on(day).model_dump(mode="json", by_alias=True)
              for cluster in config.clusters}
    return Source(rows, prices, run_record(ledger, day),
                  [(cluster, coverage) for _, cluster, coverage in rows.incomplete])
