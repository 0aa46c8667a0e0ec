"""Monthly budgets: the month to date against the budget, and a forecast of the month's end.

A team's budget is `budgets.monthly[team]` from the config, else the value of
the team's `teams.budget_attribute` in the directory. Spend is what the
ledger charges to the team for the month's days (its `cost`): adjustments
that correct a closed month are booked on statements, not counted here.

The forecast is FORECAST_METHOD: the month to date plus the mean daily cost
of the last FORECAST_DAYS days that a run completed (days never run are left
out of the mean, not counted as zero) times the days left in the month.

Crossing a threshold alerts the team's leads and the admins once (billing/notify/budget_alerts.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, timedelta

from sqlalchemy import Engine

from billing.config import BudgetsConfig
from billing.days import days_in_month
from billing.directory.people import Directory
from billing.ledger.read import completed, read_rows

FORECAST_DAYS = 7
FORECAST_METHOD = (
    f"month to date + the mean daily cost of the last {FORECAST_DAYS} billed days × the days left in the month"
)


@dataclass(frozen=True)
class BudgetStatus:
    """One team's month as of a day: what it may spend, has spent, and will have spent at this rate."""

    team: str
    as_of: date
    budget: float | None  # None: the team has no budget
    month_to_date: float
    forecast: float

    @property
    def used(self) -> float | None:
        """Share of the budget spent."""
        return self.month_to_date / self.budget if self.budget else None

    @property
    def forecast_share(self) -> float | None:
        return self.forecast / self.budget if self.budget else None

    @property
    def days_left(self) -> int:
        return days_left(self.as_of)


def days_left(day: date) -> int:
    """Days of the month after `day`."""
    return days_in_month(day) - day.day


def team_budgets(config: BudgetsConfig, directory: Directory | None) -> dict[str, float]:
    """Each team's monthly budget: the config's, else the directory's."""
    budgets = {name: team.budget for name, team in (directory.teams if directory else {}).items() if team.budget}
    return budgets | dict(config.monthly)


def forecast(month_to_date: float, recent: list[float | None], as_of: date) -> float:
    """FORECAST_METHOD; `recent` holds the daily costs of the days up to `as_of`, None for a day never run."""
    billed = [cost for cost in recent[-FORECAST_DAYS:] if cost is not None]
    rate = sum(billed) / len(billed) if billed else 0.0
    return month_to_date + rate * days_left(as_of)


def budget_status(team: str, budget: float | None, as_of: date, daily: dict[date, float], runs: set[date]) -> BudgetStatus:
    """The status from a team's daily costs (`daily`, days without rows may be absent) and the days run."""
    month = as_of.replace(day=1)
    month_to_date = sum(cost for day, cost in daily.items() if month <= day <= as_of)
    recent_days = [as_of - timedelta(days=n) for n in range(FORECAST_DAYS - 1, -1, -1)]
    recent = [daily.get(day, 0.0) if day in runs else None for day in recent_days]
    return BudgetStatus(team, as_of, budget, month_to_date, forecast(month_to_date, recent, as_of))


def read_budget_status(engine: Engine, team: str, as_of: date, budget: float | None) -> BudgetStatus:
    """A team's status as of a day, from the ledger (for `billing report`)."""
    first = min(as_of.replace(day=1), as_of - timedelta(days=FORECAST_DAYS - 1))
    rows = read_rows(engine, first, as_of, team)
    daily: dict[date, float] = {day: float(cost) for day, cost in rows.groupby("day")["cost"].sum().items()}  # type: ignore[misc]  # pandas-stubs: the group keys are the ledger's dates
    return budget_status(team, budget, as_of, daily, completed(engine, first, as_of))
