"""A night's use of each allocation (billing/charge/allocations.py): the account's share of the day's rows per team
and cluster, in SU or in money, against figures worked out by hand."""

from __future__ import annotations

from datetime import date

import pytest

from billing.allocations import SU, Allocation
from billing.charge.allocations import allocation_use
from tests.charge.test_service_units import H100, IBIS, LAKES
from tests.helpers.journals import section
from tests.helpers.report_ledger import frame

DAY = date(2026, 11, 5)
# vision 60/40 between NSF-2231 and NIH-R01; alice's own charges on NIH-R01 alone; nlp on no account
ACCOUNTS = section({"team": "vision", "account": "NSF-2231", "percent": 60, "from": "2026-09-01"},
                   {"team": "vision", "account": "NIH-R01", "percent": 40, "from": "2026-09-01"},
                   {"person": "alice", "account": "NIH-R01", "from": "2026-11-01"}).accounts()
#        cluster  namespace  team     owner    resource gpu_model quantity unit_price cost
ROWS = [("lakes", "scan", "vision", "bob", "gpu", H100, 3.0, 1.2, 3.6),  # 30 SU
        ("lakes", "scan", "vision", "bob", "cpu", "", 100.0, 0.012, 1.2),  # 10 SU
        ("lakes", "home-alice", "vision", "alice", "gpu", H100, 1.0, 1.2, 1.2),  # 10 SU, NIH's alone
        ("ibis", "scan", "vision", "bob", "gpu", "", 2.0, 2.7, 5.4),  # no SU on ibis
        ("lakes", "corpus", "nlp", "carol", "gpu", H100, 5.0, 1.2, 6.0)]  # the default account's


def test_an_allocation_of_su_uses_the_account_s_share_of_the_rows_su_per_team_and_cluster():
    nih = Allocation("NIH-R01", date(2026, 11, 1), date(2027, 10, 31), 10_000, SU)
    nsf = Allocation("NSF-2231", date(2026, 11, 1), date(2026, 11, 30), 500.0, "USD")
    use = allocation_use(frame(ROWS), DAY, ACCOUNTS, (nih, nsf), [LAKES, IBIS])
    got = {(row.account, row.team, row.cluster): (row.used, row.used_cost) for row in use.itertuples(index=False)}
    assert got.keys() == {("NIH-R01", "vision", "lakes"), ("NSF-2231", "vision", "lakes"),
                          ("NSF-2231", "vision", "ibis")}
    # NIH: 40 % of 30 + 10 SU (of 4.80: 1.92), and all of alice's 10 SU (1.20): 26 SU, 3.12; its ibis part has no
    # SU, so uses nothing of an allocation of SU
    assert got["NIH-R01", "vision", "lakes"] == pytest.approx((26.0, 3.12))
    # NSF in money: 60 % of 3.60 + 1.20 on lakes, 60 % of 5.40 on ibis
    assert got["NSF-2231", "vision", "lakes"] == pytest.approx((2.88, 2.88))
    assert got["NSF-2231", "vision", "ibis"] == pytest.approx((3.24, 3.24))
    assert set(use["starts"]) == {date(2026, 11, 1)}


def test_no_use_outside_the_period_without_accounts_or_without_rows():
    later = Allocation("NIH-R01", date(2026, 12, 1), date(2027, 10, 31), 10_000, SU)
    assert allocation_use(frame(ROWS), DAY, ACCOUNTS, (later,), [LAKES, IBIS]).empty
    now = Allocation("NIH-R01", date(2026, 11, 1), date(2027, 10, 31), 10_000, SU)
    assert allocation_use(frame(ROWS), DAY, None, (now,), [LAKES, IBIS]).empty
    assert allocation_use(frame([]), DAY, ACCOUNTS, (now,), [LAKES, IBIS]).empty
