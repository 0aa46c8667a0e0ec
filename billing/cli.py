"""The `billing` command: parse arguments, call the job, map errors to exit codes.

Exit status: 0 success, 1 a run failed (a data source unreachable, a query
failed, ...), 2 a usage or configuration error.

Each command imports the stages it needs when it runs: at the top, only click
and modules that import nothing heavy, so `billing --version`, `--help` and
shell completion start at once (tests/cli/test_cli_imports.py keeps pandas,
SQLAlchemy, numpy, Flask and pydantic out).
"""

from __future__ import annotations

import functools
import getpass
import itertools
import logging
import os
import signal
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING

import click

from billing.days import days_between, yesterday
from billing.errors import BillingError
from billing.logs import configure_logging
from billing.publish import asked, choices
from billing.redact import redact

if TYPE_CHECKING:
    from billing.config import Config
    from billing.publish.report import Subject

log = logging.getLogger("billing")


def _fail(status: int, message: str, at_once: bool = False) -> None:
    """Say why in one sentence and exit; `at_once` skips waiting for the collector's threads.

    Those threads may each be waiting for a query for up to the Prometheus
    timeout, far beyond the 30 s Kubernetes grants after SIGTERM; every
    transaction has been rolled back by the time this runs.
    """
    message = redact(message)
    context = click.get_current_context(silent=True)
    if context and context.meta.get(LOG_FORMAT) == "json":
        log.error(message)  # a log pipeline gets the reason as one more JSON line
    else:
        click.echo(f"billing: {message}", err=True)
    if at_once:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)
    sys.exit(status)


class Terminated(KeyboardInterrupt):
    """SIGTERM, e.g. Kubernetes evicting the job's pod.

    A kind of KeyboardInterrupt so that libraries stop as they do for Ctrl-C:
    no `except Exception` swallows it, and psycopg cancels the statement in
    progress, so the transaction can still be rolled back.
    """


def _raise_terminated(signum, frame) -> None:
    raise Terminated()


def _guarded(command):
    """Turn the modules' errors into one sentence and the documented exit status (billing/errors.py)."""

    @functools.wraps(command)
    def wrapper(*args, **kwargs):
        signal.signal(signal.SIGTERM, _raise_terminated)
        meta = click.get_current_context().meta
        configure_logging(meta.get(VERBOSE, False), meta.get(LOG_FORMAT, "text"))
        try:
            return command(*args, **kwargs)
        except BillingError as exc:  # each says why in one sentence and carries its exit status
            _fail(exc.exit_status, str(exc))
        except KeyboardInterrupt as exc:
            why = "terminated (SIGTERM)" if isinstance(exc, Terminated) else "interrupted"
            _fail(1, f"{why}; the ledger keeps its previous rows for the day being run", at_once=True)
        except (click.ClickException, click.exceptions.Exit, SystemExit):
            raise
        except Exception as exc:  # a bug: still one sentence, the traceback only with -v
            log.debug("traceback", exc_info=True)
            _fail(1, f"unexpected error {type(exc).__name__}: {exc} (run with -v for the traceback)")

    return wrapper


coverage_option = click.option(
    "--require-coverage",
    type=click.FloatRange(0, 1),
    default=0.0,
    show_default=True,
    help="Fail instead of billing a day whose kube-state-metrics data covers less than this share (e.g. 0.99).",
)

# The global options, kept in the context's `meta` (shared by a group and its commands' contexts)
VERBOSE, LOG_FORMAT, CONFIG_FILE = "billing.verbose", "billing.log_format", "billing.config_file"


def _remember(key: str):
    """A global option's callback: the value given last wins, so a command's own beats the one before its name
    (click parses the command's options after the group's)."""

    def remember(ctx: click.Context, param: click.Parameter, value):
        if value:
            ctx.meta[key] = value
        return value

    return remember


def _global_options(command):
    """-v, --log-format and --config, taken before the command's name and after it alike."""
    options = [
        click.option("-v", "--verbose", is_flag=True, expose_value=False, callback=_remember(VERBOSE),
                     help="Log debug details."),
        click.option("--log-format", type=click.Choice(["text", "json"]), expose_value=False,
                     callback=_remember(LOG_FORMAT),
                     help="json: one JSON object per line, for cluster log pipelines (default: text)."),
        click.option("--config", "config_file", type=click.Path(dir_okay=False), expose_value=False,
                     callback=_remember(CONFIG_FILE),
                     help="Configuration file (default: $BILLING_CONFIG, then ./billing.yaml)."),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def _config_path(ctx: click.Context | None = None) -> Path:
    from billing.config import config_path

    return config_path((ctx or click.get_current_context()).meta.get(CONFIG_FILE))


def _config() -> Config:
    from billing.config import load_config

    return load_config(_config_path())


LONG_BACKFILL = 366  # days; a longer backfill is far more often a typo than a plan, so it asks for --yes
PARALLEL_DAYS = 2  # days a backfill collects at once by default (docs/cli.md has the measurements)


def _date(ctx, param, value: str | None) -> date | None:
    """A day option (billing/publish/asked.py), a usage error naming the value."""
    try:
        return asked.day(value)
    except asked.ReportError as exc:
        raise click.BadParameter(str(exc)) from None


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@_global_options
@click.version_option(package_name="billing")
def main() -> None:
    """GPU/CPU chargeback for shared Kubernetes clusters.

    Examples: bill yesterday, then show what a team spent this month.

    \b
        billing run --config /etc/billing/billing.yaml
        billing report --team robotics --config /etc/billing/billing.yaml
    """


@main.command()
@click.option("--http", is_flag=True, help="Serve streamable HTTP behind serve's sign-in, not stdio.")
@click.option("--host", default="127.0.0.1", show_default=True, help="With --http: the address to listen on.")
@click.option("--port", type=click.IntRange(1, 65535), default=8090, show_default=True,
              help="With --http: the TCP port to listen on.")
@click.option("--as", "uid", help="On stdio: whose costs the assistant asks about (default: the login name).")
@_global_options
@_guarded
def mcp(http: bool, host: str, port: int, uid: str | None) -> None:
    """Answer AI assistants over the Model Context Protocol: the ledger read-only, by serve's rules.

    On stdio (the default) for your own assistant, as you (--as, else your login name); with --http beside
    billing serve, each request signed in as serve signs in (web.auth). docs/mcp.md has the tools. Examples:

    \b
        billing mcp --config ~/.config/billing.yaml
        billing mcp --http --host 0.0.0.0 --port 8090 --config /etc/billing/billing.yaml
    """
    from billing.web import mcp_server  # the MCP SDK only for this command

    if uid is not None and http:
        raise click.UsageError("--as is for stdio: over --http each request says who is asking")
    config = _config()
    if not http:
        mcp_server.run_stdio(config, _operator(uid))
        return
    try:
        mcp_server.serve_http(config, host, port)
    except OSError as exc:
        _fail(1, f"billing mcp cannot listen on {host}:{port}: {exc.strerror or exc}")


@main.command()
@click.option("--date", "day", callback=_date, help="Billing day YYYY-MM-DD (default: yesterday, local time).")
@click.option("--resend", is_flag=True,
              help="Send the day's summaries again, as corrections, also to whoever received them already.")
@click.option("--no-email", "no_email", is_flag=True, help="Send no daily summaries (budget alerts still go out).")
@coverage_option
@_global_options
@_guarded
def run(day: date | None, resend: bool, no_email: bool, require_coverage: float) -> None:
    """Bill one day: collect, price, write the ledger, reports and emails.

    Re-running a day replaces its rows; each summary email goes out once (a
    re-run or a retry sends only what was not delivered yet). Example:

        billing run --date 2026-11-20 --config /etc/billing/billing.yaml
    """
    from billing.jobs.metrics import push_run_metrics
    from billing.jobs.run import collect_garbage_for_a_night, run_day
    from billing.memory import strings_in_malloc

    collect_garbage_for_a_night()
    strings_in_malloc()
    if resend and no_email:
        raise click.UsageError("--resend and --no-email contradict each other")
    config = _config()
    config.run_secrets()
    started = time.monotonic()
    summary = run_day(config, day or yesterday(config.zone), require_coverage,
                      summaries="resend" if resend else "none" if no_email else "send")
    if config.metrics.pushgateway:
        push_run_metrics(config.metrics, summary, config.currency, time.monotonic() - started)
    _fail_if_undelivered(list(summary.undelivered))


def _fail_if_undelivered(undelivered: list[str]) -> None:
    """Exit 1 once everything else is done if any summary email failed."""
    if undelivered:
        _fail(1, f"{len(undelivered)} summary email(s) not delivered, first: {undelivered[0]}")


@main.command()
@click.option("--from", "first", callback=_date, required=True, help="First day, YYYY-MM-DD.")
@click.option("--to", "last", callback=_date, required=True, help="Last day, YYYY-MM-DD (inclusive).")
@click.option("--yes", is_flag=True, help=f"Confirm a range of more than {LONG_BACKFILL} days.")
@click.option("--parallel", type=click.IntRange(1, 32), default=PARALLEL_DAYS, show_default=True,
              help="Days collected at once (each store still gets at most its max_queries_in_flight queries).")
@click.option("--email", is_flag=True,
              help="Also send the daily summaries of days before yesterday (each still once).")
@coverage_option
@_global_options
@_guarded
def backfill(first: date, last: date, yes: bool, parallel: int, email: bool, require_coverage: float) -> None:
    """Run every day of an inclusive range, written oldest first.

    A day that fails is named at once and the others still run; the exit
    status is then 1. Days before yesterday send no daily summaries unless
    --email. Example:

        billing backfill --from 2026-11-01 --to 2026-11-20 --parallel 4
    """
    from billing.jobs.backfill import backfill as run_days
    from billing.jobs.run import collect_garbage_for_a_night
    from billing.memory import strings_in_malloc
    from billing.publish.report_formats import day_ranges

    collect_garbage_for_a_night()
    strings_in_malloc()

    if last < first:
        raise click.BadParameter("--to is before --from")
    days = days_between(first, last)
    if len(days) > LONG_BACKFILL and not yes:
        _fail(2, f"--from {first} --to {last} is {len(days):,} days, more than {LONG_BACKFILL}: "
                 "add --yes to bill every one of them")
    config = _config()
    config.run_secrets()
    mailed_from = first if email else yesterday(config.zone)  # older days' summaries would be news of the past
    if sys.stderr.isatty():
        with click.progressbar(length=len(days), label="billing", file=sys.stderr,
                               item_show_func=lambda day: day) as bar:
            outcomes = run_days(config, days, require_coverage, parallel, lambda o: bar.update(1, str(o.day)),
                                mailed_from)
    else:
        ended = itertools.count(1)
        outcomes = run_days(config, days, require_coverage, parallel,
                            lambda o: log.info("backfill: %s %s, %d of %d days done", o.day,
                                               "failed" if o.failure else "billed", next(ended), len(days)),
                            mailed_from)
    failed = [outcome for outcome in outcomes if outcome.failure]
    if failed:
        _fail(1, f"{len(failed)} of {len(days)} days failed, the others are billed: "
                 f"{', '.join(day_ranges([o.day for o in failed]))}; the first: {failed[0].failure}")
    _fail_if_undelivered([failure for outcome in outcomes for failure in outcome.undelivered])


@main.group()
@_global_options
def db() -> None:
    """The ledger database's schema.

    Example, after installing a new version:

        billing db upgrade --config /etc/billing/billing.yaml
    """


@db.command()
@_global_options
@_guarded
def upgrade() -> None:
    """Apply pending schema migrations to the ledger database.

    Run it after installing a new version of billing, before `billing run`.
    Example:

        billing db upgrade --config /etc/billing/billing.yaml
    """
    from billing.ledger.database import upgrade_schema

    before, after = upgrade_schema(_config().database)
    if before == after:
        click.echo(f"the ledger schema is already at revision {after}")
    else:
        click.echo(f"the ledger schema went from revision {before or 'none'} to {after}")


@main.command()
@click.option("--date", "day", callback=_date, help="Billing day YYYY-MM-DD (default: yesterday, local time).")
@_global_options
@_guarded
def render(day: date | None) -> None:
    """Write a day's HTML reports again from the ledger; sends no email.

    Example:

        billing render --date 2026-11-20
    """
    from billing.jobs.run import render_day

    config = _config()
    render_day(config, day or yesterday(config.zone))


def _subject(team: str | None, person: str | None, all_teams: bool) -> Subject:
    """The one subject a report asks about (billing/publish/asked.py), a usage error when it names none."""
    subject = asked.subject(team, person, all_teams, ("--team", "--person", "--all-teams"))
    if subject is None:
        raise click.UsageError("give exactly one of --team, --person and --all-teams")
    return subject


def _complete_groupings(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[str]:
    """Shell completion of report --by: the groupings, workload, and label: plus each configured cost label."""
    from billing.config import ConfigError, load_config

    try:
        labels = [choices.LABEL_PREFIX + name for name in load_config(_config_path(ctx)).cost_labels]
    except ConfigError:
        labels = []
    return [word for word in [*choices.GROUPINGS, choices.WORKLOAD, *labels] if word.startswith(incomplete)]


def _complete_names(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[str]:
    """Shell completion of --team and --person from the ledger; nothing when it cannot be read."""
    from billing.config import ConfigError, load_config
    from billing.ledger.database import LedgerError, open_ledger
    from billing.publish.report import known_names

    try:
        config = load_config(_config_path(ctx))
        names = known_names(open_ledger(config.database), param.name)
    except (ConfigError, LedgerError):
        return []
    return [name for name in names if name.startswith(incomplete)]


@main.command()
@click.option("--team", shell_complete=_complete_names, help="The team whose spending to show.")
@click.option(
    "--person", shell_complete=_complete_names, help="A person (uid): their own namespaces, across all their teams."
)
@click.option("--all-teams", is_flag=True, help="Every team.")
@click.option("--from", "first", callback=_date, help="First day, YYYY-MM-DD (default: first day of the month).")
@click.option("--to", "last", callback=_date, help="Last day, YYYY-MM-DD, inclusive (default: yesterday).")
@click.option("--format", "form", type=click.Choice(choices.REPORT_FORMATS), default="table", show_default=True)
@click.option(
    "--by",
    metavar="GROUP",
    shell_complete=_complete_groupings,
    help=f"Sum per {', '.join(choices.GROUPINGS)}; below the namespace per {choices.WORKLOAD} or "
    f"{choices.LABEL_PREFIX}NAME of a cost "
    "label (default for table and html: namespace, or team with --all-teams; csv and json without --by give the "
    "ledger rows).",
)
@click.option("--output", type=click.Path(dir_okay=False, writable=True), help="Write to this file, not stdout.")
@_global_options
@_guarded
def report(
    team: str | None,
    person: str | None,
    all_teams: bool,
    first: date | None,
    last: date | None,
    form: str,
    by: str | None,
    output: str | None,
) -> None:
    """What a team or a person spent, from the ledger.

    Days in the range that were never billed are listed (on stderr for table
    and csv), never counted as zero. Examples:

    \b
        billing report --team robotics
        billing report --team robotics --from 2026-01-01 --to 2026-12-31 --by person
        billing report --person alice --format csv --output alice.csv
        billing report --all-teams --format html --output teams.html
    """
    from billing.ledger.database import open_ledger
    from billing.publish import answers
    from billing.publish.report_formats import FORMATS, held_lines, notices

    subject = _subject(team, person, all_teams)
    config = _config()
    by = asked.breakdown(by, config.cost_labels)
    first, last = asked.report_range(config.zone, first, last)
    if by is None and form in ("table", "html"):
        by = "team" if subject.kind == "all" else "namespace"
    answer = answers.report(open_ledger(config.database), config, subject, first, last, by)
    if form != "json":  # csv's lines are only the rows, which add up to the bill: what was held goes with the notices
        for notice in notices(answer) + (held_lines(answer) if form == "csv" else []):
            click.echo(f"billing: {notice}", err=True)
    _write_output(output, FORMATS[form](answer))


@contextmanager
def _writing(output: str | Path | None) -> Iterator[None]:
    """Around writing an answer to --output, or stdout without it. An unwritable file is a usage error naming it.
    A reader that stopped early (`billing export ... | head -1`) closed the pipe: that is its choice, not a
    failure, so the command ends quietly with status 0; what it could not write goes to /dev/null, so that Python's
    own flush at exit does not fail again."""
    try:
        yield
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(0)
    except OSError as exc:
        raise click.BadParameter(f"cannot write {output}: {exc.strerror or exc}", param_hint="--output") from None


def _write_output(output: str | None, text: str) -> None:
    """To --output, or stdout without it."""
    with _writing(output), click.open_file(output or "-", "w", encoding="utf-8") as stream:
        stream.write(text)


def _month(ctx, param, value: str | None) -> date | None:
    """YYYY-MM, as the first day of that month (billing/publish/asked.py), a usage error naming the value."""
    if value is None:
        return None
    try:
        return asked.month(value)
    except asked.ReportError as exc:
        raise click.BadParameter(str(exc)) from None


@main.command()
@click.option("--month", callback=_month, required=True, help="The month, YYYY-MM.")
@click.option("--team", shell_complete=_complete_names, help="Only this team's page (default: every team).")
@click.option("--format", "form", type=click.Choice(choices.STATEMENT_FORMATS), default="csv", show_default=True,
              help="csv for import, json for programs, html to print (one page per team).")
@click.option("--output", type=click.Path(dir_okay=False, writable=True), help="Write to this file, not stdout.")
@_global_options
@_guarded
def statement(month: date, team: str | None, form: str, output: str | None) -> None:
    """The month's statement per team: list price, discounts, credits, unrequested shares, corrections.

    A closed month's statement is the one stored when it was closed, the same
    byte for byte however its days are re-run. Examples:

    \b
        billing statement --month 2026-11 --format html --output november.html
        billing statement --month 2026-11 --team robotics --format json
    """
    from billing.ledger.database import open_ledger
    from billing.publish import answers
    from billing.publish.report_formats import day_ranges
    from billing.publish.statement_formats import FORMATS as STATEMENT_FORMATS

    config = _config()
    answer = answers.statement(open_ledger(config.database), config, month, team)
    if answer.missing_days and form != "json":
        click.echo(f"billing: never billed, so not on the statement: {', '.join(day_ranges(answer.missing_days))}",
                   err=True)
    _write_output(output, STATEMENT_FORMATS[form](answer))


def _operator(by: str | None) -> str:
    """--by, else the operating-system user (a container may have no name for its uid)."""
    if by:
        return by
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return f"uid {os.getuid()}"


@main.command()
@click.option("--month", callback=_month, required=True, help="The month, YYYY-MM.")
@click.option("--reopen", is_flag=True, help="Open a closed month again (only the latest closed one).")
@click.option("--by", help="Who closes or reopens, for the log (default: the operating-system user).")
@click.option("--allow-missing", is_flag=True, help="Close even though some days of the month were never run.")
@_global_options
@_guarded
def close(month: date, reopen: bool, by: str | None, allow_missing: bool) -> None:
    """Close a month for finance: its statement is kept as it is now.

    A later re-run of one of its days writes the new rows and books the
    difference as corrections in the first open month. Examples:

    \b
        billing close --month 2026-11
        billing close --reopen --month 2026-11 --by alice
    """
    from billing.ledger.database import open_ledger
    from billing.money import money
    from billing.publish import answers

    config = _config()
    ledger = open_ledger(config.database)
    who = _operator(by)
    if reopen:
        answers.reopen(ledger, month, who)
        click.echo(f"reopened {month:%Y-%m} (by {who})")
        return
    closed, journals = answers.close(ledger, config, month, who, allow_missing)
    click.echo(f"closed {month:%Y-%m} (by {who}): {len(closed.teams())} teams, {len(closed.lines)} lines, "
               f"total {money(closed.total, closed.currency)}")
    for written in journals:
        click.echo(f"{'journal for finance' if written.suffix == '.csv' else 'invoice'}: {written}")


@main.group()
@_global_options
def invoice() -> None:
    """What a cloud cluster cost, from its provider's bill, for cost recovery at `billing close`.

    Example:

        billing invoice import --cluster ibis --month 2026-11 november-focus.csv
    """


@invoice.command("import")
@click.option("--cluster", required=True, help="The cluster (its recover.invoice_match selects its rows).")
@click.option("--month", callback=_month, required=True, help="The month the bill is for, YYYY-MM.")
@click.option("--replace", is_flag=True, help="Replace the invoice imported for that month before (all its files).")
@click.option("--add", is_flag=True, help="Add this file to the month's invoice: a bill that comes in several files.")
@click.option("--by", help="Who imports, for the record (default: the operating-system user).")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@_global_options
@_guarded
def import_invoice(cluster: str, month: date, replace: bool, add: bool, by: str | None, file: Path) -> None:
    """Sum the cluster's rows of the provider's FOCUS export (BilledCost) and keep it as the month's cost.

    The file is read as it streams, never whole; it must be a FOCUS 1.x CSV
    export in the configured currency, its rows billed in the month
    (BillingPeriodStart). Example:

        billing invoice import --cluster ibis --month 2026-11 november-focus.csv
    """
    from billing.jobs.invoices import import_invoice as import_file

    if replace and add:
        raise click.UsageError("--replace and --add exclude each other: replace the month's files, or add one to them")
    click.echo(import_file(_config(), cluster, month, file, _operator(by), replace, add).line())


@main.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on (0.0.0.0: every interface).")
@click.option("--port", type=click.IntRange(1, 65535), default=8080, show_default=True, help="TCP port to listen on.")
@_global_options
@_guarded
def serve(host: str, port: int) -> None:
    """Serve the ledger read-only over HTTP: everyone sees their own costs.

    Who is asking comes from an authenticating proxy's header or an LDAP
    login (config key web.auth); docs/serve.md has the details. Example:

        billing serve --host 0.0.0.0 --port 8080 --config /etc/billing/billing.yaml
    """
    from billing.web.app import serve as serve_ledger  # Flask and waitress only for this command

    try:
        serve_ledger(_config(), host, port)
    except OSError as exc:
        _fail(1, f"billing serve cannot listen on {host}:{port}: {exc.strerror or exc}")


@main.command()
@click.option("--date", "day", callback=_date, help="Day whose series to check, YYYY-MM-DD (default: yesterday).")
@_global_options
@_guarded
def check(day: date | None) -> None:
    """Validate the config, reach every dependency and check the series a bill needs, one line each.

    Per cluster: the store and its version, then whether the day's samples
    hold every series the bill needs (with the fix for each missing one).
    WARN lines (e.g. GPU resources that gpu_resources does not list) do not
    fail. Exit status 1 if any dependency fails, 2 if the config is invalid
    (also where it names a team or person the directory does not hold). Example:

    \b
        billing check --config /etc/billing/billing.yaml
        billing check --date 2026-11-20
    """
    from billing.jobs.check import check_all, check_config

    config, probe = check_config(_config_path())
    click.echo(redact(probe.line()))
    status = 0
    for probe in check_all(config, day):
        click.echo(redact(probe.line()))
        status = status if probe.ok else max(status, probe.exit_status)
    if status:
        sys.exit(status)


@main.command()
@click.option("--from", "first", callback=_date, required=True, help="First day, YYYY-MM-DD.")
@click.option("--to", "last", callback=_date, required=True, help="Last day, YYYY-MM-DD (inclusive).")
@click.option("--format", type=click.Choice(["focus"]), default="focus", show_default=True, expose_value=False,
              help="focus: the FinOps FOCUS columns.")
@click.option("--focus-version", "version", type=click.Choice(choices.FOCUS_VERSIONS),
              default=choices.FOCUS_VERSIONS[0], show_default=True,
              help="The FOCUS release to write; 1.2 for tools that do not read 1.3 yet, 1.4 for its invoice datasets.")
@click.option("--dataset", type=click.Choice(choices.FOCUS_DATASETS), default=choices.FOCUS_DATASETS[0],
              show_default=True, help="The FOCUS dataset to write; invoice-detail and billing-period need 1.4.")
@click.option("--output", type=click.Path(dir_okay=False, path_type=Path),
              help="File to write: *.parquet is Parquet, anything else CSV (default: CSV on standard output).")
@_global_options
@_guarded
def export(first: date, last: date, version: str, dataset: str, output: Path | None) -> None:
    """Write the ledger of a date range for finance tools (FinOps FOCUS 1.3, or 1.2 or 1.4).

    FOCUS 1.4 adds the statements as invoices (--dataset invoice-detail) and the months as billing periods
    (--dataset billing-period), of every month the range touches. Days in the range that were never run are named
    on standard error. Examples:

    \b
        billing export --from 2026-11-01 --to 2026-11-30 --format focus --output november.csv
        billing export --from 2026-11-01 --to 2026-11-30 --focus-version 1.4 --dataset invoice-detail
    """
    from billing.ledger.database import open_ledger
    from billing.publish import answers
    from billing.publish.focus import ParquetUnavailable, write_focus

    if last < first:
        raise click.BadParameter("--to is before --from")
    if dataset != choices.FOCUS_DATASETS[0] and version != "1.4":
        raise click.UsageError(f"--dataset {dataset} is a FOCUS 1.4 dataset: add --focus-version 1.4")
    config = _config()
    answer = answers.export(open_ledger(config.database), config, first, last, version, dataset)
    if answer.missing_days:
        click.echo(f"billing: {len(answer.missing_days):,} day(s) never run, so not in the export: "
                   f"{', '.join(answers.listed_ranges(answer.missing_days))}", err=True)
    try:
        with _writing(output):
            write_focus(answer.rows, output, sys.stdout)
    except ParquetUnavailable as exc:
        raise click.UsageError(str(exc)) from None
