"""The `allocations` section (docs/configuration.md): each mistake named by its key in one sentence, SU allocations
refused where no cluster weighs SU, and the allocations handed on as typed values."""

from __future__ import annotations

from datetime import date

import pytest

from billing.allocations import SU, Allocation
from billing.config import load_config
from tests.helpers.config import MINIMAL_CONFIG, assert_refused

ACCOUNTS = {"names": {"NIH-R01": "NIH R01 GM-1", "NSF-2231": "NSF CNS-2231", "RC": "Research computing"},
            "assignments": [{"team": "vision", "account": "NIH-R01", "from": "2026-09-01"}],
            "default_account": "RC", "revenue_account": "RC", "revenue_object_code": "4500",
            "default_object_code": "6400"}
WEIGHED = [{**MINIMAL_CONFIG["clusters"][0], "prices": {"service_units": {"price": 0.12, "weights": {"gpu": 10}}}}]


def _money(**changes) -> dict:
    return {"account": "NIH-R01", "from": "2026-11-01", "to": "2027-10-31", "amount": 80.0, **changes}


@pytest.mark.parametrize(
    "changes, key, words",
    [
        ({"allocations": [_money()]}, "(top level)", "allocations are of accounts: configure the accounts section"),
        ({"accounts": ACCOUNTS, "allocations": [_money(amount=None, service_units=10_000)]}, "(top level)",
         "allocations[0] is of service units, and no cluster's prices have service_units: give the clusters' SU "
         "weights (prices.service_units), or give the allocation as an amount of money"),
        ({"accounts": ACCOUNTS, "allocations": [_money(account="NIH-R02")]}, "(top level)",
         "allocations[0].account 'NIH-R02' is not in accounts.names"),
        ({"accounts": ACCOUNTS, "allocations": [_money(), _money(**{"from": "2027-10-31", "to": "2028-10-31"})]},
         "(top level)", "allocations[1] gives account NIH-R01 an allocation from 2027-10-31, while allocations[0] "
         "holds until 2027-10-31: end one before the other starts"),
        ({"accounts": ACCOUNTS, "allocations": [_money(currency="USD")]}, "(top level)",
         "allocations[0].currency is USD, and charges are in EUR: give the amount in EUR"),
        ({"accounts": ACCOUNTS, "allocations": [_money(service_units=100)]}, "allocations[0]",
         "give exactly one of service_units and amount"),
        ({"accounts": ACCOUNTS, "allocations": [_money(to="2026-10-31")]}, "allocations[0]",
         "to (2026-10-31) is before from (2026-11-01)"),
        ({"accounts": ACCOUNTS, "allocations": [_money(overage="forgive")]}, "allocations[0].overage",
         "'charge' or 'show'"),
        ({"accounts": ACCOUNTS, "allocations": [_money(thresholds=[50, 120])]}, "allocations[0].thresholds[1]",
         "less than or equal to 100"),
        ({"accounts": ACCOUNTS, "allocations": [_money(amount=0)]}, "allocations[0].amount", "greater than 0"),
        ({"accounts": ACCOUNTS, "allocations": [_money(account="nih-r01")]}, "(top level)",
         "allocations[0].account 'nih-r01' is not in accounts.names (accounts.names spells it 'NIH-R01'): name it "
         "there, or correct its id"),
        *[({"accounts": ACCOUNTS, "allocations": [_money(amount=amount)]}, "allocations[0].amount", words)
          for amount, words in [("NaN", "greater than 0"), (float("nan"), "expected a finite number, got nan"),
                                (float("inf"), "expected a finite number, got inf"), (-5, "greater than 0"),
                                ("1e400", "less than 1000000000000"), ("", "unable to parse string as a number"),
                                ("80%", "unable to parse string as a number")]],
    ],
)
def test_each_mistake_names_its_key(write_config, changes, key, words):
    assert_refused(write_config(**changes), key, words)


def test_allocations_of_money_and_of_service_units_as_typed_values(write_config):
    config = load_config(write_config(clusters=WEIGHED, accounts=ACCOUNTS, allocations=[
        _money(thresholds=[100, 50]),
        {"account": "NSF-2231", "from": "2026-11-01", "to": "2026-11-30", "service_units": 10_000, "overage": "show"}]))
    assert config.prepaid_allocations() == (
        Allocation("NIH-R01", date(2026, 11, 1), date(2027, 10, 31), 80.0, "EUR", (50.0, 100.0), "charge",
                   "allocations[0]"),
        Allocation("NSF-2231", date(2026, 11, 1), date(2026, 11, 30), 10_000.0, SU, (50.0, 80.0, 100.0), "show",
                   "allocations[1]"))
