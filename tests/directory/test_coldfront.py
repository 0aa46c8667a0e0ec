"""ColdFront's REST API as billing reads it, and each way it can fail, with its answers mocked (the real ColdFront is
tests/integration/test_coldfront.py)."""

from __future__ import annotations

import pytest
import requests
import responses

from billing.config import ColdFrontConfig
from billing.directory.coldfront import ColdFrontError, read_allocations

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
    ({"status": 502}, f"ColdFront at {URL}/api/projects/ answered 502 Bad Gateway"),
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
