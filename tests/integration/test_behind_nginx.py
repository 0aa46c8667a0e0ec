"""Real `billing serve` (waitress) and `billing mcp --http` (uvicorn) processes behind a real nginx.

billing decides whom to believe from the TCP peer and `web.trusted_proxies` alone. nginx stands in for the
authenticating proxy: it sets X-Forwarded-User and appends the client's address to X-Forwarded-For, and connects
to billing from 127.0.0.1. Clients connect from other loopback addresses (127.0.0.2), which Linux routes to the
same interface, so that a client and a proxy have addresses of their own.

uvicorn by default took X-Forwarded-For from 127.0.0.1 as the peer: a person behind nginx was refused as if they
had connected from 127.0.0.2 themselves, and with trusted_proxies 10.0.0.0/8 a local process writing
X-Forwarded-For: 10.0.0.5 was believed to be that proxy.
"""

from __future__ import annotations

import http.client
import json
from pathlib import Path

import pytest

from fixtures.servers import ManagedProcess, free_port, start_nginx
from tests.helpers.serve import RANGE, serve_config, start_mcp, start_serve

CLIENT = "127.0.0.2"  # a person's machine, in front of nginx
INITIALIZE = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}})


def ask(port: int, server: str, headers: dict[str, str] | list[tuple[str, bytes]], source: str = CLIENT,
        body: str = INITIALIZE, method: str = "", answered: dict | None = None) -> tuple[int, dict]:
    """Status and JSON body of serve's costs API or mcp's initialize (or `body`), asked from the address `source`
    with `headers` (a list of lines sends a header twice, and bytes as they are)."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10, source_address=(source, 0))
    lines = list(headers.items()) if isinstance(headers, dict) else headers
    named = {"skip_host": any(name == "Host" for name, _ in lines)}
    try:
        if server == "mcp":
            connection.putrequest(method or "POST", "/mcp", **named)
            lines = [("Content-Type", "application/json"), ("Accept", "application/json, text/event-stream"),
                     ("Content-Length", str(len(body))), *lines]
        else:
            connection.putrequest(method or "GET", f"/api/v1/costs?{RANGE}", **named)
        for name, value in lines:
            connection.putheader(name, value)
        connection.endheaders(body.encode() if server == "mcp" else None)
        answer = connection.getresponse()
        if answered is not None:
            answered.update(answer.headers)
        return answer.status, json.loads(answer.read() or b"{}")
    finally:
        connection.close()


def started(tmp_path: Path, **web) -> dict[str, tuple[int, ManagedProcess]]:
    """serve and mcp over one configuration."""
    (tmp_path / "serve").mkdir()
    (tmp_path / "mcp").mkdir()
    return {"serve": start_serve(tmp_path / "serve", **web),
            "mcp": start_mcp(tmp_path / "mcp", serve_config(tmp_path / "mcp", **web))}


@pytest.fixture(scope="module")
def behind_nginx(tmp_path_factory):
    """serve and mcp trusting loopback (the default), each behind an nginx port that signs in alice."""
    tmp_path = tmp_path_factory.mktemp("behind-nginx")
    servers = started(tmp_path)
    proxied = {name: free_port() for name in servers}
    sites = "\n".join(f"""
        server {{
            listen 127.0.0.1:{proxied[name]};
            location / {{
                proxy_pass http://127.0.0.1:{port};
                proxy_set_header X-Forwarded-User alice;
                proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
                proxy_set_header X-Forwarded-Proto https;  # as a proxy that terminated TLS says
            }}
        }}""" for name, (port, _) in servers.items())
    nginx = start_nginx(tmp_path, sites, list(proxied.values()))
    yield {name: (port, proxied[name], process) for name, (port, process) in servers.items()}
    nginx.stop()
    for _, process in servers.values():
        process.stop()


@pytest.fixture(scope="module")
def trusting_ten(tmp_path_factory):
    """serve and mcp whose only trusted proxies are 10.0.0.0/8, as in a cluster whose Ingress has those."""
    servers = started(tmp_path_factory.mktemp("trusting-ten"), trusted_proxies=["10.0.0.0/8"])
    yield {name: port for name, (port, _) in servers.items()}
    for _, process in servers.values():
        process.stop()


@pytest.mark.parametrize("server", ["serve", "mcp"])
def test_a_person_behind_a_trusted_proxy_is_signed_in_and_logged_with_their_address(behind_nginx, server):
    _, proxied, process = behind_nginx[server]
    headers: dict[str, str] = {}
    status, body = ask(proxied, server, {}, answered=headers)
    assert status == 200, body
    if server == "serve":  # waitress dropped X-Forwarded-For and -Proto from every peer, the proxy's too
        assert body["person"] == "alice" and headers["Strict-Transport-Security"] == "max-age=31536000"
        logged = [json.loads(line) for line in process.log_path.read_text().splitlines() if line.startswith("{")]
        assert {"path": "/api/v1/costs", "uid": "alice", "remote_addr": CLIENT}.items() <= logged[-1].items()


@pytest.mark.parametrize("server", ["serve", "mcp"])
def test_a_user_header_straight_from_an_untrusted_peer_is_refused_naming_it(behind_nginx, server):
    port, _, _ = behind_nginx[server]
    status, body = ask(port, server, {"X-Forwarded-User": "root", "X-Forwarded-For": "127.0.0.1"})
    assert (status, body) == (401, {"error": "the X-Forwarded-User header is trusted only from "
                                             f"web.trusted_proxies, not from {CLIENT}"})


@pytest.mark.parametrize("server", ["serve", "mcp"])
def test_a_forwarded_for_naming_a_trusted_proxy_makes_no_peer_one(trusting_ten, server):
    status, body = ask(trusting_ten[server], server, {"X-Forwarded-User": "root", "X-Forwarded-For": "10.0.0.5"},
                       source="127.0.0.1")
    assert (status, body) == (401, {"error": "the X-Forwarded-User header is trusted only from "
                                             "web.trusted_proxies, not from 127.0.0.1"})


@pytest.mark.parametrize("server", ["serve", "mcp"])
@pytest.mark.parametrize("header, value, sentence", [
    ("Host", "attacker.example:8080", "billing does not answer to the host 'attacker.example:8080'; its names are in "
                                      "web.allowed_hosts"),
    ("Origin", "http://attacker.example", "billing does not answer pages of the origin 'http://attacker.example'; "
                                          "allow it in web.allowed_origins"),
])
def test_a_page_elsewhere_whose_name_points_at_billing_is_refused_before_sign_in(behind_nginx, server, header,
                                                                                   value, sentence):
    """DNS rebinding: a browser on the proxy's own machine, sent to billing by a page of attacker.example whose
    name now resolves to 127.0.0.1, with a user header it wrote itself."""
    port, _, _ = behind_nginx[server]
    lines = [("X-Forwarded-User", "root"), *([("Host", "127.0.0.1")] if header == "Origin" else []), (header, value)]
    assert ask(port, server, lines, source="127.0.0.1") == (403, {"error": sentence})


def test_mcp_is_stateless_and_holds_no_event_stream_open(behind_nginx):
    _, proxied, _ = behind_nginx["mcp"]
    assert ask(proxied, "mcp", {"Accept": "text/event-stream"}, body="", method="GET") == (405, {
        "error": "billing mcp answers POST only: it is stateless, with no event stream to open and no session to "
                 "end (GET)"})


@pytest.mark.parametrize("server", ["serve", "mcp"])
def test_a_user_header_given_twice_is_refused(behind_nginx, server):
    port, _, _ = behind_nginx[server]
    assert ask(port, server, [("X-Forwarded-User", b"alice"), ("X-Forwarded-User", b"root")], source="127.0.0.1") == (
        400, {"error": "the X-Forwarded-User header is given more than once (or holds a comma); the proxy must send "
                       "one user id"})


COSTS = json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "costs", "arguments": {}}})


@pytest.mark.parametrize("server", ["serve", "mcp"])
def test_a_uid_in_utf8_is_read_as_utf8(behind_nginx, server):
    """jörg has no costs: the refusal names him as the header spelled him."""
    port, _, _ = behind_nginx[server]
    status, body = ask(port, server, [("X-Forwarded-User", "jörg".encode())], source="127.0.0.1", body=COSTS)
    said = body["error"] if server == "serve" else body["result"]["content"][0]["text"]
    assert said == "no person named 'jörg' in the ledger"
