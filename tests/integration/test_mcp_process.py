"""`billing mcp` as assistants reach it: real processes, the MCP SDK's own client (`ClientSession`).

Over stdio the client starts `billing mcp --as carol` itself; over HTTP a `billing mcp --http` process
(uvicorn) stands behind serve's sign-in: the trusted proxy's header, and for `web.auth: ldap` HTTP Basic
checked against a real slapd (a header from an address that is no trusted proxy: tests/web/test_mcp.py). The ledger is tests/helpers/report_ledger.py with the directory of
tests/helpers/serve.py (carol leads robotics, dave vision, root is the admin). What each tool answers
for each visitor is tests/web/test_mcp.py; here, that the transports carry it and the sign-in guards it.
"""

from __future__ import annotations

import base64
import http.client
import json
import sys
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import anyio
import httpx2
import pytest
from click.testing import CliRunner
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from billing.cli import main
from fixtures.directory import BASE, directory_ldif
from tests.helpers.serve import REPOSITORY, serve_config, serve_of, start_mcp

ROBOTICS = {"team": "robotics", "by": "person", "first_day": "2026-11-01", "last_day": "2026-11-20"}
REPORT = ["report", "--team", "robotics", "--by", "person", "--from", "2026-11-01", "--to", "2026-11-20"]
PASSWORDS = {"alice": "alice-pw-1", "carol": "carol-pw-3"}
BIND_PASSWORD = "bind-pw"
SESSION_KEY = "k" * 32


def command_json(config: Path, *args: str) -> dict:
    result = CliRunner().invoke(main, [*args, "--format", "json", "--config", str(config)])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


async def _calls(session: ClientSession, calls: list[tuple[str, dict]]) -> tuple[list[str], list]:
    await session.initialize()
    tools = [tool.name for tool in (await session.list_tools()).tools]
    return tools, [await session.call_tool(name, arguments) for name, arguments in calls]


def over_stdio(config: Path, uid: str, calls: list[tuple[str, dict]]) -> tuple[list[str], list]:
    """The tools listed and the calls' results, from `billing mcp --as uid` started by the SDK's stdio client."""
    command = StdioServerParameters(command=sys.executable, cwd=str(REPOSITORY),
                                    args=["-m", "billing", "mcp", "--as", uid, "--config", str(config)])

    async def session() -> tuple[list[str], list]:
        async with stdio_client(command) as (read, write), ClientSession(read, write) as client:
            return await _calls(client, calls)

    return anyio.run(session)


def over_http(port: int, headers: dict[str, str], calls: list[tuple[str, dict]]) -> tuple[list[str], list]:
    """The tools listed and the calls' results over streamable HTTP, each request carrying `headers`."""

    async def session() -> tuple[list[str], list]:
        async with (httpx2.AsyncClient(headers=headers, timeout=30) as http,
                    streamable_http_client(f"http://127.0.0.1:{port}/mcp", http_client=http) as (read, write),
                    ClientSession(read, write) as client):
            return await _calls(client, calls)

    return anyio.run(session)


def refused(port: int, headers: dict[str, str]) -> tuple[int, dict]:
    """Status and JSON body of an MCP request (initialize) sent with `headers` only."""
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}})
    request = urllib.request.Request(f"http://127.0.0.1:{port}/mcp", data=body.encode(), method="POST", headers={
        "Content-Type": "application/json", "Accept": "application/json, text/event-stream", **headers})
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, {}
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


@pytest.fixture(scope="module")
def config(tmp_path_factory) -> Path:
    return serve_config(tmp_path_factory.mktemp("mcp"))


@pytest.fixture(scope="module")
def http_port(tmp_path_factory, config):
    port, process = start_mcp(tmp_path_factory.mktemp("mcp-http"), config)
    yield port
    process.stop()


def test_over_stdio_a_lead_gets_the_reports_figures_and_no_other_team(config):
    tools, [robotics, vision] = over_stdio(config, "carol", [("costs", ROBOTICS), ("costs", {"team": "vision"})])
    assert sorted(tools) == ["budget", "changes", "costs", "figure_source", "statement", "waste"]
    assert json.loads(robotics.content[0].text) == command_json(config, *REPORT)
    assert vision.is_error and vision.content[0].text.startswith("carol is not a lead of team 'vision'")


# visitor (the proxy's X-Forwarded-User) -> whether robotics' costs, vision's, and their own are answered
HEADER_MATRIX = {
    "alice": (False, False, True),  # a person on robotics
    "carol": (True, False, False),  # robotics' lead (no namespace of her own)
    "dave": (False, True, False),  # the second lead, of the other team
    "root": (True, True, True),  # the admin: her own is every team
    "mallory": (False, False, False),  # unknown to the directory and the ledger
}


@pytest.mark.parametrize("visitor", HEADER_MATRIX)
def test_over_http_each_signed_in_visitor_sees_what_serve_shows_them(config, http_port, visitor):
    _, results = over_http(http_port, {"X-Forwarded-User": visitor},
                           [("costs", ROBOTICS), ("costs", {"team": "vision"}), ("costs", {})])
    assert tuple(not result.is_error for result in results) == HEADER_MATRIX[visitor]
    if not results[0].is_error:
        assert json.loads(results[0].content[0].text) == command_json(config, *REPORT)


def test_over_http_no_header_or_one_not_from_a_trusted_proxy_is_refused_before_any_tool(http_port):
    status, body = refused(http_port, {})
    assert (status, body) == (401, {"error": "no user: the request has no X-Forwarded-User header from the "
                                             "authenticating proxy"})
    status, body = refused(http_port, {"X-Forwarded-User": "\x01"})
    assert (status, body) == (401, {"error": "the X-Forwarded-User header holds no usable user id"})


def test_over_http_with_ldap_a_person_signs_in_with_their_password(tmp_path, monkeypatch, slapd_server, test_ca):
    ldif = directory_ldif(["alice", "carol", "billing"], {"robotics": ["alice", "carol"]}, leads={"robotics": ["carol"]})
    for uid, password in {**PASSWORDS, "billing": BIND_PASSWORD}.items():
        ldif = ldif.replace(f"uid: {uid}\n", f"uid: {uid}\nuserPassword: {password}\n")
    directory = slapd_server(ldif, tls=test_ca)
    monkeypatch.setenv("BILLING_SESSION_KEY", SESSION_KEY)
    monkeypatch.setenv("BILLING_BIND_PASSWORD", BIND_PASSWORD)
    config = serve_config(tmp_path, auth="ldap", session_key_env="BILLING_SESSION_KEY", login_attempts=3,
                          login_throttle_file=str(tmp_path / "logins.sqlite"), changes={
        "directory": {"url": directory.ldaps_url, "ca_file": str(test_ca.ca_cert),
                      "bind_dn": f"uid=billing,ou=people,{BASE}", "bind_password_env": "BILLING_BIND_PASSWORD",
                      "people": {"base": f"ou=people,{BASE}"}}})
    port, process = start_mcp(tmp_path, config)
    serve_port, serve = serve_of(config, tmp_path)  # beside it, counting failed logins in the same file
    try:
        _, [own, team] = over_http(port, _basic("alice", PASSWORDS["alice"]), [("costs", {}), ("costs", ROBOTICS)])
        assert not own.is_error and json.loads(own.content[0].text)["person"] == "alice"
        assert team.is_error  # alice leads no team
        assert refused(port, {}) == (401, {"error": "sign in first: send your user name and password (HTTP Basic)"})
        assert refused(port, _basic("carol", "wrong")) == (401, {"error": "wrong user name or password"})
        assert serve_login(serve_port, "carol", "wrong") == 401
        assert refused(port, _basic("carol", "wrong")) == (401, {"error": "wrong user name or password"})
        status, body = refused(port, _basic("carol", PASSWORDS["carol"]))  # three failures in all: locked out
        assert status == 429 and body["error"].startswith("too many failed logins")
        assert serve_login(serve_port, "carol", PASSWORDS["carol"]) == 429  # on serve's login form too
    finally:
        serve.stop()
        process.stop()


def serve_login(port: int, uid: str, password: str) -> int:
    """The status of serve's login form, filled in as a browser would (its session cookie and form token)."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.request("GET", "/login")
        answer = connection.getresponse()
        token = answer.read().decode().split('name="csrf" value="')[1].split('"')[0]
        cookie = answer.headers["Set-Cookie"].split(";")[0]
        connection.request("POST", "/login", urllib.parse.urlencode({"uid": uid, "password": password, "csrf": token}),
                           {"Cookie": cookie, "Content-Type": "application/x-www-form-urlencoded"})
        answer = connection.getresponse()
        answer.read()
        return answer.status
    finally:
        connection.close()


def _basic(uid: str, password: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{uid}:{password}".encode()).decode()}
