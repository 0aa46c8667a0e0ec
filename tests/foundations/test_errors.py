"""billing/errors.py: every error raised to the user is a BillingError, and the command exits with its exit_status."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from datetime import date

import pytest
from click.testing import CliRunner

import billing
import billing.cli
import billing.jobs.backfill
from billing.cli import main
from billing.config import ConfigError
from billing.errors import BillingError, RunFailed, UsageError
from billing.ledger.database import LedgerError

# Exceptions that never reach the user as an error, each with the reason
INTERNAL = {
    "billing.cli.Terminated": "SIGTERM as a KeyboardInterrupt, so libraries stop as for Ctrl-C; cli says why",
    "billing.days.NotADay": "a day or month as typed that is none: publish/asked.py raises it again as a ReportError "
                            "naming the argument (serve's static page addresses: a 404)",
    "billing.collect.prometheus._PartialAnswer": "retried, then raised again as a PrometheusError naming the server",
    "billing.collect.prometheus._Rejected": "an answer refused inside the client, raised again as a PrometheusError",
    "billing.collect.prometheus._TooLarge": "an answer over max_answer_mib, raised again as a PrometheusError",
    "billing.collect.prometheus._StillArriving": "an answer still arriving at the timeout, raised again as a PrometheusError",
    "billing.jobs.check.CheckWarning": "a WARN line of billing check, which does not fail",
    "billing.web.access.Forbidden": "an HTTP 403 page of billing serve",
    "billing.web.security.Refused": "an HTTP error page of billing serve with its own status",
}

# The exit status of each error, as cli gave it before the errors had a common base
EXIT_STATUSES = {
    "billing.config.section.ConfigError": 2,
    "billing.publish.asked.ReportError": 2,
    "billing.publish.report.UnknownSubject": 2,
    "billing.publish.statement.StatementError": 2,
    "billing.publish.focus.ParquetUnavailable": 2,
    "billing.publish.answers.NeverRun": 1,
    "billing.collect.prometheus.PrometheusError": 1,
    "billing.collect.audit.AuditError": 1,
    "billing.directory.people.DirectoryError": 1,
    "billing.directory.people.AmbiguousDirectoryError": 1,
    "billing.directory.coldfront.ColdFrontError": 1,
    "billing.directory.ldap.WrongPassword": 1,
    "billing.ledger.database.LedgerError": 1,
    "billing.ledger.database.NoLedgerYet": 1,
    "billing.publish.dayview.RenderError": 1,
    "billing.notify.mail.MailError": 1,
    "billing.collect.day.IncompleteDayError": 1,
    "billing.jobs.check.CheckFailure": 1,
}


def billing_exceptions() -> dict[str, type[BaseException]]:
    """Every exception class defined in billing's modules (not the migrations, not `python -m billing`)."""
    found = {}
    for module in pkgutil.walk_packages(billing.__path__, "billing."):
        if module.name == "billing.__main__" or module.name.startswith("billing.ledger.migrations"):
            continue
        for _, value in inspect.getmembers(importlib.import_module(module.name), inspect.isclass):
            if issubclass(value, BaseException) and value.__module__ == module.name:
                found[f"{value.__module__}.{value.__qualname__}"] = value
    return found


def test_every_error_for_the_user_is_a_billing_error():
    found = billing_exceptions()
    assert set(INTERNAL) <= set(found), "INTERNAL names classes that are gone"
    stray = sorted(name for name, cls in found.items() if name not in INTERNAL and not issubclass(cls, BillingError))
    assert not stray, f"raise these as BillingError (billing/errors.py), or list them in INTERNAL with why: {stray}"
    assert not [name for name in INTERNAL if issubclass(found[name], BillingError)]


def test_each_error_keeps_its_exit_status():
    found = billing_exceptions()
    statuses = {name: cls.exit_status for name, cls in found.items() if issubclass(cls, BillingError)}
    assert set(statuses.values()) <= {1, 2}
    assert {name: statuses[name] for name in EXIT_STATUSES if name in statuses} == EXIT_STATUSES


class Misconfigured(BillingError):
    """Neither a RunFailed nor a UsageError: cli still goes by exit_status alone."""

    exit_status = 2


@pytest.mark.parametrize("error, status", [
    (LedgerError("database sqlite:///ledger.db cannot be reached"), 1),
    (ConfigError("config key clusters[0].prometheus.url: not a URL"), 2),
    (Misconfigured("config key email.smtp_host: no such host"), 2),
], ids=["run failed", "configuration", "any BillingError"])
def test_the_command_exits_with_the_errors_status_and_its_sentence(monkeypatch, error, status):
    def failing():
        raise error

    monkeypatch.setattr(billing.cli, "_config", failing)
    result = CliRunner().invoke(main, ["render", "--date", "2026-11-20"])
    assert result.exit_code == status
    assert result.output == f"billing: {error}\n"


@pytest.mark.parametrize("error", [RunFailed, UsageError])
def test_a_backfill_goes_on_after_a_failed_run_and_stops_at_a_usage_error(monkeypatch, error):
    def run_day(config, day, require_coverage, turn, summaries="send"):
        raise error(f"{day} cannot be billed")

    monkeypatch.setattr(billing.jobs.backfill, "run_day", run_day)
    days = [date(2026, 11, 1), date(2026, 11, 2)]
    if error is UsageError:
        with pytest.raises(UsageError):
            billing.jobs.backfill.backfill(None, days, 0.0, 1)
    else:
        outcomes = billing.jobs.backfill.backfill(None, days, 0.0, 1)
        assert [o.failure for o in outcomes] == [f"{day} cannot be billed" for day in days]
