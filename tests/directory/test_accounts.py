"""Accounts the directory and ColdFront name, as assignments beside the config's (the real slapd's reading is
tests/integration/test_directory_accounts.py)."""

from datetime import date
from decimal import Decimal

from billing.accounts import Subject, uneven_days
from billing.config import AccountsConfig
from billing.directory.accounts import accounts_of, equal_split, named_assignments
from billing.directory.people import Directory, NamedAccounts

NAMES = {"G-1": "NSF", "G-2": "NIH", "G-3": "DOE", "RC": "Research computing"}
SECTION = AccountsConfig.model_validate({
    "names": NAMES, "default_account": "RC", "revenue_account": "RC", "revenue_object_code": "4500",
    "default_object_code": "6400", "assignments": [{"namespace": "ns-a", "account": "G-3", "from": "2026-11-10"}]})


def test_an_equal_split_adds_up_to_exactly_100_at_the_config_s_four_places():
    assert equal_split(1) == [Decimal(100)]
    assert equal_split(3) == [Decimal("33.3334"), Decimal("33.3333"), Decimal("33.3333")]
    assert sum(equal_split(7)) == 100 and equal_split(7)[1] == Decimal("14.2857")


def test_coldfront_takes_a_subject_before_the_directory_and_the_config_before_both():
    named = (NamedAccounts("team", "robotics", ("G-1",), "directory", "directory entry cn=robotics"),
             NamedAccounts("team", "robotics", ("G-2",), "coldfront", "ColdFront allocation 1"),
             NamedAccounts("team", "robotics", ("G-3",), "coldfront", "ColdFront allocation 2"),
             NamedAccounts("namespace", "ns-a", ("G-1",), "coldfront", "ColdFront allocation 3"),
             NamedAccounts("person", "alice", ("NOPE",), "coldfront", "ColdFront allocation 4"),
             NamedAccounts("person", "alice", ("G-1",), "directory", "directory entry uid=alice"))
    given = named_assignments(named, NAMES)
    assert [(str(a.subject), a.account.id, a.percent, a.source) for a in given.assignments] == [
        ("team robotics", "G-2", Decimal(50), "ColdFront allocation 1; ColdFront allocation 2"),
        ("team robotics", "G-3", Decimal(50), "ColdFront allocation 1; ColdFront allocation 2"),
        ("namespace ns-a", "G-1", Decimal(100), "ColdFront allocation 3"),
        ("person alice", "G-1", Decimal(100), "directory entry uid=alice")]  # ColdFront's one id is unknown
    assert given.unknown == ("ColdFront allocation 4 names account 'NOPE' for person alice, which accounts.names does "
                             "not hold: name it there, or correct the value",)
    assert not uneven_days(given.assignments)
    accounts = accounts_of(SECTION, Directory.of([], [], named))
    # the config assigns ns-a from the 10th: ColdFront's G-1 is not taken before either (the config's subject)
    assert accounts.valid_on(date(2026, 11, 9), Subject("namespace", "ns-a")) == ()
    assert [a.account.id for a in accounts.valid_on(date(2026, 11, 10), Subject("namespace", "ns-a"))] == ["G-3"]
    assert [s.account.id for s in accounts.shares(date(2026, 11, 9), "robotics", "ns-b", "alice")] == ["G-1"]
    assert accounts_of(SECTION, None) == SECTION.accounts()
