"""A real OpenID Connect provider on 127.0.0.1 for `billing mcp`'s OAuth sign-in: panva's oidc-provider
(tests/oidc/provider.js, the npm packages of tests/oidc/package-lock.json, installed by `.ci/run` with `npm ci`).

Each client gets JWT access tokens by the client credentials grant for the resource it asks for (RFC 8707), with the
person's uid in the claim `uid` and a lifetime of its own: a token as an assistant gets it for a person.
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass, field
from pathlib import Path

import requests

from fixtures.servers import ManagedProcess, MissingProgram, accepts_connections, free_port, require_program
from tests.helpers.serve import REPOSITORY

OIDC = REPOSITORY / "tests" / "oidc"


@dataclass(frozen=True)
class Client:
    """A client of the provider: whose tokens it gets (`uid` None: tokens without the claim) and for how long."""

    client_id: str
    uid: str | None
    ttl: int = 600
    secret: str = field(default_factory=lambda: secrets.token_urlsafe(24))


@dataclass
class OidcProvider:
    issuer: str
    clients: dict[str, Client]
    process: ManagedProcess

    def token(self, client_id: str, resource: str) -> str:
        """An access token of `client_id`'s person for `resource`, as the provider mints it."""
        client = self.clients[client_id]
        answer = requests.post(f"{self.issuer}/token", auth=(client.client_id, client.secret), timeout=10, data={
            "grant_type": "client_credentials", "resource": resource, "scope": "billing"})
        assert answer.status_code == 200, answer.text
        return answer.json()["access_token"]

    def stop(self) -> None:
        self.process.stop()


def start_oidc_provider(log_dir: Path, clients: list[Client]) -> OidcProvider:
    """The provider listening on a free port; MissingProgram without node or the npm package."""
    node = require_program("node")
    if not (OIDC / "node_modules" / "oidc-provider").is_dir():
        raise MissingProgram("the npm package oidc-provider is not installed (npm ci --prefix tests/oidc)")
    port = free_port()
    described = [{"client_id": c.client_id, "client_secret": c.secret, "uid": c.uid, "ttl": c.ttl} for c in clients]
    process = ManagedProcess([node, OIDC / "provider.js", port, json.dumps(described)], log_dir / "oidc.log", cwd=OIDC)
    process.wait_until(accepts_connections(port), "oidc-provider", timeout=30)
    return OidcProvider(f"http://127.0.0.1:{port}", {c.client_id: c for c in clients}, process)
