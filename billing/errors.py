"""The base of every error billing raises to its user, carrying the exit status it ends the command with.

An error's message is one sentence naming the cause (which cluster, which URL,
which config key); `billing.cli` prints it and exits with the error's
`exit_status`, and nothing else maps exceptions to exit statuses, so a new
error class needs no list kept in step anywhere.
"""

from __future__ import annotations

RUN_FAILED = 1  # a data source unreachable, a query failed, a day's data incomplete, ...
USAGE = 2  # the command line or the configuration asks for something that cannot be done


class BillingError(Exception):
    """An error for the user: its message is one sentence naming the cause; the command exits `exit_status`."""

    exit_status = RUN_FAILED


class RunFailed(BillingError):
    """A run failed (exit status 1): the same command may succeed once the cause is mended or gone."""

    exit_status = RUN_FAILED


class UsageError(BillingError):
    """A usage or configuration error (exit status 2): the question or the config must change."""

    exit_status = USAGE
