"""ColdFront's REST API as billing reads it, and each way it can fail, with its answers mocked (the real ColdFront is
tests/integration/test_coldfront.py)."""

from __future__ import annotations

import time

import pytest
import requests
import responses

from billing.accounts import Subject
from billing.config import ColdFrontConfig
from billing.directory.coldfront import (
    ColdFrontError,
    MappedAllocation,
    as_the_directory_spells,
    read_allocations,
    with_accounts_as_stored,
)
from billing.directory.people import Directory, NamedAccounts, Person, Team
from tests.helpers.faults import trickling_server

URL = "https://coldfront.test"
SECTION = ColdFrontConfig.model_validate({"url": URL, "token_env": "COLDFRONT_TOKEN", "timeout": "2s",
                                          "namespace_attribute": "Kubernetes namespace", "account_attribute": "Account"})
SECTION._place = "coldfront"  # as the config file places it


@pytest.fixture(autouse=True)
def token(monkeypatch):
    monkeypatch.setenv("COLDFRONT_TOKEN", "t0ken")


def allocation(number: int, status: str = "Active", **attributes: str) -> dict:
    return {"id": number, "project": "Holography", "resource": "Cloud", "status": status, "allocation_users": None,
            "allocation_attributes": [{"allocation_attribute_type": name.replace("_", " "), "value": value,
                                       "usage": None} for name, value in attributes.items()]}


@responses.activate
def test_pages_are_followed_and_only_allocations_naming_a_namespace_in_a_counted_status_are_kept():
    responses.get(f"{URL}/api/projects/", json=[{"id": 1, "title": "Holography", "pi": "cgray"}])
    responses.get(f"{URL}/api/allocations/?allocation_attributes=true", json={
        "count": 3, "next": f"{URL}/api/allocations/?allocation_attributes=true&page=2",
        "results": [allocation(7, Kubernetes_namespace="ns-a", Account="G-1")]})
    responses.get(f"{URL}/api/allocations/?allocation_attributes=true&page=2", json={"count": 3, "next": None, "results": [
        allocation(8, "Expired", Kubernetes_namespace="ns-b", Account="G-1"), allocation(9, slurm_account_name="x")]})
    [found] = read_allocations(SECTION)
    assert (found.id, found.pi, [str(s) for s in found.subjects], found.accounts) == (7, "cgray", ["namespace ns-a"],
                                                                                      ("G-1",))
    assert responses.calls[0].request.headers["Authorization"] == "Token t0ken"


@pytest.mark.parametrize(("answer", "said"), [
    (requests.ReadTimeout("slow"), f"ColdFront at {URL}/api/projects/ did not answer within 2 s (coldfront.timeout)"),
    ({"status": 401}, f"ColdFront at {URL}/api/projects/ refused the token (401): give coldfront.token_env "
                      "COLDFRONT_TOKEN the API token of a staff user"),
    ({"status": 502}, f"ColdFront at {URL}/api/projects/ answered 502 Bad Gateway: its own log says why"),
    ({"status": 500, "body": "<h1>Server Error (500)</h1>"},
     f"ColdFront at {URL}/api/projects/ answered 500 Internal Server Error: its own log says why"),
    ({"status": 302, "headers": {"Location": "https://sso.test/login?next=/api/projects/"}},
     f"ColdFront at {URL}/api/projects/ answered 302 sending billing to https://sso.test/login?next=/api/projects/ (a "
     "sign-in page, or another address): give coldfront.url the address where the REST API answers the token "
     "itself"),
    ({"body": "<html>login</html>"}, f"ColdFront at {URL}/api/projects/ answered with no JSON: is its REST API plugin "
                                     "on (PLUGIN_API=True)?"),
    ({"json": {"detail": "x"}}, f"ColdFront at {URL}/api/projects/ answered with no list of objects: is it "
                                "ColdFront's REST API (PLUGIN_API=True)?"),
])
@responses.activate
def test_a_coldfront_that_does_not_answer_as_its_api_is_one_sentence(answer, said):
    if isinstance(answer, Exception):
        responses.get(f"{URL}/api/projects/", body=answer)
    else:
        responses.get(f"{URL}/api/projects/", **answer)
    with pytest.raises(ColdFrontError) as failed:
        read_allocations(SECTION)
    assert str(failed.value) == said and failed.value.exit_status == 1


def test_a_coldfront_that_trickles_its_answer_is_down_once_its_timeout_is_spent():
    # a byte every 0.2 s is never silent for the 1 s a read may wait: read by read, its ~90 bytes would take 18 s
    # for the projects and as long again for the allocations
    with trickling_server(b"[]", every=0.2) as url:
        started = time.monotonic()
        with pytest.raises(ColdFrontError) as failed:
            read_allocations(SECTION.model_copy(update={"url": url, "timeout": 1.0}))
        took = time.monotonic() - started
    assert str(failed.value) == f"ColdFront at {url}/api/projects/ did not answer within 1 s (coldfront.timeout)"
    assert 1.0 <= took < 1.5


@pytest.mark.parametrize(("allocations", "what"), [
    ([{"project": "Holography", "status": "Active", "allocation_attributes": [
        {"allocation_attribute_type": "Kubernetes namespace", "value": "ns-a"}]}], "KeyError: 'id'"),
    ([allocation(7, Kubernetes_namespace="ns-a") | {"id": "seven"}],
     "ValueError: invalid literal for int() with base 10: 'seven'"),
    ([{"id": 7, "status": "Active", "allocation_attributes": [{"value": "ns-a"}]}],
     "KeyError: 'allocation_attribute_type'"),
    (["an allocation"], "AttributeError: 'str' object has no attribute 'get'"),
])
@responses.activate
def test_an_allocation_not_as_coldfront_gives_them_is_one_sentence_not_a_guess(allocations, what):
    responses.get(f"{URL}/api/projects/", json=[{"id": 1, "title": "Holography", "pi": "cgray"}])
    responses.get(f"{URL}/api/allocations/?allocation_attributes=true", json=allocations)
    with pytest.raises(ColdFrontError) as failed:
        read_allocations(SECTION)
    said = str(failed.value)
    assert said.startswith(f"ColdFront at {URL} gave an allocation billing cannot read ({what}) in ")
    assert said.endswith(": is it ColdFront's REST API?") and "\n" not in said


@responses.activate
def test_a_project_without_its_title_is_one_sentence():
    responses.get(f"{URL}/api/projects/", json=[{"id": 1, "pi": "cgray"}])
    with pytest.raises(ColdFrontError) as failed:
        read_allocations(SECTION)
    assert str(failed.value) == (f"ColdFront at {URL} gave a project billing cannot read (KeyError: 'title'): is it "
                                 f"ColdFront's REST API?")


def test_teams_are_as_the_directory_spells_them_and_names_nothing_is_billed_to_are_left_out_with_a_sentence():
    directory = Directory.of([], [Team("robotics", (), ())])
    named = (MappedAllocation(2, "Holography", "cgray", (Subject("team", "ROBOTICS"), Subject("team", "visoin"),
                                                          Subject("namespace", "Speech-Lab"),
                                                          Subject("namespace", "ns-a")), ("G-1",)),
             MappedAllocation(3, "Holography", "cgray", (Subject("team", "vision"),), ("G-1",)))
    kept, unknown = as_the_directory_spells(named, directory)
    assert [(a.id, [str(s) for s in a.subjects]) for a in kept] == [(2, ["team robotics", "namespace ns-a"]),
                                                                    (3, [])]  # its usage written back: 0.00
    source = "ColdFront allocation {} (project 'Holography', PI cgray)"
    assert unknown == tuple(f"{source.format(number)} names {what}: correct the value, or its charges go as if "
                            f"ColdFront named none" for number, what in [
                                (2, "team visoin, which the directory does not hold"),
                                (2, "namespace Speech-Lab, which is no Kubernetes namespace (lower-case letters, "
                                    "digits and '-', at most 63)"),
                                (3, "team vision, which the directory does not hold")])


def test_a_night_without_coldfront_takes_the_accounts_last_stored_and_its_own_people_and_teams():
    tonight = Directory.of([Person("alice", "Alice", "alice@example.org")], [Team("robotics", ("alice",), ())],
                           [NamedAccounts("team", "robotics", ("G-2",), "directory", "directory entry of robotics")])
    stored = Directory.of([], [Team("robotics", (), ())],
                          [NamedAccounts("namespace", "alice", ("G-1",), "coldfront", "ColdFront allocation 5"),
                           NamedAccounts("team", "robotics", ("G-3",), "directory", "directory entry of robotics")])
    night = with_accounts_as_stored(tonight, stored)
    assert (night.people, night.teams, night.named_accounts) == (tonight.people, tonight.teams, stored.named_accounts)
    assert with_accounts_as_stored(tonight, None) is tonight  # no run stored one yet: the directory's own
