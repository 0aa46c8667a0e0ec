"""The recharge centre's month of docs/billing.md ("A recharge centre's month"): two clusters, one sold in service
units and subsidised, and a new faculty member's monthly credit, with every price worked out by hand."""

from __future__ import annotations

from datetime import date

from billing.config import ClusterConfig, CreditsConfig
from billing.publish.statement import MonthRules
from tests.helpers.ledgers import new_ledger
from tests.helpers.statements import H100, NOV, write_month

LAKES = ClusterConfig.model_validate({
    "name": "lakes", "prometheus": {"url": "http://127.0.0.1:9"},
    "prices": {"service_units": {"price": 0.12, "weights": {"gpu": 5, "cpu": 0.1, "memory": 0},
                                 "gpu_models": {H100: 10}}}})
IBIS = ClusterConfig.model_validate({
    "name": "ibis", "prometheus": {"url": "http://127.0.0.1:9"},
    "prices": {"cpu_core_hour": 0.030, "memory_gib_hour": 0.004, "gpu_hour": 2.70}})
CREDITS = CreditsConfig.model_validate({
    "monthly": [{"team": "vision", "amount": 500.00, "from": "2026-10", "months": 3}],
    "subsidies": [{"cluster": "lakes", "percent": 25, "from": "2026-07"}]})
RULES = MonthRules([LAKES, IBIS], CREDITS)

# docs/billing.md "A recharge centre's month: service units, credits and subsidies": prices by hand
# (H100 10 SU x 0.12 = 1.20, a core 0.1 x 0.12 = 0.012)
#        cluster  namespace        team        owner  resource  gpu_model  quantity  unit_price  cost  list_cost
NOV_10 = [
    ("lakes", "team-robotics", "robotics", None, "gpu", H100, 1000.0, 1.20, 1200.00, 1200.00),
    ("lakes", "team-robotics", "robotics", None, "cpu", "", 12345.6, 0.012, 148.1472, 148.1472),
    ("ibis", "team-vision", "vision", None, "gpu", "", 20.0, 2.70, 54.00, 54.00),
    ("ibis", "team-vision", "vision", None, "cpu", "", 100.0, 0.030, 3.00, 3.00),
    ("lakes", "team-vision", "vision", None, "gpu", H100, 300.0, 1.20, 360.00, 360.00),
    ("lakes", "team-vision", "vision", None, "cpu", "", 2000.0, 0.012, 24.00, 24.00),
    ("lakes", "team-vision", "vision", None, "memory", "", 4000.0, 0.0, 0.00, 0.00),
]


def recharge_month(url: str):
    """A new ledger at `url` holding November 2026 (NOV_10 on the 10th, every other day run empty)."""
    engine = new_ledger(url)
    write_month(engine, NOV, {date(2026, 11, 10): NOV_10})
    return engine
