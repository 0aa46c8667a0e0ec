"""Monthly budgets: the month to date against the budget, and a forecast of the month's end.

A team's budget is `budgets.monthly[team]` from the config, else the value of
the team's `teams.budget_attribute` in the directory. Spend is what the
ledger charges to the team for the month's days (its `cost`): corrections
of a closed month are booked on statements, not counted here.

The forecast is FORECAST_METHOD: the month to date plus the mean daily cost
of the last FORECAST_DAYS days that a run completed, times the month's days
still to be billed: those after the day it is made on, and those before it
that no run completed (a night that failed is billed later; it is no day of
zero cost). Days before the ledger's first run are no days of billing at all.
So a report to yesterday, whose last days were never run, forecasts what the
page of the last day run forecast.

Crossing a threshold alerts the team's leads and the admins once (billing/notify/budget_alerts.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, timedelta

from sqlalchemy import Engine

from billing.config import BudgetsConfig
from billing.days import days_in_month
from billing.directory.people import Directory
from billing.ledger.read import completed, first_run, month_closed, month_to_date_costs, team_daily_costs
from billing.money import one_currency
from billing.publish.asked import ReportError

FORECAST_DAYS = 7
FORECAST_METHOD = (
    f"month to date + the mean daily cost of the last {FORECAST_DAYS} billed days × the month's days not billed yet"
)
FORECAST_LOOKBACK = 62  # days looked back for the last FORECAST_DAYS billed ones


@dataclass(frozen=True)
class BudgetStatus:
    """One team's month as of a day: what it may spend, has spent, and will have spent at this rate."""

    team: str
    as_of: date
    budget: float | None  # None: the team has no budget
    month_to_date: float
    forecast: float
    days_left: int  # the month's days not billed yet, which the forecast expects at the recent rate
    # the month is closed: month_to_date is the whole month as its statement has it, cost recovery included, and
    # there is nothing to forecast (forecast is the same figure, days_left 0)
    closed: bool = False

    @property
    def used(self) -> float | None:
        """Share of the budget spent."""
        return self.month_to_date / self.budget if self.budget else None

    @property
    def forecast_share(self) -> float | None:
        return self.forecast / self.budget if self.budget else None



def team_budgets(config: BudgetsConfig, directory: Directory | None) -> dict[str, float]:
    """Each team's monthly budget: the config's, else the directory's."""
    budgets = {name: team.budget for name, team in (directory.teams if directory else {}).items() if team.budget}
    return budgets | dict(config.monthly)


def budget_status(team: str, budget: float | None, as_of: date, daily: dict[date, float], runs: set[date],
                  since: date | None = None) -> BudgetStatus:
    """FORECAST_METHOD, from a team's daily costs (`daily`; days without rows may be absent), the days run up to
    `as_of` (at least the month's and the last FORECAST_DAYS of them) and the ledger's first run (`since`)."""
    month = as_of.replace(day=1)
    billed = {day: daily.get(day, 0.0) for day in runs if day <= as_of}
    month_to_date = sum(cost for day, cost in billed.items() if day >= month)
    last = [billed[day] for day in sorted(billed)[-FORECAST_DAYS:]]
    rate = sum(last) / len(last) if last else 0.0
    first = max(month, since or month)  # days before billing began are none of its days
    month_end = month + timedelta(days=days_in_month(as_of) - 1)
    waiting = max((month_end - first).days + 1, 0) - sum(day >= first for day in billed if day >= month)
    return BudgetStatus(team, as_of, budget, month_to_date, month_to_date + rate * waiting, waiting)


def read_budget_status(engine: Engine, team: str, as_of: date, budget: float | None) -> BudgetStatus:
    """A team's status as of a day, from the ledger: the same for `billing report`, the pages and the emails. In a
    closed month, the month's figure as its statement has it (the ledger's cost with its cost recovery, as the FOCUS
    export has it), whichever day it is asked as of."""
    month = as_of.replace(day=1)
    if month_closed(engine, month):
        closed = {currency: cost for (_, currency), cost in month_to_date_costs(engine, as_of, [team]).items()}
        spent = closed.get(one_currency(closed, "", _in_two(team, month, as_of)), 0.0)
        return BudgetStatus(team, as_of, budget, spent, spent, 0, closed=True)
    first = min(month, as_of - timedelta(days=FORECAST_LOOKBACK))
    costs = team_daily_costs(engine, team, first, as_of)
    daily = costs.get(one_currency(costs, "", _in_two(team, first, as_of)), {})
    return budget_status(team, budget, as_of, daily, completed(engine, first, as_of), first_run(engine))


def _in_two(team: str, first: date, last: date) -> Callable[[str], ReportError]:
    """The refusal of a budget status whose team's costs are in two currencies (`both`, as one_currency names them)."""
    return lambda both: ReportError(
        f"team {team}'s costs from {first} to {last} are in {both}, which add up to no one figure to hold against "
        f"its month's budget; ask for a range ending in a month billed in one currency")
