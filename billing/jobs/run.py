"""The nightly run of one billing day: collect every cluster (billing/collect/day.py), read the directory, bill
(billing/charge/bill.py), write the ledger, publish; in that order, and nothing of what each stage does."""

from __future__ import annotations

import gc
import logging
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, replace
from datetime import date, datetime, timezone
from pathlib import Path
from typing import Literal

from sqlalchemy import Engine

from billing.allocations import undrawn
from billing.charge.allocations import allocation_use
from billing.charge.bill import bill_day, refuse_unpriced
from billing.charge.workloads import kept_since
from billing.collect.day import CollectedDay, check_coverage, collect_day, hours_by_resource
from billing.collect.replay import prometheus_source
from billing.config import ClusterConfig, Config, Prices
from billing.days import BillingDay, billing_day
from billing.directory.accounts import accounts_of, named_assignments
from billing.directory.coldfront import (
    ColdFrontError,
    MappedAllocation,
    allocations_of,
    with_accounts_as_stored,
    with_allocations,
)
from billing.directory.names import assigned_namespaces, check_names, unbilled_namespaces
from billing.directory.people import (
    AmbiguousDirectoryError,
    Directory,
    DirectoryError,
    directory_from_json,
    directory_to_json,
)
from billing.directory.sources import load_directory
from billing.ledger.database import open_ledger
from billing.ledger.read import days_billed, latest_directory, namespaces_billed, stored_directory
from billing.ledger.write import replace_day
from billing.memory import free_pages_to_the_system
from billing.notify.allocation_alerts import send_allocation_alerts
from billing.notify.budget_alerts import send_alerts
from billing.notify.deliveries import deliver_once
from billing.notify.summaries import summary_envelopes
from billing.publish.answers import allocation_statuses, day_report, digests
from billing.publish.budgets import team_budgets
from billing.publish.coldfront_usage import month_to_date, write_usage
from billing.publish.dayview import DayReport
from billing.publish.pages import check_output_dir, write_pages
from billing.redact import redact

log = logging.getLogger(__name__)

# container objects allocated (less those freed) between two collections of Python's youngest generation; the
# default is 700
YOUNGEST_COLLECTED_AFTER = 20_000


def collect_garbage_for_a_night() -> None:
    """Python's cyclic garbage collector, set for a night (once the run's modules are imported): every 700 objects
    the default collects the youngest generation, and each time the heap has grown by a quarter it walks every
    object the run holds. A night parses hundreds of thousands of series, each a dict and lists in no cycle, so
    at 5,000 pods that took 0.9 s of a 5 s run. The modules' own objects (pandas, SQLAlchemy, the configuration's
    models), which live as long as the run, are left out of those walks (`gc.freeze`), and the youngest generation
    is collected every YOUNGEST_COLLECTED_AFTER objects: 0.2 s (docs/performance.md "The client's share"). What is
    freed when no longer referenced is freed as before; only garbage in cycles waits longer. (A collection before
    freezing would find nothing there: 0 objects, 0.07 s.)"""
    gc.freeze()
    gc.set_threshold(YOUNGEST_COLLECTED_AFTER)


@dataclass(frozen=True)
class RunSummary:
    day: date
    rows: int
    total_cost: float
    resource_hours: dict[str, dict[str, float]]  # per cluster, each resource's hours (collect.day.hours_by_resource)
    cluster_costs: dict[str, float]  # cost of the day per configured cluster, 0.0 for one where nothing ran
    undelivered: tuple[str, ...] = ()  # one sentence per summary email that failed
    directory_warning: str = ""  # why the last known directory was used (unreachable), for reports and emails


def _read_directory(config: Config, ledger: Engine) -> tuple[Directory, str]:
    """The directory and a warning; with `on_failure: last_known` an outage falls back to the last run's copy
    (which is refused like a live one if it is ambiguous)."""
    try:
        return load_directory(config.directory), ""
    except DirectoryError as exc:
        if config.directory.on_failure != "last_known" or isinstance(exc, AmbiguousDirectoryError):
            raise  # an ambiguous directory was read fine: an older copy would only hide the ambiguity
        stored = latest_directory(ledger)
        if stored is None:
            raise DirectoryError(f"{exc}; and no earlier run stored a directory to fall back on") from None
        taken_at, content = stored
        # kept in the ledger and shown in reports and emails, so without the passwords of URLs
        warning = redact(f"{exc}; people and teams are as of the last successful run ({taken_at:%Y-%m-%d %H:%M} UTC)")
        log.warning("DIRECTORY UNAVAILABLE, USING THE LAST KNOWN ONE: %s", warning)
        return directory_from_json(content), warning


def _read_coldfront(config: Config, ledger: Engine, directory: Directory
                    ) -> tuple[Directory, tuple[MappedAllocation, ...], str]:
    """The directory with the accounts ColdFront's allocations name, the allocations, and a warning. A ColdFront that
    does not answer leaves the accounts as the last run stored them: the run stores no directory (its note says
    why), so pages, statements and the journal read the last one, whose ColdFront accounts are those of the last
    night that read it, and the night's allocation draw takes the same; the night is billed all the same (its
    ledger rows do not depend on accounts)."""
    if config.coldfront is None:
        return directory, (), ""
    try:
        allocations, unknown = allocations_of(config.coldfront, directory)
    except ColdFrontError as exc:
        warning = f"{exc}; the accounts of ColdFront and the directory are those the last run stored"
        log.warning("COLDFRONT UNAVAILABLE, ITS ACCOUNTS AS LAST STORED: %s", warning)
        return with_accounts_as_stored(directory, stored_directory(ledger)), (), warning
    log.info("ColdFront: %d allocations pay for namespaces or teams", len(allocations))
    for sentence in unknown:
        log.warning("COLDFRONT SUBJECT UNKNOWN: %s", sentence)
    return with_allocations(directory, allocations), allocations, ""


def _warn_of_accounts(config: Config, directory: Directory, day: date) -> None:
    """Each account id the directory or ColdFront names that accounts.names does not hold (left out), and each
    allocation nothing draws on that day: so said, as `billing check` says them."""
    if config.accounts is None:
        return
    for sentence in named_assignments(directory.named_accounts, config.accounts.names).unknown:
        log.warning("ACCOUNT UNKNOWN: %s", sentence)
    for sentence in undrawn(config.prepaid_allocations(), accounts_of(config.accounts, directory), day):
        log.warning("ALLOCATION NOT DRAWN: %s", sentence)


def _warn_of_namespaces(config: Config, ledger: Engine, collected: list[CollectedDay], day: date) -> None:
    """Each namespace an assignment valid on the day names that no cluster billed, on the day or before (a typo, or
    a namespace not made yet: it charges nothing), as `billing check` names them; the ledger is read only for a
    namespace the night did not bill."""
    if config.accounts is None:
        return
    tonight = {namespace for cluster in collected for namespace in cluster.usage.usage["namespace"]}
    if assigned_namespaces(config.accounts, day) - tonight:
        for sentence in unbilled_namespaces(config.accounts, day, tonight | namespaces_billed(ledger)):
            log.warning("ACCOUNT NAMESPACE NOT BILLED: %s", sentence)


def _write_usage_back(config: Config, ledger: Engine, day: date, allocations: tuple[MappedAllocation, ...]) -> None:
    """The month to date of each allocation's namespaces and teams as its usage in ColdFront, when `day` is the latest
    billed (a day run again later must not put an older figure back); a failure is a warning: the night is billed."""
    section = config.coldfront
    if section is None or not section.usage_attribute or days_billed(ledger)[1] != day:
        return
    try:
        done = write_usage(section, month_to_date(ledger, day, config.currency, allocations))
    except ColdFrontError as exc:
        log.warning("COLDFRONT USAGE NOT WRITTEN: %s", exc)
        return
    log.info("ColdFront: usage of %s written to %d allocations", section.usage_attribute, len(done.written))
    if done.without:
        log.warning("ColdFront allocations %s have no attribute %r with usage: give each one (its value the amount "
                    "allocated) to see its usage", ", ".join(map(str, done.without)), section.usage_attribute)


# a day's summaries: those not sent yet, all again, none (--no-email), or none as a backfill's day before yesterday
Summaries = Literal["send", "resend", "none", "backfilled"]
WHY_NONE = {"none": "--no-email", "backfilled": "a backfill of a day before yesterday; --email sends them"}


def run_day(config: Config, day: date, require_coverage: float = 0.0,
            turn: AbstractContextManager | None = None, summaries: Summaries = "send") -> RunSummary:
    """Bill one day: collect from every cluster, bill into the ledger, publish pages and emails.

    Every data source is read before the ledger is touched, so a failed run leaves it as it was. The ledger
    is written and the day published within `turn`: a backfill collects several days at once and lets them
    write one at a time, oldest first (billing/jobs/backfill.py)."""
    check_output_dir(Path(config.output_dir))
    ledger = open_ledger(config.database)
    period = billing_day(day, config.zone)
    log.info("billing %s (%s to %s UTC)", day, period.start.isoformat(), period.end.isoformat())
    if period.end > datetime.now(timezone.utc):
        log.warning("%s has not ended yet in %s: its bill is partial until the day is run again", day, config.timezone)
    # the price sets in force that day: a day no set covers is refused before any store is asked
    prices = {cluster.name: cluster.prices_on(day) for cluster in config.clusters}

    collected = [_collect_cluster(config, cluster, period, prices[cluster.name]) for cluster in config.clusters]
    check_coverage(collected, day, require_coverage)
    directory, directory_warning = _read_directory(config, ledger)
    check_names(config, directory)  # a team or person the config names that it does not hold: exit 2, nothing written
    directory, allocations, coldfront_warning = _read_coldfront(config, ledger, directory)
    _warn_of_accounts(config, directory, day)
    _warn_of_namespaces(config, ledger, collected, day)
    with turn or nullcontext():
        billed = _bill(config, ledger, day, collected, prices, directory,
                       "; ".join(filter(None, [directory_warning, coldfront_warning])))
        collected.clear()  # in the ledger now, from which the pages read: not held while they are made
        free_pages_to_the_system()
        undelivered = _publish(config, ledger, day, directory, summaries)
    if allocations:
        _write_usage_back(config, ledger, day, allocations)
    return replace(billed, undelivered=tuple(undelivered), directory_warning=directory_warning)


def _collect_cluster(config: Config, cluster: ClusterConfig, period: BillingDay, prices: Prices) -> CollectedDay:
    """One cluster-day from its store (billing/collect/day.py), refused at once where its usage (a storage class) or
    its Kueue quotas could not be priced."""
    collected = collect_day(config, cluster, period, prometheus_source(cluster.name, cluster.prometheus))
    free_pages_to_the_system()  # what its answers left
    refuse_unpriced(collected, period.date, prices, config)
    return collected


def _bill(config: Config, ledger: Engine, day: date, collected: list[CollectedDay], prices: dict[str, Prices],
          directory: Directory, directory_warning: str) -> RunSummary:
    """Bill the day and write it in one transaction, with the directory it was owned by; what was written. The bill
    lives only as long as this call: the pages and emails read the day back from the ledger."""
    bill = bill_day(collected, prices, directory, config)
    written = replace_day(
        ledger, day, bill, config.currency,
        snapshot=None if directory_warning else directory_to_json(directory), directory_note=directory_warning,
        workloads_since=kept_since(datetime.now(config.zone).date(), config.workloads.keep_days),
        allocation_use=allocation_use(bill.rows, day,
                                      accounts_of(config.accounts, directory) if config.accounts else None,
                                      config.prepaid_allocations(), config.clusters),
        allocations=config.prepaid_allocations(),
    )
    total = bill.cost()
    log.info(
        "%s: %d ledger rows, total cost %.2f %s", day, written, total, config.currency,
        extra={"day": day.isoformat(), "rows": written, "total_cost": total, "currency": config.currency},
    )
    return RunSummary(day, written, total, {c.usage.cluster: hours_by_resource(c.usage) for c in collected},
                      {c.name: bill.cost(c.name) for c in config.clusters})


def _publish(config: Config, ledger: Engine, day: date, directory: Directory, summaries: Summaries) -> list[str]:
    """Pages from the ledger, then summaries and digests (each once, billing/notify/deliveries.py; none with
    `summaries` "none" or "backfilled") and budget alerts; one sentence per undelivered message."""
    report = render_day(config, day)
    undelivered: list[str] = []
    if config.email.enabled and summaries not in WHY_NONE:
        envelopes, undelivered = summary_envelopes(report, directory, config.email, digests(ledger, config, day),
                                                   config.reports_url)
        undelivered += deliver_once(envelopes, config.email, ledger, day, resend=summaries == "resend")
    elif config.email.enabled:
        log.info("email: no daily summaries for %s (%s)", day, WHY_NONE[summaries])
    undelivered += send_alerts(ledger, day, team_budgets(config.budgets, directory), config.budgets.alert_at,
                               directory, config.email, config.currency, config.reports_url)
    if config.allocations:
        undelivered += send_allocation_alerts(ledger, allocation_statuses(ledger, config, day), directory,
                                              config.email)
    return undelivered


def render_day(config: Config, day: date) -> DayReport:
    """Write a day's HTML reports from the ledger (never from collected data); return its report."""
    report = day_report(open_ledger(config.database), config, day)
    pages = write_pages(report, Path(config.output_dir))
    log.info("%s: wrote %d report pages below %s", day, len(pages), config.output_dir)
    return report
