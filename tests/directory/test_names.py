"""The teams and people the config names, looked up in a directory (billing/directory/names.py); the same against
a real slapd, through `billing run` and `check`: tests/integration/test_ldap.py."""

from datetime import date

import pytest

from billing.config import Config, ConfigError
from billing.directory.names import check_names, unbilled_namespaces
from billing.directory.people import Directory, Person, Team, ledger_name
from tests.helpers.config import MINIMAL_CONFIG

LONG = "robotics-" + "x" * 291  # longer than the ledger stores: the directory holds it cut, with a hash
DIRECTORY = Directory.of([Person("alice", "Alice", ""), Person("Bob", "Bob", "")],
                         [Team("robotics", (), ()), Team("vision", (), ()), Team(ledger_name(LONG), (), ())])


def config(**settings) -> Config:
    return Config.model_validate({**MINIMAL_CONFIG, **settings})


def test_names_as_the_directory_spells_them_and_the_unallocated_team_pass():
    named = config(namespaces={"overrides": {"a": "robotics", "b": LONG, "c": "unallocated"}},
                   budgets={"monthly": {"vision": 10, "unallocated": 5}}, web={"admins": ["Bob"]})
    assert check_names(named, DIRECTORY) == 4  # robotics, the long name, vision, Bob


def test_every_mistake_is_named_with_its_key_in_one_error():
    named = config(budgets={"monthly": {"Vision": 10, "robotic": 5}}, web={"admins": ["bob", "zed"]})
    with pytest.raises(ConfigError) as refused:
        check_names(named, DIRECTORY)
    assert refused.value.exit_status == 2
    assert str(refused.value) == (
        "budgets.monthly.Vision: the directory spells this team 'vision', not 'Vision': write it so, or its costs are "
        "kept apart from the rest of the team's; "
        "budgets.monthly.robotic: the directory has no team 'robotic' (the closest: robotics); "
        "web.admins[0]: the directory spells this person 'Bob', not 'bob': write it so, or its costs are kept apart "
        "from the rest of the person's; "
        "web.admins[1]: the directory has no person 'zed' (none is close)")


def test_a_credit_or_subsidy_of_a_team_the_directory_does_not_hold_as_spelled_is_refused():
    """A monthly credit of `Vision` or a subsidy of `visoin` would be taken off no statement: a silent zero."""
    named = config(credits={"monthly": [{"team": "Vision", "amount": 500, "from": "2026-10", "months": 3}],
                            "subsidies": [{"team": "visoin", "percent": 25, "from": "2026-10"},
                                          {"cluster": "jaguar", "percent": 10, "from": "2026-10"}]})
    with pytest.raises(ConfigError) as refused:
        check_names(named, DIRECTORY)
    assert refused.value.exit_status == 2
    assert str(refused.value) == (
        "credits.monthly[0].team: the directory spells this team 'vision', not 'Vision': write it so, or no "
        "statement would take it off; "
        "credits.subsidies[0].team: the directory has no team 'visoin' (the closest: vision)")


def test_the_teams_and_people_of_account_assignments_are_checked_and_namespaces_are_not():
    section = {"names": {"G-1": "A grant", "RC": "Research computing"}, "default_account": "RC",
               "revenue_account": "RC", "revenue_object_code": "4500", "default_object_code": "6400",
               "assignments": [{"team": "visoin", "account": "G-1", "from": "2026-11-01"},
                               {"person": "bob", "account": "G-1", "from": "2026-11-01"},
                               {"namespace": "scan", "account": "G-1", "from": "2026-11-01"}]}
    with pytest.raises(ConfigError) as refused:
        check_names(config(accounts=section), DIRECTORY)
    assert str(refused.value) == (
        "accounts.assignments[0].team: the directory has no team 'visoin' (the closest: vision); "
        "accounts.assignments[1].person: the directory spells this person 'Bob', not 'bob': write it so, or its "
        "costs are kept apart from the rest of the person's")


def test_a_namespace_an_assignment_names_that_no_cluster_billed_is_named_with_the_closest_billed():
    """`visoin` charges nothing and says nothing; one not begun or ended on the day is not asked about."""
    section = config(accounts={
        "names": {"G-1": "A grant", "RC": "Research computing"}, "default_account": "RC", "revenue_account": "RC",
        "revenue_object_code": "4500", "default_object_code": "6400",
        "assignments": [{"namespace": "vision", "account": "G-1", "from": "2026-11-01"},
                        {"namespace": "visoin", "account": "G-1", "from": "2026-11-01"},
                        {"namespace": "zz-top", "account": "G-1", "from": "2026-11-01", "to": "2026-11-30"},
                        {"namespace": "speech-new", "account": "G-1", "from": "2026-12-01"},
                        {"team": "robotics", "account": "G-1", "from": "2026-11-01"}]}).accounts
    assert section is not None
    billed = {"vision", "nlp", "robotics"}
    assert unbilled_namespaces(section, date(2026, 11, 20), billed) == [
        "accounts.assignments[1].namespace: no cluster has billed a namespace 'visoin' (the closest: vision): "
        "correct it if it is a typo; until a cluster bills it, the assignment charges nothing",
        "accounts.assignments[2].namespace: no cluster has billed a namespace 'zz-top' (none is close): "
        "correct it if it is a typo; until a cluster bills it, the assignment charges nothing"]
    assert unbilled_namespaces(section, date(2026, 12, 1), billed | {"visoin"}) == [
        "accounts.assignments[3].namespace: no cluster has billed a namespace 'speech-new' (none is close): "
        "correct it if it is a typo; until a cluster bills it, the assignment charges nothing"]
