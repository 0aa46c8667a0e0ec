"""Accounts from a real ColdFront (its REST API plugin, its own test data and ours), a night's usage written back to
its allocations through its own command line, the month's journal splitting charges as its allocations say, and a
ColdFront that is down (docs/spec.md "Accounts from ColdFront").

One ColdFront serves the module (about 10 s to set up on two idle cores, most of it its migrations); the nights are
billed with collection stubbed (tests/helpers/jobs.py), as the run's other job tests do."""

from __future__ import annotations

import csv
import socket
from datetime import date
from decimal import Decimal
from pathlib import Path

import pandas as pd
import pytest
import requests

import billing.collect.day
from billing import frames
from billing.collect.usage import ClusterUsage
from billing.config import Config
from billing.directory.accounts import accounts_of
from billing.directory.coldfront import ColdFrontError, read_allocations
from billing.jobs.check import CheckWarning, coldfront_allocations
from billing.jobs.run import run_day
from billing.ledger.allocations import allocation_draws_between
from billing.ledger.database import open_ledger
from billing.ledger.read import directory_note, latest_directory, read_rows, stored_directory
from billing.publish.answers import close
from fixtures.servers import free_port
from tests.helpers.config import stub_node_metrics
from tests.helpers.faults import trickling_server
from tests.helpers.jobs import LDIF
from tests.helpers.jobs import USAGE as ALICE

# allocations of load_test_data: 1 and 2 cgray's Slurm accounts, 3 his storage, 4 his metered HPC, 5 and 6 sfoster's
# cloud; ours name what they pay for and its accounts, and 3 expired; 2 names what a careless hand types: robotics in
# capitals, a team and a namespace nobody has, an account in lower case, numbers and an empty value as accounts, and
# "NaN" as its Cloud Usage's amount
SETUP = """
from coldfront.core.allocation.models import (Allocation, AllocationAttribute, AllocationAttributeType,
                                              AllocationStatusChoice, AttributeType)
text, number = AttributeType.objects.get(name="Text"), AttributeType.objects.get(name="Float")
kinds = {name: AllocationAttributeType.objects.create(name=name, attribute_type=text)
         for name in ("Kubernetes namespace", "Kubernetes team", "Account")}
kinds["Cloud Usage (EUR)"] = AllocationAttributeType.objects.create(name="Cloud Usage (EUR)", attribute_type=number,
                                                                    has_usage=True)
for allocation, name, value in [(4, "Kubernetes team", "robotics"), (4, "Account", "NSF-2231"),
                                (4, "Account", "NIH-R01"), (4, "Cloud Usage (EUR)", "500"),
                                (5, "Kubernetes namespace", "alice"), (5, "Account", "NIH-R01"),
                                (5, "Cloud Usage (EUR)", "100"),
                                (6, "Kubernetes namespace", "speech"), (6, "Account", "X-404"),
                                (1, "Kubernetes team", "nlp"), (1, "Cloud Usage (EUR)", "10"),
                                (3, "Kubernetes namespace", "team-robotics"), (3, "Account", "NSF-2231"),
                                (2, "Kubernetes team", "ROBOTICS"), (2, "Kubernetes team", "visoin"),
                                (2, "Kubernetes namespace", "Speech-Lab"), (2, "Account", "nih-r01"),
                                (2, "Account", "NaN"), (2, "Account", "-5"), (2, "Account", "1e400"),
                                (2, "Account", "inf"), (2, "Account", ""), (2, "Cloud Usage (EUR)", "NaN")]:
    AllocationAttribute.objects.create(allocation_id=allocation, allocation_attribute_type=kinds[name], value=value)
Allocation.objects.filter(pk=3).update(status=AllocationStatusChoice.objects.get(name="Expired"))
"""

# a night: alice's 21.00 (10 GPU-h at 2.00, 100 core-h at 0.01 in namespace alice) and 2.00 in team-robotics
# (200 core-h); both robotics'
USAGE = pd.concat([ALICE, pd.DataFrame([("team-robotics", "cpu", "", "", "", 200.0)], columns=frames.USAGE.columns)],
                  ignore_index=True)
NIGHTS = (date(2026, 10, 19), date(2026, 10, 20))
ACCOUNTS = {"names": {"NSF-2231": "NSF CNS-2231", "NIH-R01": "NIH R01 GM-1", "RC": "Research computing"},
            "default_account": "RC", "revenue_account": "RC", "revenue_object_code": "4500",
            "object_codes": {"gpu": "6410", "cpu": "6420"}, "default_object_code": "6400"}


@pytest.fixture(scope="module")
def coldfront(coldfront_server):
    return coldfront_server(SETUP)


@pytest.fixture(autouse=True)
def stubbed_collection(monkeypatch):
    monkeypatch.setattr(billing.collect.day, "collect_cluster",
                        lambda context, *_: ClusterUsage(context.cluster.name, USAGE, 2, 0, 1.0))
    stub_node_metrics(monkeypatch)


def make_config(tmp_path: Path, coldfront, allocations: tuple[dict, ...] = (), **changes) -> Config:
    (tmp_path / "directory.ldif").write_text(LDIF)
    (tmp_path / "token").write_text(coldfront.token + "\n")
    return Config.model_validate({
        "currency": "EUR", "database": f"sqlite:///{tmp_path}/ledger.db", "output_dir": str(tmp_path / "out"),
        "clusters": [{"name": "jaguar", "prometheus": {"replay": str(tmp_path)},
                      "prices": {"cpu_core_hour": 0.01, "memory_gib_hour": 0.0, "gpu_hour": 2.0}}],
        "directory": {"ldif": str(tmp_path / "directory.ldif")}, "accounts": ACCOUNTS,
        "coldfront": {"url": coldfront.url, "token_file": str(tmp_path / "token"), "timeout": "10s",
                      "namespace_attribute": "Kubernetes namespace", "team_attribute": "Kubernetes team",
                      "account_attribute": "Account", "usage_attribute": "Cloud Usage (EUR)",
                      "usage_command": coldfront.command, **changes},
        "allocations": list(allocations)})


def usage_in_coldfront(coldfront) -> dict[int, float]:
    """Each allocation's usage of Cloud Usage (EUR), as ColdFront's API shows it."""
    answer = requests.get(f"{coldfront.url}/api/allocations/?allocation_attributes=true", timeout=10,
                          headers={"Authorization": f"Token {coldfront.token}"}).json()
    return {allocation["id"]: attribute["usage"] for allocation in answer
            for attribute in allocation["allocation_attributes"]
            if attribute["allocation_attribute_type"] == "Cloud Usage (EUR)"}


def test_allocations_are_read_with_their_projects_pis_and_accounts(coldfront, tmp_path):
    config = make_config(tmp_path, coldfront)
    assert config.coldfront is not None and config.accounts is not None
    found = [(a.id, a.project, a.pi, [str(s) for s in a.subjects], a.accounts) for a in read_allocations(config.coldfront)]
    cgray, sfoster = "Angular momentum in QGP holography", "Measuring critical behavior of quantum Hall transitions"
    assert found == [(1, cgray, "cgray", ["team nlp"], ()),
                     (2, cgray, "cgray", ["namespace Speech-Lab", "team ROBOTICS", "team visoin"],
                      ("nih-r01", "NaN", "-5", "1e400", "inf")),  # the empty value is none
                     (4, cgray, "cgray", ["team robotics"], ("NSF-2231", "NIH-R01")),
                     (5, sfoster, "sfoster", ["namespace alice"], ("NIH-R01",)),
                     (6, sfoster, "sfoster", ["namespace speech"], ("X-404",))]  # 3 expired
    with pytest.raises(CheckWarning) as line:
        coldfront_allocations(config, config.accounts)
    allocation = "ColdFront allocation {} (project '{}', PI {})"
    two, six = allocation.format(2, cgray, "cgray"), allocation.format(6, sfoster, "sfoster")
    left_out = ": correct the value, or its charges go as if ColdFront named none"
    # the directory (tests/helpers/jobs.py LDIF) holds team robotics only
    assert str(line.value).split("; ") == [
        f"ColdFront {coldfront.url}: 5 allocations pay for 3 namespaces and teams, charged to 2 accounts",
        f"{allocation.format(1, cgray, 'cgray')} names team nlp, which the directory does not hold{left_out}",
        f"{two} names namespace Speech-Lab, which is no Kubernetes namespace (lower-case letters, digits and '-', at "
        f"most 63){left_out}",
        f"{two} names team visoin, which the directory does not hold{left_out}",
        f"{two} names account 'nih-r01' for team robotics, which accounts.names does not hold (accounts.names spells "
        f"it 'NIH-R01'): name it there, or correct the value",
        *[f"{two} names account {number!r} for team robotics, which accounts.names does not hold: name it there, or "
          f"correct the value" for number in ("NaN", "-5", "1e400", "inf")],
        f"{six} names account 'X-404' for namespace speech, which accounts.names does not hold: name it there, or "
        f"correct the value",
        "allocations 1 name no account (Account), so their namespaces and teams are charged as if ColdFront named none"]


def test_a_wrong_token_is_refused_by_coldfront_and_said_so(coldfront, tmp_path):
    (tmp_path / "wrong").write_text("0123456789abcdef0123456789abcdef01234567\n")
    config = make_config(tmp_path, coldfront, token_file=str(tmp_path / "wrong"))
    assert config.coldfront is not None
    with pytest.raises(ColdFrontError) as refused:
        read_allocations(config.coldfront)
    assert str(refused.value) == (f"ColdFront at {coldfront.url}/api/projects/ refused the token (401): give "
                                  f"coldfront.token_file {tmp_path / 'wrong'} the API token of a staff user")


def test_a_night_writes_usage_back_and_the_close_splits_by_coldfront_s_accounts(coldfront, tmp_path, caplog):
    config = make_config(tmp_path, coldfront)
    for night in NIGHTS:
        run_day(config, night, summaries="none")
    warned = {r.getMessage() for r in caplog.records if r.levelname == "WARNING"}
    assert ("ACCOUNT UNKNOWN: ColdFront allocation 6 (project 'Measuring critical behavior of quantum Hall "
            "transitions', PI sfoster) names account 'X-404' for namespace speech, which accounts.names does not hold: "
            "name it there, or correct the value") in warned
    assert ("ColdFront allocations 6 have no attribute 'Cloud Usage (EUR)' with usage: give each one (its value the "
            "amount allocated) to see its usage") in warned
    assert ("COLDFRONT SUBJECT UNKNOWN: ColdFront allocation 2 (project 'Angular momentum in QGP holography', PI cgray) "
            "names team visoin, which the directory does not hold: correct the value, or its charges go as if "
            "ColdFront named none") in warned  # as billing check's coldfront line names it
    # the month to date of Oct 20: robotics' 2 x 23.00 (allocation 2's ROBOTICS is robotics, its Cloud Usage's "NaN"
    # amount no matter), namespace alice's 2 x 21.00, nlp's nothing; allocation 6 has no Cloud Usage attribute and
    # gets none
    assert usage_in_coldfront(coldfront) == {1: 0.0, 2: 46.0, 4: 46.0, 5: 42.0}

    ledger = open_ledger(config.database)
    accounts = accounts_of(config.accounts, stored_directory(ledger))
    assert [(s.account.id, s.percent) for s in accounts.shares(NIGHTS[0], "robotics", "team-robotics", None)] == [
        ("NIH-R01", Decimal(50)), ("NSF-2231", Decimal(50))]
    # namespace alice: NIH-R01, GPU 2 x 20.00 and CPU 2 x 1.00; team-robotics' CPU 2 x 2.00 half each
    _, written = close(ledger, config, date(2026, 10, 1), "finance", allow_missing=True)
    with written[0].open() as journal:
        assert [(line["account"], line["object_code"], line["debit"], line["credit"]) for line in csv.DictReader(
            journal)] == [("NIH-R01", "6410", "40.00", ""), ("NIH-R01", "6420", "4.00", ""),
                          ("NSF-2231", "6420", "2.00", ""), ("RC", "4500", "", "46.00")]


@pytest.fixture
def silent():
    """A port that takes connections and never answers: a ColdFront that hangs."""
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        yield listening.getsockname()[1]


@pytest.fixture
def trickling():
    """A ColdFront that sends its answer a byte every 0.2 s: never silent for a read's timeout, never done in time."""
    with trickling_server(b"[]", every=0.2) as url:
        yield url


# NIH-R01 is named by ColdFront alone: by allocation 5 for namespace alice, by allocation 4 for team robotics
NIH_PREPAID = {"account": "NIH-R01", "from": "2026-10-01", "to": "2026-10-31", "amount": 1000}


@pytest.mark.parametrize("how", ["closed", "silent", "trickling"])
def test_a_coldfront_that_is_down_bills_the_night_and_keeps_the_accounts_as_they_were(coldfront, tmp_path, caplog,
                                                                                      silent, trickling, how):
    run_day(make_config(tmp_path, coldfront, (NIH_PREPAID,), usage_attribute=""), NIGHTS[0],
            summaries="none")  # the night before
    down = {"closed": f"http://127.0.0.1:{free_port()}", "silent": f"http://127.0.0.1:{silent}",
            "trickling": trickling}[how]
    config = make_config(tmp_path, coldfront, (NIH_PREPAID,), url=down, timeout="1s")
    ledger = open_ledger(config.database)
    stored = latest_directory(ledger)

    summary = run_day(config, NIGHTS[1], summaries="none")

    assert summary.directory_warning == ""  # the directory was read
    note = directory_note(ledger, NIGHTS[1])  # on the day's pages and in its emails
    cause = "is unreachable (ConnectionError" if how == "closed" else "did not answer within 1 s (coldfront.timeout)"
    assert note.startswith(f"ColdFront at {down}/api/projects/ {cause}") and note.endswith(
        "; the accounts of ColdFront and the directory are those the last run stored")
    assert read_rows(ledger, NIGHTS[1], NIGHTS[1])["cost"].sum() == pytest.approx(23.0)  # billed all the same
    assert latest_directory(ledger) == stored  # the accounts as the last night stored them
    assert any(note in r.getMessage() for r in caplog.records if r.levelname == "WARNING")
    # each night draws NIH-R01's part of it as the accounts last stored say: namespace alice's 21.00 whole, and
    # half of team-robotics' 2.00 (robotics split equally between NSF-2231 and NIH-R01)
    drawn = allocation_draws_between(ledger, *NIGHTS).groupby("day")["drawn_cost"].sum()
    assert drawn.to_dict() == {NIGHTS[0]: pytest.approx(22.0), NIGHTS[1]: pytest.approx(22.0)}
