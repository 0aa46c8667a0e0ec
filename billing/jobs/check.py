"""`billing check`: is everything the nightly job needs wired up?

Each dependency (every cluster's Prometheus, the directory, the ledger
database, the SMTP server) is reached the way the job reaches it, timed, and
reported as one `Probe`. A failing dependency never stops the others from
being checked: that is the point of a check.

Per cluster it also says which store answers and runs the preflight of the
bill (billing/collect/preflight.py): whether the day's samples (default
yesterday) hold every family the bill needs under the cluster's selector, in
the words with which `billing run` refuses a day that fails it. Beside it,
what the request rule adds and what the breakdown by workload reads. The lines
after the store's ask through one cluster-day (billing/collect/context.py), as
a run does: the store is detected once, and every question is counted.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable, Iterator
from contextlib import suppress
from dataclasses import dataclass
from datetime import date, timedelta
from functools import partial, wraps
from pathlib import Path
from typing import Any

import pandas as pd

from billing.accounts import Subject, overlapping, uneven_days
from billing.allocations import overlapping_allocations, undrawn, unknown_accounts
from billing.charge.bound_pending import held_by_resource
from billing.charge.pricing import unpriced_models
from billing.charge.quotas import queue_remarks, unpriced_flavors
from billing.collect.capacity import bills_capacity, collect_allocatable
from billing.collect.check_questions import (
    ESTIMATE_STEP,
    RuleAdds,
    UnbillablePods,
    added_by_rule,
    claims_bound,
    held_while_pending,
    selected_nodes,
    unmetered,
    vector_one,
    workload_labels_seen,
)
from billing.collect.context import ClusterDay, cluster_day
from billing.collect.energy import COUNTERS, collect_energy, refuse_unmeasured
from billing.collect.figures import ALLOCATABLE, ImpossibleFigure
from billing.collect.kueue import NOMINAL, collect_quotas
from billing.collect.preflight import no_samples, preflight
from billing.collect.prometheus import PrometheusSource
from billing.collect.promql import GpuResources, gpu_fractions
from billing.collect.replay import cluster_recording, prometheus_source
from billing.collect.storage import collect_storage
from billing.config import (
    DRA_GPU,
    AccountsConfig,
    ClusterConfig,
    Config,
    DatedPrices,
    EmailConfig,
    Prices,
    kube_label,
    load_config,
    read_secrets,
)
from billing.days import BillingDay, billing_day, yesterday
from billing.directory.accounts import accounts_of, named_assignments
from billing.directory.coldfront import ColdFrontError, allocations_of, named_by, with_allocations
from billing.directory.names import assigned_namespaces, unbilled_namespaces
from billing.directory.sources import check_directory, load_directory
from billing.errors import BillingError, RunFailed
from billing.ledger.database import NoLedgerYet, open_ledger
from billing.ledger.read import days_billed, namespaces_billed
from billing.notify.mail import IMPLICIT_TLS_PORT, connect_smtp
from billing.resources import GPU

TIMEOUT = 10.0  # seconds: a check answers quickly or reports the dependency as failing


@dataclass(frozen=True)
class Probe:
    """What checking one dependency found."""

    dependency: str
    ok: bool
    detail: str  # what was reached, or why not
    seconds: float
    warning: bool = False  # usable, but something needs a look (the run does not fail)
    exit_status: int = 1  # of a failure: 2 where the config is to blame (a team it names that the directory lacks)

    def line(self) -> str:
        took = f"{self.seconds * 1000:.0f} ms" if self.seconds < 1 else f"{self.seconds:.1f} s"
        status = "FAIL" if not self.ok else "WARN" if self.warning else "ok"
        return f"{status:<4}  {self.dependency:<20}  {self.detail} ({took})"


class CheckFailure(RunFailed):
    """A dependency was reached but is not usable; the message says why."""


class CheckWarning(Exception):
    """A dependency is usable, but something about it would surprise; the message says what."""


def _timed(dependency: str, probe: Callable[[], str]) -> Probe:
    start = time.monotonic()
    try:
        return Probe(dependency, True, probe(), time.monotonic() - start)
    except CheckWarning as exc:
        return Probe(dependency, True, str(exc), time.monotonic() - start, warning=True)
    except Exception as exc:  # any failure, expected or not, is this dependency's line, not a crash
        reason = str(exc) if isinstance(exc, BillingError) else f"{type(exc).__name__}: {exc}"  # a sentence, or a bug
        status = exc.exit_status if isinstance(exc, BillingError) else 1
        return Probe(dependency, False, reason, time.monotonic() - start, exit_status=status)


def _source(cluster: ClusterConfig) -> PrometheusSource:
    """The cluster's source without the job's retries, and with the check's short timeout."""
    config = cluster.prometheus
    return prometheus_source(cluster.name, config.model_copy(update={"timeout": min(config.timeout, TIMEOUT), "retries": 0}))


def prometheus(cluster: ClusterConfig, day: BillingDay, step: int, gpu_resources: GpuResources
               ) -> tuple[str, ClusterDay]:
    """Ask the server for `vector(1)`, then build the cluster-day the lines after this one ask through: which store
    it is and how its labels are named, detected once as a run does (recorded answers are counted, not asked)."""
    config = cluster.prometheus
    source = _source(cluster)
    if config.replay:
        answers = len(cluster_recording(cluster.name, Path(config.replay)))
        if not answers:
            raise CheckFailure(f"replay directory {config.replay} holds no recorded answers")
        reached = f"replay directory {config.replay}: {answers} recorded answers"
    else:
        config.check_files()
        one, answer = vector_one(source)
        if not one:
            raise CheckFailure(f"{config.url} answered vector(1) with {answer!r}, not 1")
        reached = f"{config.url} answered vector(1)"
    context = cluster_day(cluster, day, step, gpu_resources, source)
    return f"{reached}; the store is {context.store.engine}", context


def reach(config: Config, cluster: ClusterConfig, day: BillingDay) -> tuple[Probe, ClusterDay | None]:
    """The cluster's `prometheus` line, and its cluster-day for the lines after it; None where the store was not
    reached (nothing more is asked of it)."""
    reached: list[ClusterDay] = []

    def probe() -> str:
        detail, context = prometheus(cluster, day, int(config.step), config.gpu_resources)
        reached.append(context)
        return detail

    return _timed(f"prometheus {cluster.name}", probe), next(iter(reached), None)


def asked_of_a_live_store(line: Callable[..., str]) -> Callable[..., str]:
    """A cluster-day's line whose questions `billing run` does not ask: no recording holds their answers
    (billing/collect/replay.py), so on recorded answers the line says it was not checked rather than fail."""
    @wraps(line)
    def checked(context: ClusterDay, *args: Any) -> str:
        return "recorded answers: not checked" if context.cluster.prometheus.replay else line(context, *args)

    return checked


@asked_of_a_live_store
def bill_series(context: ClusterDay, workloads: bool) -> str:
    """The preflight `billing run` refuses a cluster-day by (billing/collect/preflight.py), in its words: a FAIL per
    family the bill needs without a sample; GPU-like resources `gpu_resources` does not list, and labels a scrape
    moved, as warnings."""
    findings, day = preflight(context, workloads), context.day
    failed = findings.said("FAIL")
    if failed:
        raise CheckFailure(failed)
    remarks = [finding.sentence for finding in findings.found]
    renames, noted = context.store.renames(), ""
    if context.cluster.label_names is None:  # detected: the bill is right, but the scrape setup confuses other tools
        remarks += [f"{rename} (a scrape with honor_labels: false moved them there; billing reads them there, "
                    "but honor_labels: true is better: docs/stores.md)" for rename in renames]
    elif renames:
        noted = "; " + "; ".join(f"{rename} (clusters[].label_names)" for rename in renames)
    if remarks:
        raise CheckWarning(f"on {day.date}: " + "; ".join(remarks))
    return f"every series the bill needs has samples on {day.date}{noted}"


UNITS = {"cpu": ("core-h", 1.0), "memory": ("GiB-h", 2.0**-30), DRA_GPU: ("GPU-h", 1.0)}  # as people read them


@asked_of_a_live_store
def request_rule(context: ClusterDay) -> str:
    """What docs/spec.md rule 3 (what the scheduler reserves) adds on the day over app containers' requests alone,
    per resource and term, so that an operator can announce it; and, as warnings, the pods whose requests
    kube-state-metrics cannot tell billing: native sidecars where it is too old to label them, and pods with pod-level
    resources. (GPUs held through Dynamic Resource Allocation without dcgm-exporter's DRA labels fail the preflight.)"""
    cluster, day = context.cluster, context.day
    asked = added_by_rule(context)
    added = [line for resource, adds in asked.added.items() if (line := _added(resource, adds))]
    rule: str = cluster.requests or "pod"
    said = ("adds" if rule == "pod" else "would add (requests: pod)") + f" to app containers' requests on {day.date}: "
    if context.store.scheduler and rule == "pod":
        rule += ", kube-scheduler's figures where seen"
    figures = said + ("nothing" if not added else "; ".join(added)) + f" (sampled every {ESTIMATE_STEP // 60} minutes)"
    remarks = _unbillable_requests(asked.unbillable, asked.scheduled)
    if remarks:
        raise CheckWarning(f"requests: {rule}; {figures}; " + "; ".join(remarks))
    return f"requests: {rule}; {figures}"


def _added(resource: str, adds: RuleAdds) -> str:
    """What the rule adds of one resource, as people read it: '' where it is less than half a hundredth."""
    unit, scale = UNITS.get(resource, (f"{resource}-h", 1.0))
    if abs(adds.more) * scale < 0.005:
        return ""
    share = f" ({adds.more / adds.app:+.1%} of {adds.app * scale:,.2f})" if adds.app else ""
    detail = ", ".join(f"{name} {value * scale:,.2f}" for name, value in adds.parts.items() if value * scale >= 0.005)
    return f"{resource} {adds.more * scale:+,.2f} {unit}{share}: {detail}"


@asked_of_a_live_store
def bound_pending(context: ClusterDay) -> str:
    """What pods bound to a node held on the day before they ran (docs/spec.md "Rule 2: running"), per resource: how
    much, its share of what Running pods requested, the reason that held most; and whether the cluster charges it."""
    cluster, day = context.cluster, context.day
    lines = held_by_resource(held_while_pending(context))
    said = f"bound_pending: {cluster.bound_pending or 'show'}; on {day.date}: "
    sampled = f" (sampled every {ESTIMATE_STEP // 60} minutes)"
    return said + ("; ".join(lines) if lines else "no pod bound to a node was Pending") + sampled


def _unbillable_requests(counted: UnbillablePods, scheduled: bool) -> list[str]:
    """Sentences about Running pods whose requests kube-state-metrics leaves billing blind to."""
    remarks = []
    if counted.sidecars and not counted.sidecars_told_apart:
        remarks.append(f"{counted.sidecars} Running pods had init containers running (native sidecars) but no "
                       "kube_pod_init_container_info carries restart_policy: kube-state-metrics is older than v2.11.0, so "
                       "their sidecars are billed as init containers (only the largest counts, not their sum); upgrade it")
    if counted.pod_level:
        remarks.append(f"{counted.pod_level} Running pods are Burstable or Guaranteed without any container requesting "
                       "cpu or memory: they set pod-level resources (spec.resources), which kube-state-metrics does not "
                       "export, "
                       + ("and kube-scheduler's kube_pod_resource_request had no figure for them (is every scheduler "
                          "scraped?), so they are billed no cpu or memory" if scheduled else
                          "so they are billed no cpu or memory; scrape kube-scheduler's /metrics/resources "
                          "(docs/deploy.md), whose figures include them"))
    return remarks


@asked_of_a_live_store
def workload_series(context: ClusterDay, cost_labels: list[str]) -> str:
    """Does the day hold what the breakdown by workload and cost label reads besides the owners (which the
    preflight requires): the pods' controllers (kube_pod_info's created_by_kind) and each cost label on some pod's
    kube_pod_labels? Without them the bill is right but its breakdown is coarser: warnings."""
    day = context.day
    controllers, unlabelled = workload_labels_seen(context, cost_labels)
    remarks = [] if controllers else [
        "no pod's kube_pod_info carries created_by_kind, so every pod is its own workload (Pod/<name>); "
        "kube-state-metrics sets it on every pod: a metric relabelling must not drop it"]
    if unlabelled:
        remarks.append(f"no pod's kube_pod_labels carries {', '.join(kube_label(name) for name in unlabelled)}, so "
                       "every pod's is ''; kube-state-metrics exports pod labels only when allowlisted: run it with "
                       f"--metric-labels-allowlist=pods=[{','.join(cost_labels)}]")
    if remarks:
        raise CheckWarning(f"on {day.date}: " + "; ".join(remarks))
    labels = f" and cost labels {', '.join(cost_labels)}" if cost_labels else ""
    return f"pods' controllers{labels} have samples on {day.date}"


def store_figures(context: ClusterDay) -> str:
    """Whether the day's allocatable figures, and Kueue's, pass the gate as the run reads them (docs/spec.md "Figures
    from the store"): an impossible one fails where the bill needs it and warns where capacity is only shown; Kueue
    replicas that disagree without a role fail, naming both figures; a node's GPU model priced only under another
    case warns."""
    cluster, day = context.cluster, context.day.date
    try:
        allocatable = collect_allocatable(context)
        quotas = collect_quotas(context)
    except ImpossibleFigure as refused:
        if bills_capacity(cluster) or refused.family.series != ALLOCATABLE.series:
            raise refused.on(day) from None
        raise CheckWarning(f"on {day} the capacity is unknown: {refused.reason}; the run bills the day without it, "
                           "as no reserved pool, Kueue quota or shared unrequested capacity needs it") from None
    kueue = f" and Kueue's quotas ({len(quotas)} figures, one replica's each)" if cluster.kueue is not None else ""
    said = f"allocatable capacity{kueue} on {day}: every figure possible"
    models = allocatable.loc[allocatable["resource"] == GPU, ["resource", "gpu_model"]].assign(priority_class="")
    misnamed = unpriced_models(models, cluster.prices_on(day), cluster.prices_key(day))
    if misnamed:  # a node's model priced under another case: the run refuses the day where a pod uses it
        raise CheckWarning(f"{said}; " + "; ".join(misnamed) + " (the run refuses a day on which a pod uses it)")
    return said


def kueue_queues(context: ClusterDay) -> str:
    """Which ClusterQueues Kueue's quota series name on the day, and the teams they map to (docs/spec.md "Kueue
    quotas"), asked as the run asks (so recorded answers answer it too); warnings for what the night's log warns of
    (billing/charge/quotas.py `queue_remarks`). None found, or GPUs of a flavor without a priced model, fail: the
    run would refuse the day."""
    cluster = context.cluster
    kueue = cluster.kueue
    assert kueue is not None  # asked only for a cluster with `kueue`
    samples = collect_quotas(context)
    unpriced = unpriced_flavors(samples, cluster, cluster.prices_on(context.day.date), gpu_fractions(context.gpu_resources))
    if unpriced:
        raise CheckFailure(f"on {context.day.date}: " + "; ".join(unpriced))
    nominal = samples[samples["family"] == NOMINAL]
    found = dict(zip(nominal["cluster_queue"], nominal["cohort"]))
    named = [f"{queue} ({f'cohort {cohort}' if cohort else 'no cohort'}) -> "
             f"{kueue.queues[queue].team if queue in kueue.queues else 'no team'}" for queue, cohort in sorted(found.items())]
    said = f"ClusterQueues on {context.day.date}: " + "; ".join(named)
    remarks = queue_remarks(kueue, found)
    if remarks:
        raise CheckWarning(said + "; " + "; ".join(remarks))
    return said


@asked_of_a_live_store
def storage(context: ClusterDay) -> str:
    """The storage classes of the day's persistent volumes and the claims bound (docs/spec.md "Storage"), asked as
    the run asks them, each figure through the gate (an impossible one fails, as the run refuses the day); a class
    without a price fails as the run refuses it."""
    day, collected = context.day.date, collect_storage(context)
    cluster, classes = context.cluster, collected.classes
    unpriced = unpriced_models(collected.usage, cluster.prices_on(day), cluster.prices_key(day))
    if unpriced:  # the run refuses the day
        raise CheckFailure(f"on {day}: " + "; ".join(unpriced))
    if classes.empty:
        return f"no persistent volume claim on {day}: no storage to bill"
    figures = "; ".join(f"{row.storageclass} {row.claimed:.2f} GiB-h claimed of {row.provisioned:.2f} provisioned, "
                        f"{row.unclaimed:.2f} unclaimed" for row in classes.itertuples())
    return f"{len(classes)} storage classes on {day}: {figures}; {claims_bound(context)} claims bound"


def energy(context: ClusterDay) -> str:
    """The day's energy as the run reads it (docs/spec.md "Energy and carbon"): the counters found and the kWh, each
    figure through the gate, and whether the unattributed is shared; warned of, the GPUs without an energy counter and
    the nodes without Kepler, whose energy the night cannot see; failed, where energy is priced and a family has no
    sample (the run would refuse the day)."""
    day, collected = context.day.date, collect_energy(context)
    settings = context.cluster.energy_on(day)
    if settings is not None and settings.price_kwh is not None:
        refuse_unmeasured(collected, context.cluster.name, day)
    found = [COUNTERS[part] for part in sorted(collected.found)] or ["no energy counter"]
    kwh = collected.energy["gpu_kwh"] + collected.energy["cpu_kwh"]
    pods = collected.energy["namespace"] != ""

    def written(figures: pd.Series) -> str:
        return "unknown" if figures.isna().any() else f"{figures.sum():.2f}"
    shared = ("shared over the namespaces by their kWh (energy.share_unattributed)"
              if settings is not None and settings.share_unattributed else "not shared")
    said = (f"on {day}: {', '.join(found)}; {written(kwh[pods])} kWh of {pods.sum()} namespaces, "
            f"{written(kwh[~pods])} unattributed, {shared}")
    gpus, nodes = unmetered(context)
    missing = [*([f"GPUs without an energy counter: {', '.join(gpus[:5])}"] if gpus else []),
               *([f"nodes without Kepler: {', '.join(nodes[:5])}"] if nodes else [])]
    if missing:
        raise CheckWarning(f"{said}; {'; '.join(missing)} (their energy is not counted)")
    return said


def selector(context: ClusterDay) -> str:
    """Does the cluster's selector match any node of kube-state-metrics on the day checked? A typo would make
    every run refuse its day for want of data; a day without any sample says so first, the selector not being
    to blame."""
    config, day = context.cluster.prometheus, context.day
    nodes = selected_nodes(context)
    if nodes is None:
        raise CheckFailure(f"on {day.date}: {no_samples(context)}")
    return f"{config.selector} matches kube-state-metrics series of {nodes} nodes on {day.date}"


def database(url: str) -> str:
    """Open the ledger as it is and read how many days it holds; a ledger not made yet is a warning, not made."""
    try:
        engine = open_ledger(url, create=False)
    except NoLedgerYet as exc:
        raise CheckWarning(str(exc)) from None
    try:
        days, latest = days_billed(engine)
    finally:
        engine.dispose()
    last = f", the last {latest}" if latest else ""
    return f"{engine.url.render_as_string(hide_password=True)}: {days} days billed{last}"


def delivery(email: EmailConfig) -> str:
    """Open the session sending would open (TLS or STARTTLS, login), say EHLO, send nothing."""
    if email.outbox_dir:
        outbox = Path(email.outbox_dir)
        if outbox.is_dir():
            if not os.access(outbox, os.W_OK):
                raise CheckFailure(f"outbox directory {outbox} is not writable")
            return f"messages go to the outbox directory {outbox}, which is writable"
        return f"messages go to the outbox directory {outbox}, " + _creatable(outbox)
    read_secrets(email)  # a missing password is named, rather than the login it would fail
    with connect_smtp(email) as session:
        session.ehlo()
    tls = "TLS" if email.smtp_port == IMPLICIT_TLS_PORT else "STARTTLS" if email.starttls else "no TLS"
    login = f"login as {email.username}" if email.username else "no login"
    return f"SMTP server {email.smtp_host}:{email.smtp_port}: {tls}, {login}, EHLO accepted"


def _creatable(path: Path) -> str:
    """Whether a run can create a missing directory: its nearest existing parent is a writable directory."""
    parent = next(p for p in path.parents if p.exists())  # the root exists
    if not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK):
        raise CheckFailure(f"{path} does not exist and cannot be created: {parent} is not a writable directory")
    return f"which the first run creates (in {parent}, which is writable)"


def price_set(cluster: ClusterConfig, day: date) -> str:
    """Which of the cluster's price sets prices `day` (docs/spec.md "Prices over time and cost recovery")."""
    if isinstance(cluster.prices, Prices):
        return f"{day} is priced with the cluster's one price set (no dated sets)"
    in_force = cluster.prices_on(day)  # none in force: the sentence naming the key
    later = [prices.from_ for prices in cluster.prices if prices.from_ > day]
    starts = in_force.from_ if isinstance(in_force, DatedPrices) else ""
    return f"{day} is priced with the set from {starts}" + (f"; the next from {later[0]}" if later else "")


def accounts_consistent(section: AccountsConfig) -> str:
    """Every assignment's percentages add up to 100 on each day they hold, and no account is assigned to a subject
    twice on a day (docs/spec.md "Accounts"): the config refuses both; other sources of accounts are held to it
    here too."""
    held = section.accounts().assignments
    problems = overlapping(held) + uneven_days(held)
    if problems:
        raise CheckFailure("; ".join(problems))
    return (f"{len(section.names)} accounts, {len(held)} assignments: percentages add up to 100 on every day, "
            f"none overlapping")


def accounts_expiring(section: AccountsConfig, today: date) -> str:
    """The assignments that end within accounts.expiry_notice_days, each named (a warning: someone must renew a
    grant or say which account takes over)."""
    within = section.expiry_notice_days
    ending = section.accounts().expiring(today, within)
    if ending:
        raise CheckWarning(f"{len(ending)} ending within {within} days: " + "; ".join(
            f"{a.subject} on {a.account.id} ({a.account.name}, {a.percent} %) last charged {a.last}" for a in ending))
    return f"none ending within {within} days (accounts.expiry_notice_days)"


def accounts_named(config: Config, section: AccountsConfig) -> str:
    """The teams and people the directory's accounts attributes charge to accounts, and each id accounts.names does
    not hold (a warning: that subject's charges go to its other accounts, or to the default account)."""
    given = named_assignments(load_directory(config.directory).named_accounts, section.names)
    attributes = " and ".join(f"{kind}.accounts_attribute {attribute}" for kind, attribute in (
        ("teams", config.directory.teams.accounts_attribute), ("people", config.directory.people.accounts_attribute))
        if attribute)
    if given.unknown:
        raise CheckWarning(f"{len(given.unknown)} unknown: " + "; ".join(given.unknown))
    return (f"{len({a.subject for a in given.assignments})} teams and people charged to {len(given.assignments)} "
            f"accounts by the directory's {attributes}, all in accounts.names")


def coldfront_allocations(config: Config, section: AccountsConfig) -> str:
    """ColdFront's REST API reached with the token, its allocations that pay for namespaces and teams, and a warning
    naming each account id that accounts.names does not hold, each such allocation without an account, and a
    write-back command that is not there."""
    coldfront = config.coldfront
    assert coldfront is not None  # asked only with a coldfront section
    allocations, unknown = allocations_of(coldfront, load_directory(config.directory))
    given = named_assignments(named_by(allocations), section.names)
    problems = [*unknown, *given.unknown]
    without = [str(allocation.id) for allocation in allocations if not allocation.accounts]
    if without:
        problems.append(f"allocations {', '.join(without)} name no account ({coldfront.account_attribute}), so "
                        f"their namespaces and teams are charged as if ColdFront named none")
    if coldfront.usage_attribute and not shutil.which(coldfront.usage_command[0]):
        problems.append(f"coldfront.usage_command {coldfront.usage_command[0]!r} is not installed here, so no usage "
                        f"is written back")
    found = (f"ColdFront {coldfront.url}: {len(allocations)} allocations pay for "
             f"{len({subject for a in allocations for subject in a.subjects})} namespaces and teams, charged to "
             f"{len({a.account.id for a in given.assignments})} accounts")
    if problems:
        raise CheckWarning(f"{found}; " + "; ".join(problems))
    return found + ", all in accounts.names"


def accounts_namespaces(config: Config, section: AccountsConfig, today: date) -> str:
    """The namespaces the assignments valid today name, each looked up among those the ledger billed (a warning for
    each no cluster has billed, as the run logs them: a typo, or a namespace not made yet, charges nothing)."""
    not_yet = "no day billed yet: the namespaces are looked up once one is"
    try:
        engine = open_ledger(config.database, create=False)
    except NoLedgerYet:
        return not_yet
    try:
        billed = namespaces_billed(engine)
    finally:
        engine.dispose()
    if not billed:
        return not_yet
    unbilled = unbilled_namespaces(section, today, billed)
    if unbilled:
        raise CheckWarning("; ".join(unbilled))
    return f"the {len(assigned_namespaces(section, today))} namespaces assigned on {today} are each billed by a cluster"


def accounts_today(config: Config, section: AccountsConfig, today: date) -> str:
    """The directory's teams with no account valid today, whose charges go to the default account, unless a
    namespace's or person's account takes them, and the allocations holding today whose account nothing is charged
    to (a warning each, as the run logs the latter)."""
    directory = load_directory(config.directory)
    if config.coldfront is not None:
        with suppress(ColdFrontError):  # the coldfront line says it is down
            directory = with_allocations(directory, allocations_of(config.coldfront, directory)[0])
    accounts = accounts_of(section, directory)
    teams = sorted(directory.teams)
    missing = [team for team in teams if not accounts.valid_on(today, Subject("team", team))]
    problems = undrawn(config.prepaid_allocations(), accounts, today)
    if missing:
        problems.insert(0, f"{len(missing)} of {len(teams)} teams have no account valid on {today}, so their charges "
                           f"go to the default account {accounts.default.id} unless a namespace's or person's does: "
                           + ", ".join(missing))
    if problems:
        raise CheckWarning("; ".join(problems))
    return f"all {len(teams)} teams have an account valid on {today}"


def invoice_pdfs() -> str:
    """WeasyPrint lays out a page as PDF (it loads Pango), as `billing close` will lay out each account's invoice:
    a missing library is found now, not at the month's close."""
    from billing.publish.account_invoices import pdf  # loads WeasyPrint: only with account_invoices

    made = pdf("<p>billing check</p>")
    return f"WeasyPrint lays out the invoices per account as PDF (a test page: {len(made):,} bytes)"


def allocations_drawable(config: Config, section: AccountsConfig) -> str:
    """Every allocation is of an account of accounts.names and shares no day with another of its account (the config
    refuses both; other sources are held to it here too); one of SU that a cluster's prices over its period do not
    weigh is not drawn by the charges there (a warning: give the cluster SU weights, or know it)."""
    held = config.prepaid_allocations()
    problems = unknown_accounts(held, section.names) + overlapping_allocations(held)
    if problems:
        raise CheckFailure("; ".join(problems))
    unweighed = [f"{allocation} is of SU and cluster {cluster.name} has price sets without service_units in its "
                 f"period, so charges there do not draw on it"
                 for allocation in held if allocation.in_su for cluster in config.clusters
                 if any(prices.service_units is None for prices in _sets_between(cluster, allocation.first,
                                                                                 allocation.last))]
    if unweighed:
        raise CheckWarning("; ".join(unweighed))
    return f"{len(held)} allocations, each of a known account, none overlapping, every one of SU weighed everywhere"


def _sets_between(cluster: ClusterConfig, first: date, last: date) -> list[Prices]:
    """The cluster's price sets in force on some day from `first` to `last`."""
    if isinstance(cluster.prices, Prices):
        return [cluster.prices]
    starts = [prices.from_ for prices in cluster.prices][1:] + [date.max]
    return [prices for prices, until in zip(cluster.prices, starts, strict=True) if prices.from_ <= last and until > first]


def check_config(path: Path) -> tuple[Config, Probe]:
    """The validated config and its line; an invalid config raises ConfigError (exit status 2)."""
    start = time.monotonic()
    config = load_config(path)
    clusters = ", ".join(cluster.name for cluster in config.clusters)
    detail = f"{path}: valid (clusters {clusters}; timezone {config.timezone})"
    return config, Probe("config", True, detail, time.monotonic() - start)


def check_all(config: Config, day: date | None = None) -> Iterator[Probe]:
    """One probe per dependency, in the order a run needs them; each is yielded as soon as it is done.

    A cluster's series are checked for `day` (default: yesterday), and only where its store answered, through one
    cluster-day."""
    period = billing_day(day or yesterday(config.zone), config.zone)
    for cluster in config.clusters:
        yield _timed(f"prices {cluster.name}", partial(price_set, cluster, period.date))
        reached, context = reach(config, cluster, period)
        yield reached
        if context is None:
            continue
        if cluster.prometheus.selector.strip() and not cluster.prometheus.replay:
            yield _timed(f"selector {cluster.name}", partial(selector, context))
        yield _timed(f"series {cluster.name}", partial(bill_series, context, config.workloads.enabled))
        yield _timed(f"requests {cluster.name}", partial(request_rule, context))
        yield _timed(f"held {cluster.name}", partial(bound_pending, context))
        if cluster.kueue is not None:
            yield _timed(f"kueue {cluster.name}", partial(kueue_queues, context))
        if config.workloads.enabled:
            yield _timed(f"workloads {cluster.name}", partial(workload_series, context, config.cost_labels))
        yield _timed(f"figures {cluster.name}", partial(store_figures, context))
        yield _timed(f"storage {cluster.name}", partial(storage, context))
        if cluster.energy is not None:
            yield _timed(f"energy {cluster.name}", partial(energy, context))
    yield _timed("directory", lambda: check_directory(config))
    if config.accounts is not None:
        section, today = config.accounts, yesterday(config.zone) + timedelta(days=1)
        yield _timed("accounts", partial(accounts_consistent, section))
        yield _timed("accounts expiring", partial(accounts_expiring, section, today))
        if config.directory.teams.accounts_attribute or config.directory.people.accounts_attribute:
            yield _timed("accounts directory", partial(accounts_named, config, section))
        if config.coldfront is not None:
            yield _timed("coldfront", partial(coldfront_allocations, config, section))
        yield _timed("accounts today", partial(accounts_today, config, section, today))
        if any(assignment.namespace for assignment in section.assignments):
            yield _timed("accounts namespaces", partial(accounts_namespaces, config, section, today))
        if config.allocations:
            yield _timed("allocations", partial(allocations_drawable, config, section))
    if config.account_invoices is not None:
        yield _timed("invoices", invoice_pdfs)
    yield _timed("database", lambda: database(config.database))
    if config.email.enabled:
        yield _timed("email", lambda: delivery(config.email))
    else:
        yield Probe("email", True, "disabled in the config (email.enabled), not checked", 0.0)
