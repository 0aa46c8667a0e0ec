"""`billing mcp --http` signed in as the MCP authorization specification describes, against a real OpenID Connect
provider (panva's oidc-provider, tests/helpers/oidc.py) and a real `billing mcp --http` process (uvicorn).

The provider mints JWT access tokens as an assistant gets them for a person: for the resource it asks for, with the
person's uid in the claim `uid` (the configured `mcp.uid_claim`). The ledger and directory are those of
tests/integration/test_mcp_process.py: alice is on robotics, carol leads it, root is the admin.
"""

from __future__ import annotations

import json
import sys
import time
import urllib.error
import urllib.request
from datetime import UTC, datetime

import anyio
import httpx2
import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from mcp import ClientSession
from mcp.client.auth.extensions.client_credentials import ClientCredentialsOAuthProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken

from fixtures.servers import ManagedProcess, MissingProgram, accepts_connections, free_port
from tests.conftest import missing_program
from tests.helpers.oidc import Client, OidcProvider, start_oidc_provider
from tests.helpers.serve import REPOSITORY, serve_config
from tests.integration.test_mcp_process import REPORT, ROBOTICS, command_json, over_http

CLIENTS = [Client("alice", "alice"), Client("carol", "carol"), Client("root", "root"),
           Client("alice-briefly", "alice", ttl=1), Client("nobody", None)]


class Oauth:
    """The provider, and `billing mcp --http` taking its tokens for `resource`."""

    def __init__(self, provider: OidcProvider, port: int, config) -> None:
        self.provider, self.port, self.config = provider, port, config
        self.resource = f"http://127.0.0.1:{port}/mcp"
        self.metadata_url = f"http://127.0.0.1:{port}/.well-known/oauth-protected-resource/mcp"

    def token(self, client_id: str) -> str:
        return self.provider.token(client_id, self.resource)


@pytest.fixture(scope="module")
def oauth(tmp_path_factory):
    directory = tmp_path_factory.mktemp("mcp-oauth")
    try:
        provider = start_oidc_provider(directory, CLIENTS)
    except MissingProgram as exc:
        missing_program(exc)
    port = free_port()
    config = serve_config(directory, changes={"mcp": {
        "auth": "oauth", "issuer": provider.issuer, "resource": f"http://127.0.0.1:{port}/mcp", "uid_claim": "uid"}})
    mcp = ManagedProcess([sys.executable, "-m", "billing", "--log-format", "json", "mcp", "--http", "--port", port,
                          "--config", config], directory / "mcp.log", cwd=REPOSITORY)
    try:
        mcp.wait_until(accepts_connections(port), "billing mcp --http", timeout=30)
        yield Oauth(provider, port, config)
    finally:
        mcp.stop()
        provider.stop()


def asked(url: str, headers: dict[str, str], body: dict | None = None) -> tuple[int, dict[str, list[str]], dict]:
    """Status, headers (each name's values) and JSON body of a GET, or of a POST of `body` (an MCP request)."""
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, headers={
        "Content-Type": "application/json", "Accept": "application/json, text/event-stream", **headers})
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            status, fields, text = answer.status, answer.headers, answer.read()
    except urllib.error.HTTPError as error:
        status, fields, text = error.code, error.headers, error.read()
    return status, {name.lower(): fields.get_all(name) for name in fields}, json.loads(text)


INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}}


def refused(oauth: Oauth, token: str | None) -> tuple[int, list[str], str]:
    """Status, WWW-Authenticate values and sentence of an MCP request carrying `token` (None: no Authorization)."""
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    status, fields, body = asked(f"http://127.0.0.1:{oauth.port}/mcp", headers, INITIALIZE)
    return status, fields.get("www-authenticate", []), body.get("error", "")


def test_an_assistant_finds_the_authorization_server_without_signing_in(oauth):
    status, challenges, sentence = refused(oauth, None)
    assert (status, challenges) == (401, [f'Bearer resource_metadata="{oauth.metadata_url}"'])
    assert sentence == (f"sign in first: send an access token of {oauth.provider.issuer} for {oauth.resource} "
                        f"(Authorization: Bearer)")
    for url in (oauth.metadata_url, f"http://127.0.0.1:{oauth.port}/.well-known/oauth-protected-resource"):
        status, _, metadata = asked(url, {})
        assert status == 200
        assert metadata == {"resource": oauth.resource, "authorization_servers": [oauth.provider.issuer],
                            "resource_name": "billing", "bearer_methods_supported": ["header"]}
    # the server it names is the provider, which says where its keys and token endpoint are
    status, _, discovery = asked(f"{oauth.provider.issuer}/.well-known/openid-configuration", {})
    assert status == 200 and discovery["issuer"] == oauth.provider.issuer


# client (whose token) -> whether robotics' costs, vision's, and their own are answered (as serve shows them)
MATRIX = {"alice": (False, False, True), "carol": (True, False, False), "root": (True, True, True)}


@pytest.mark.parametrize("client", MATRIX)
def test_a_token_signs_its_person_in_who_sees_what_serve_shows_them(oauth, client):
    _, results = over_http(oauth.port, {"Authorization": f"Bearer {oauth.token(client)}"},
                           [("costs", ROBOTICS), ("costs", {"team": "vision"}), ("costs", {})])
    assert tuple(not result.is_error for result in results) == MATRIX[client]
    if not results[0].is_error:
        assert json.loads(results[0].content[0].text) == command_json(oauth.config, *REPORT)
    if client == "alice":
        assert json.loads(results[2].content[0].text)["person"] == "alice"


def _claims(token: str) -> dict:
    return jwt.decode(token, options={"verify_signature": False})


def _signed_by_another_key(claims: dict, kid: str) -> str:
    return jwt.encode(claims, rsa.generate_private_key(public_exponent=65537, key_size=2048), algorithm="RS256",
                      headers={"kid": kid, "typ": "at+jwt"})


def test_a_token_that_names_nobody_here_is_refused_with_one_sentence(oauth):
    issuer, resource = oauth.provider.issuer, oauth.resource
    brief = oauth.token("alice-briefly")
    genuine = _claims(oauth.token("alice"))
    other = oauth.provider.token("alice", "https://other.example.org/mcp")
    expected = {
        other: 'the token is for "https://other.example.org/mcp", not for this server '
               f"({resource}); ask {issuer} for a token for {resource}",
        _signed_by_another_key({**genuine, "uid": "root"}, "test-key"): f"the token's signature is not {issuer}'s",
        _signed_by_another_key(genuine, "made-up"): f"the token is signed with key id 'made-up', which the issuer "
                                                    f"{issuer} does not publish",
        oauth.token("nobody"): "the token has no 'uid' claim naming the person (mcp.uid_claim)",
        "not-a-jwt": "the bearer token is not a JWT (a signed access token of the issuer)",
        jwt.encode(genuine, "a shared secret of at least thirty-two bytes", algorithm="HS256"):
            "the token is signed with 'HS256', not with a public key of the issuer",
    }
    time.sleep(max(0.0, _claims(brief)["exp"] - time.time()) + 0.1)  # its second has passed
    expired_at = datetime.fromtimestamp(_claims(brief)["exp"], UTC)
    expected[brief] = f"the token expired at {expired_at:%Y-%m-%d %H:%M:%S} UTC; sign in again"
    for token, sentence in expected.items():
        assert refused(oauth, token) == (401, [f'Bearer error="invalid_token", resource_metadata='
                                               f'"{oauth.metadata_url}"'], sentence)


class Kept:
    """The tokens and client of one assistant, kept in memory (the SDK's TokenStorage)."""

    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


def test_the_sdks_oauth_client_given_only_the_url_finds_the_issuer_and_signs_in(oauth):
    """The MCP SDK's own OAuth client, as an assistant signs in: refused, it reads the challenge's metadata, the
    issuer's metadata, gets a token for billing's URL and asks again."""
    carol = oauth.provider.clients["carol"]
    kept = Kept()
    sign_in = ClientCredentialsOAuthProvider(server_url=oauth.resource, storage=kept, client_id="carol",
                                             client_secret=carol.secret, scope="billing", issuer=oauth.provider.issuer)

    async def session() -> list:
        async with (httpx2.AsyncClient(auth=sign_in, timeout=30) as http,
                    streamable_http_client(oauth.resource, http_client=http) as (read, write),
                    ClientSession(read, write) as client):
            await client.initialize()
            return [await client.call_tool("costs", ROBOTICS), await client.call_tool("costs", {"team": "vision"})]

    robotics, vision = anyio.run(session)
    assert json.loads(robotics.content[0].text) == command_json(oauth.config, *REPORT)
    assert vision.is_error and vision.content[0].text.startswith("carol is not a lead of team 'vision'")
    assert kept.tokens is not None and _claims(kept.tokens.access_token)["aud"] == oauth.resource
