"""The accounts section of the config file (billing/config/accounts.py): what it gives, and each mistake named
with its key."""

from __future__ import annotations

from datetime import date
from decimal import Decimal

import pytest

from billing.accounts import Account, Share
from billing.config import ConfigError, load_config

NAMES = {"NSF-2231": "NSF CNS-2231", "NIH-R01": "NIH R01 GM-1", "DEPT-PHYS": "Physics",
         "RC-UNFUNDED": "Research computing, unfunded", "RC-REVENUE": "Research computing revenue"}


def accounts(*assignments: dict, **keys) -> dict:
    return {"names": NAMES, "assignments": list(assignments), "default_account": "RC-UNFUNDED",
            "revenue_account": "RC-REVENUE", "revenue_object_code": "4500", "default_object_code": "6400",
            "object_codes": {"gpu": "6410", "cpu": "6420"}, **keys}


WORKED = (
    {"team": "vision", "account": "NSF-2231", "percent": 60, "from": "2026-09-01", "to": "2026-11-15"},
    {"team": "vision", "account": "NIH-R01", "percent": 40, "from": "2026-09-01"},
    {"team": "vision", "account": "DEPT-PHYS", "percent": 60, "from": "2026-11-16"},
)


def refusal(write_config, section: dict) -> str:
    with pytest.raises(ConfigError) as refused:
        load_config(write_config(accounts=section))
    assert refused.value.exit_status == 2
    return str(refused.value).split(": ", 1)[1]


def test_the_worked_month_loads_as_typed_assignments(write_config):
    section = load_config(write_config(accounts=accounts(*WORKED))).accounts
    assert section is not None and section.expiry_notice_days == 30
    typed = section.accounts()
    assert typed.default == Account("RC-UNFUNDED", "Research computing, unfunded")
    assert typed.shares(date(2026, 11, 16), "vision", "scan", None) == (
        Share(Account("DEPT-PHYS", "Physics"), Decimal(60)), Share(Account("NIH-R01", "NIH R01 GM-1"), Decimal(40)))
    assert typed.assignments[0].source == "accounts.assignments[0]"
    assert [section.object_code(r) for r in ("gpu", "credit-gpu", "unrequested-cpu", "memory", "")] == [
        "6410", "6410", "6420", "6400", "6400"]
    energy = section.model_copy(update={"object_codes": {"energy": "6450"}})  # a share of the unattributed is energy
    assert [energy.object_code(r) for r in ("energy", "unattributed-energy", "gpu")] == ["6450", "6450", "6400"]


def test_no_accounts_section_is_none(write_config):
    assert load_config(write_config()).accounts is None


def test_thirds_to_the_hundredth_add_to_100(write_config):
    thirds = [{"team": "vision", "account": account, "percent": percent, "from": "2026-11-01"}
              for account, percent in (("NSF-2231", 33.33), ("NIH-R01", 33.33), ("DEPT-PHYS", 33.34))]
    assert load_config(write_config(accounts=accounts(*thirds))).accounts is not None


@pytest.mark.parametrize(("assignments", "message"), [
    ((WORKED[0], WORKED[1], {**WORKED[2], "from": "2026-11-17"}),
     "accounts: team vision's accounts add up to 40 % on 2026-11-16 (NIH-R01 40 %), not 100 %: give the percentages "
     "of every day they hold 100 in all"),
    ((*WORKED, {"team": "vision", "account": "NSF-2231", "percent": 60, "from": "2026-11-10", "to": "2026-11-20"}),
     "accounts: accounts.assignments[3] assigns team vision to account NSF-2231 from 2026-11-10, while "
     "accounts.assignments[0] does until 2026-11-15: give each day to one of them"),
    (({**WORKED[0], "to": "2026-08-31"},),
     "accounts.assignments[0]: to (2026-08-31) is before from (2026-09-01): the period runs from its first day to its "
     "last, both charged"),
    (({"team": "vision", "person": "alice", "account": "NSF-2231", "from": "2026-11-01"},),
     "accounts.assignments[0]: set exactly one of team, namespace and person: what is charged to the account"),
    (({"team": "vision", "account": "NSF-2232", "from": "2026-11-01"},),
     "accounts: accounts.assignments[0].account 'NSF-2232' is not in accounts.names: name it there, or correct its "
     "id"),
    (({"team": "vision", "account": "NSF-2231", "percent": 0, "from": "2026-11-01"},),
     "accounts.assignments[0].percent: Input should be greater than 0"),
    (({"team": "vision", "account": "NSF-2231", "percent": True, "from": "2026-11-01"},),
     "accounts.assignments[0].percent: expected a number, got true"),
    (({"team": "vision", "account": "NSF-2231", "from": "2026-02-30"},),
     "accounts.assignments[0].from: 2026-02-30 is no day of the calendar (expected a date like 2026-03-01)"),
])
def test_a_mistaken_assignment_is_named_with_its_key(write_config, assignments, message):
    assert refusal(write_config, accounts(*assignments)) == message


def vision(**changes) -> dict:
    return {"team": "vision", "account": "NSF-2231", "from": "2026-11-01", **changes}


@pytest.mark.parametrize(("percent", "said"), [
    ("NaN", "Input should be a finite number"), (float("nan"), "expected a finite number, got nan"),
    (float("inf"), "expected a finite number, got inf"), ("inf", "Input should be a finite number"),
    (-5, "Input should be greater than 0"), ("1e400", "Input should be less than or equal to 100"),
    ("", "Input should be a valid decimal"), ("60%", "Input should be a valid decimal"),
    (99.999999, "Decimal input should have no more than 4 decimal places"),
])
def test_a_percentage_that_is_no_share_is_refused(write_config, percent, said):
    assert refusal(write_config, accounts(vision(percent=percent))) == f"accounts.assignments[0].percent: {said}"


def test_thirds_to_four_places_that_miss_100_are_refused_and_not_rounded_up(write_config):
    thirds = [vision(account=account, percent="33.3333") for account in ("NSF-2231", "NIH-R01", "DEPT-PHYS")]
    assert refusal(write_config, accounts(*thirds)) == (
        "accounts: team vision's accounts add up to 99.9999 % on 2026-11-01 (DEPT-PHYS 33.3333 %, NIH-R01 33.3333 %, "
        "NSF-2231 33.3333 %), not 100 %: give the percentages of every day they hold 100 in all")


@pytest.mark.parametrize(("section", "message"), [
    (accounts(vision(namespace="Robotics-Sim", team="")),
     "accounts.assignments[0].namespace: 'Robotics-Sim' is no Kubernetes namespace (lower-case letters, "
     "digits and '-', at most 63): write it as the cluster spells it"),
    (accounts(vision(account="nsf-2231")),
     "accounts: accounts.assignments[0].account 'nsf-2231' is not in accounts.names (accounts.names spells it "
     "'NSF-2231'): name it there, or correct its id"),
    (accounts(names={**NAMES, "nsf-2231": "NSF CNS-2231 again"}),
     "accounts: accounts.names holds 'NSF-2231' and 'nsf-2231', which differ only in case: keep one id per account"),
])
def test_a_name_spelled_as_no_namespace_or_account_spells_it_is_refused(write_config, section, message):
    assert refusal(write_config, section) == message


def test_an_id_yaml_reads_as_a_number_is_refused_with_the_quotes_that_keep_it(write_config, tmp_path):
    path = write_config(accounts=accounts(vision(account="012345")))
    # as a person writes it, unquoted: YAML 1.1 reads 012345 as the octal 5349
    path.write_text(path.read_text().replace("'012345'", "012345"))
    with pytest.raises(ConfigError) as refused:
        load_config(path)
    assert str(refused.value).split(": ", 1)[1] == (
        "accounts.assignments[0].account: YAML read this as the number 5349: quote it (e.g. '012345') so that the id is "
        "kept as written")
    assert refusal(write_config, accounts(revenue_object_code=4500)) == (
        "accounts.revenue_object_code: YAML read this as the number 4500: quote it (e.g. '012345') so that the id is kept "
        "as written")


def test_the_default_and_revenue_accounts_must_be_named(write_config):
    assert refusal(write_config, accounts(default_account="RC-NONE")) == (
        "accounts: default_account 'RC-NONE' is not in accounts.names: name it there")
    assert refusal(write_config, accounts(object_codes={"gpus": "6410"})) == (
        "accounts.object_codes: 'gpus' is no billed resource (expected one of gpu, cpu, memory, storage, energy)")
