"""Each night's usage written back to ColdFront's allocations (docs/spec.md "Accounts from ColdFront"), as ColdFront's
own Slurm and XDMoD plugins write theirs: the usage of one allocation attribute (`coldfront.usage_attribute`, a type
with usage, e.g. "Cloud Usage (EUR)"), beside the amount allocated that the attribute's value holds.

ColdFront's REST API is read-only, and its plugins write usage from inside ColdFront (a management command that
calls `Allocation.set_usage`). Billing does the same through ColdFront's own command line where its database is
(`coldfront.usage_command`, e.g. `kubectl exec -i deploy/coldfront -- coldfront`): `shell -c` with the script below
and the usage as JSON on standard input, so nothing but ColdFront's own models writes its database, every write is
in its history, and no page or form of its web interface is scraped. An allocation without the attribute is not
given one (its value is the amount allocated, which only the center knows): it is named instead.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from datetime import date

from sqlalchemy import Engine

from billing.config import ColdFrontConfig
from billing.directory.coldfront import ColdFrontError, MappedAllocation
from billing.ledger.read import read_rows
from billing.money import cents, total

# run by ColdFront's `shell -c`: reads {"attribute": name, "usage": {allocation id: value}} on stdin, answers with
# the ids written and those without the attribute (or whose attribute type has no usage) as one line of JSON
SCRIPT = """\
import json, sys
from coldfront.core.allocation.models import Allocation
asked = json.load(sys.stdin)
answer = {"written": [], "without": []}
for allocation in Allocation.objects.filter(pk__in=[int(key) for key in asked["usage"]]):
    held = allocation.allocationattribute_set.filter(allocation_attribute_type__name=asked["attribute"]).first()
    if held is None or not held.allocation_attribute_type.has_usage:
        answer["without"].append(allocation.pk)
        continue
    allocation.set_usage(asked["attribute"], asked["usage"][str(allocation.pk)])
    answer["written"].append(allocation.pk)
print(json.dumps(answer))
"""


@dataclass(frozen=True)
class UsageWritten:
    """What the write-back did, by allocation id."""

    written: tuple[int, ...]
    without: tuple[int, ...]  # no attribute `usage_attribute`, or its type has no usage: given none
    gone: tuple[int, ...]  # read from ColdFront tonight, not there any more


def month_to_date(ledger: Engine, day: date, currency: str, allocations: tuple[MappedAllocation, ...]
                  ) -> dict[int, float]:
    """Each allocation's usage: the month to date through `day` of the ledger's charges of the namespaces and teams
    it names (a row of both counted once), in the ledger's currency, to the cent."""
    rows = read_rows(ledger, day.replace(day=1), day)
    rows = rows[rows["currency"] == currency]
    usage = {}
    for allocation in allocations:
        namespaces = [subject.name for subject in allocation.subjects if subject.kind == "namespace"]
        teams = [subject.name for subject in allocation.subjects if subject.kind == "team"]
        held = rows["namespace"].isin(namespaces) | rows["team"].isin(teams)
        usage[allocation.id] = float(cents(total(rows.loc[held, "cost"])))
    return usage


def write_usage(config: ColdFrontConfig, usage: dict[int, float]) -> UsageWritten:
    """Set each allocation's usage of `usage_attribute` through ColdFront's command line."""
    command = [*config.usage_command, "shell", "-v", "0", "-c", SCRIPT]
    asked = json.dumps({"attribute": config.usage_attribute, "usage": {str(key): value for key, value in usage.items()}})
    shown = " ".join(config.usage_command)
    try:
        done = subprocess.run(command, input=asked, capture_output=True, text=True, timeout=max(config.timeout, 60))
    except FileNotFoundError:
        raise ColdFrontError(f"coldfront.usage_command {shown!r}: no such program; name the command that runs "
                             f"ColdFront's command line where its database is") from None
    except subprocess.TimeoutExpired:
        raise ColdFrontError(f"coldfront.usage_command {shown!r} did not finish within "
                             f"{max(config.timeout, 60):g} s") from None
    lines = done.stdout.strip().splitlines()
    try:
        answer = json.loads(lines[-1]) if done.returncode == 0 and lines else None
    except ValueError:
        answer = None
    if not (isinstance(answer, dict) and all(isinstance(answer.get(key), list) for key in ("written", "without"))):
        said = (done.stderr.strip() or done.stdout.strip())[-300:]  # another program's answer is not the script's
        raise ColdFrontError(f"coldfront.usage_command {shown!r} failed (status {done.returncode}): {said}")
    written, without = tuple(answer["written"]), tuple(answer["without"])
    return UsageWritten(written, without, tuple(sorted(set(usage) - set(written) - set(without))))
