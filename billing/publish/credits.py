"""A month's credits and subsidies as statement lines (docs/spec.md "Service units, credits and subsidies").

The arithmetic, on a month's other lines:
* a subsidy is, per team and cluster, minus the subsidy's percentage of the team's month there (every line but
  corrections, which belong to earlier months), where that is above 0: a subsidy never adds to a charge; and at
  most what is left of the team's month, in cluster name order;
* a fixed monthly credit is then taken off the team's month, at most down to 0 (what it leaves unused is lost,
  not carried over), spread over the team's clusters in name order, each at most down to 0.
So a team's month with its credits is never below 0 unless it was already (a correction refunding more).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import date
from typing import Protocol

from billing.config.credits import CreditsConfig
from billing.money import total
from billing.publish.allocations import ALLOCATION_MEANINGS, ALLOCATION_SUMS, ALLOCATION_WORDS
from billing.resources import MONTHLY_CREDIT, SUBSIDY

# what a statement calls each line taken off a month (an allocation's naming its account after these words)
CREDIT_WORDS = {SUBSIDY: "Subsidy", MONTHLY_CREDIT: "Monthly credit", **ALLOCATION_WORDS}
CREDIT_SUMS = {SUBSIDY: "Subsidies", MONTHLY_CREDIT: "Monthly credits", **ALLOCATION_SUMS}  # and a kind's lines together
# what FOCUS says of each (ChargeDescription, InvoiceDetailDescription), after "<words> on cluster <name>"
CREDIT_MEANINGS = {SUBSIDY: "the share of the team's month not charged to it (credits.subsidies)",
                   MONTHLY_CREDIT: "the team's fixed credit of the month, at most its month (credits.monthly)",
                   **ALLOCATION_MEANINGS}


class Line(Protocol):
    """What the arithmetic reads of a statement line."""

    @property
    def team(self) -> str: ...
    @property
    def cost_center(self) -> str: ...
    @property
    def cluster(self) -> str: ...
    @property
    def corrects(self) -> date | None: ...  # a correction's day of an earlier month
    @property
    def amount(self) -> float: ...


@dataclass(frozen=True)
class Credit:
    """One credit line: what is taken off a team's month on a cluster (amount below 0)."""

    team: str
    cost_center: str
    cluster: str
    kind: str  # SUBSIDY or MONTHLY_CREDIT
    amount: float
    corrects: None = None  # corrects no earlier month


def credits_of(lines: Sequence[Line], month: date, credits: CreditsConfig) -> list[Credit]:
    """The month's subsidies, then its monthly credits, for the teams on `lines`."""
    subsidies = _subsidies(lines, month, credits)
    return subsidies + _monthly_credits([*lines, *subsidies], month, credits)


def _sums(lines: Iterable[Line], corrections: bool = True) -> dict[tuple[str, str, str], float]:
    """Per (team, cost centre, cluster) in order of appearance: the exact sum of its lines (with the corrections of
    earlier months booked in it, or without)."""
    parts: dict[tuple[str, str, str], list[float]] = {}
    for line in lines:
        if corrections or line.corrects is None:
            parts.setdefault((line.team, line.cost_center, line.cluster), []).append(line.amount)
    return {key: total(amounts) for key, amounts in parts.items()}


def _by_team(lines: Sequence[Line], corrections: bool = True) -> dict[str, list[tuple[str, str, float]]]:
    """Per team: (cluster, cost centre, the exact sum of its lines there) in cluster name order."""
    teams: dict[str, list[tuple[str, str, float]]] = {}
    for (team, center, cluster), amount in _sums(lines, corrections).items():
        teams.setdefault(team, []).append((cluster, center, amount))
    return {team: sorted(clusters) for team, clusters in teams.items()}


def _subsidies(lines: Sequence[Line], month: date, credits: CreditsConfig) -> list[Credit]:
    """Each team's subsidy per cluster, at most what is left of the team's month (a cluster's subsidy would take a
    month below 0 where another cluster's month is below 0: a pool's credits, a refund)."""
    found = []
    months = {team: total(amount for _, _, amount in clusters) for team, clusters in _by_team(lines).items()}
    for team, clusters in _by_team(lines, corrections=False).items():
        left = max(0.0, months[team])
        for cluster, center, charged in clusters:
            taken = min(left, charged * credits.percent(month, team, cluster) / 100)
            if taken > 0:
                found.append(Credit(team, center, cluster, SUBSIDY, -taken))
                left -= taken
    return found


def _monthly_credits(lines: Sequence[Line], month: date, credits: CreditsConfig) -> list[Credit]:
    found = []
    for team, clusters in _by_team(lines).items():
        left = min(credits.credit(month, team), max(0.0, total(amount for _, _, amount in clusters)))
        for cluster, center, amount in clusters:
            taken = min(left, max(0.0, amount))
            if taken > 0:
                found.append(Credit(team, center, cluster, MONTHLY_CREDIT, -taken))
                left -= taken
    return found
