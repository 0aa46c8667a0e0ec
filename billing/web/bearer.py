"""`billing mcp --http` signed in as the MCP authorization specification describes (OAuth 2.1 bearer tokens).

An assistant refused with 401 reads `WWW-Authenticate: Bearer resource_metadata="..."` (RFC 9728), fetches this
server's protected resource metadata, which names the lab's authorization server (`mcp.issuer`), signs the person
in there and sends the access token it got for this server as `Authorization: Bearer` (RFC 6750). A token counts
when it is a JWT signed by one of the issuer's keys (the JWKS its OpenID Connect discovery document names), issued
by `mcp.issuer` for this server (its audience holds `mcp.resource`, RFC 8707) and not expired; the person is its
`mcp.uid_claim`, who then sees what serve would show them. Anything else is 401 with one sentence saying what is
wrong with the token, and the challenge again.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime

import jwt
import requests
from mcp.server.auth.handlers.metadata import ProtectedResourceMetadataHandler
from mcp.server.auth.routes import build_resource_metadata_url, cors_middleware
from mcp.shared.auth import ProtectedResourceMetadata
from pydantic import AnyHttpUrl
from starlette.routing import Route, Router
from starlette.types import ASGIApp

from billing.config import McpConfig
from billing.web.security import UID, Refused, shown_uid

log = logging.getLogger(__name__)

# public-key signatures only: an HS* token would be signed with a shared secret, "none" with nothing
SIGNING_ALGORITHMS = frozenset({"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512",
                                "EdDSA"})
KEYS_LIFETIME = 3600.0  # the issuer's keys are fetched again after this long, so a retired key stops counting
REFETCH_AFTER = 30.0  # a key id the issuer does not publish fetches its keys again at most this often, so that a
# stream of made-up key ids asks the issuer once, while a key the issuer just rotated in counts within seconds
TIMEOUT = 10.0  # seconds for each request to the issuer
WELL_KNOWN = "/.well-known/oauth-protected-resource"


class IssuerKeys:
    """The issuer's signing keys by key id, from the `jwks_uri` of its discovery document: kept for KEYS_LIFETIME,
    and fetched again for a key id not among them (a rotation), at most once per REFETCH_AFTER."""

    def __init__(self, issuer: str, clock: Callable[[], float] = time.monotonic) -> None:
        self.issuer, self.clock = issuer, clock
        self._keys: dict[str | None, jwt.PyJWK] = {}
        self._fetched = -float("inf")
        self._lock = threading.Lock()

    def key(self, kid: str | None) -> jwt.PyJWK:
        """The key `kid` names; Refused(401) when the issuer does not publish it, Refused(503) when the issuer
        cannot say."""
        with self._lock:
            age = self.clock() - self._fetched
            if age >= KEYS_LIFETIME or (kid not in self._keys and age >= REFETCH_AFTER):
                self._keys, self._fetched = self._fetch(), self.clock()
            if kid in self._keys:
                return self._keys[kid]
        shown = "no key id" if kid is None else f"key id {shown_uid(kid)!r}"
        raise Refused(401, f"the token is signed with {shown}, which the issuer {self.issuer} does not publish")

    def _fetch(self) -> dict[str | None, jwt.PyJWK]:
        discovery = f"{self.issuer.rstrip('/')}/.well-known/openid-configuration"
        document = self._json(discovery)
        if document.get("issuer") != self.issuer:  # OpenID Connect Discovery 1.0, 4.3
            log.error("%s names the issuer %r, not mcp.issuer %s", discovery, document.get("issuer"), self.issuer)
            raise Refused(503, f"the authorization server's discovery document names another issuer than "
                               f"{self.issuer} (mcp.issuer); no token can be checked until they agree")
        jwks_uri = str(document.get("jwks_uri", ""))
        try:
            keys = jwt.PyJWKSet.from_dict(self._json(jwks_uri)).keys
        except jwt.PyJWKSetError as exc:
            log.error("the authorization server's %s: %s", jwks_uri, exc)
            raise Refused(503, f"the authorization server {self.issuer} publishes no signing key billing can "
                               f"use; no token can be checked") from None
        usable = [key for key in keys  # keys for encryption (use: enc) sign nothing
                  if key.algorithm_name in SIGNING_ALGORITHMS and key.public_key_use in (None, "sig")]
        log.info("fetched %d signing key(s) of %s", len(usable), self.issuer)
        keys_by_id: dict[str | None, jwt.PyJWK] = {key.key_id: key for key in usable if key.key_id}
        if len(usable) == 1:  # a token without a key id, of an issuer with one key
            keys_by_id[None] = usable[0]
        return keys_by_id

    def _json(self, url: str) -> dict:
        try:
            answer = requests.get(url, timeout=TIMEOUT, headers={"Accept": "application/json"})
            answer.raise_for_status()
            document = answer.json()
            if not isinstance(document, dict):
                raise ValueError("not a JSON object")
            return document
        except (requests.RequestException, ValueError) as exc:
            log.error("the authorization server's %s: %s", url, exc)
            raise Refused(503, f"the authorization server {self.issuer} cannot be asked for its signing keys at "
                               f"the moment; try again later") from None


class BearerSignIn:
    """Who a bearer token names, and what tells an assistant where to get one: the protected resource metadata
    and the challenge of every 401."""

    def __init__(self, mcp: McpConfig, keys: IssuerKeys | None = None) -> None:
        self.mcp = mcp
        self.keys = keys or IssuerKeys(mcp.issuer)
        self.metadata_url = str(build_resource_metadata_url(AnyHttpUrl(mcp.resource)))

    def challenge(self, token_refused: bool) -> str:
        """The WWW-Authenticate value of a 401 (RFC 6750 3, RFC 9728 5.1): an error code only when a token was sent."""
        error = 'error="invalid_token", ' if token_refused else ""
        return f'Bearer {error}resource_metadata="{self.metadata_url}"'

    def elsewhere(self) -> str:
        """What a request for other metadata of this server is told (an assistant looking for the authorization
        server's at billing's address, as before the 2025-06-18 specification)."""
        return f"billing is no authorization server: its authorization server is {self.mcp.issuer} ({self.metadata_url})"

    def metadata(self) -> tuple[list[str], ASGIApp]:
        """The paths of the protected resource metadata (RFC 9728 3.1's, after the host, and the bare one an
        assistant tries next) and the application answering them, to anyone: it is how an assistant finds where
        to sign in."""
        # validated from text, so that the model keeps an issuer without a path as it is spelled (no "/" added):
        # an assistant compares the issuer it finds with the named one letter by letter (RFC 8414 3.3)
        document = ProtectedResourceMetadata.model_validate({
            "resource": self.mcp.resource, "authorization_servers": [self.mcp.issuer], "resource_name": "billing"})
        answer = cors_middleware(ProtectedResourceMetadataHandler(document).handle, ["GET", "OPTIONS"])
        paths = list(dict.fromkeys([AnyHttpUrl(self.metadata_url).path or WELL_KNOWN, WELL_KNOWN]))
        return paths, Router(routes=[Route(path, endpoint=answer, methods=["GET", "OPTIONS"]) for path in paths])

    def uid(self, authorization: str) -> str:
        """The uid of the `Authorization: Bearer` token; Refused(401) with the reason when it names nobody."""
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise Refused(401, f"sign in first: send an access token of {self.mcp.issuer} for {self.mcp.resource} "
                               f"(Authorization: Bearer)")
        claims = self._claims(token.strip())
        claim = self.mcp.uid_claim
        if claim not in claims:
            raise Refused(401, f"the token has no {claim!r} claim naming the person (mcp.uid_claim)")
        value = claims[claim]
        if not isinstance(value, str) or not UID.fullmatch(value.strip()):
            raise Refused(401, f"the token's {claim!r} claim holds no usable user id")
        return value.strip()

    def _claims(self, token: str) -> dict:
        """The token's claims once its signature, issuer, audience and expiry are checked."""
        try:
            header = jwt.get_unverified_header(token)
        except jwt.InvalidTokenError:
            raise Refused(401, "the bearer token is not a JWT (a signed access token of the issuer)") from None
        if header.get("alg") not in SIGNING_ALGORITHMS:
            raise Refused(401, f"the token is signed with {shown_uid(str(header.get('alg')))!r}, not with a public "
                               f"key of the issuer")
        kid = header.get("kid")
        key = self.keys.key(kid if isinstance(kid, str) else None)
        try:
            return jwt.decode(token, key.key, algorithms=[key.algorithm_name], audience=self.mcp.resource,
                              issuer=self.mcp.issuer, options={"require": ["exp", "iss", "aud"]})
        except jwt.ExpiredSignatureError:
            expired = datetime.fromtimestamp(_unverified(token).get("exp", 0), UTC)
            raise Refused(401, f"the token expired at {expired:%Y-%m-%d %H:%M:%S} UTC; sign in again") from None
        except jwt.InvalidAudienceError:
            audience = _unverified(token).get("aud")
            raise Refused(401, f"the token is for {_shown(audience)}, not for this server ({self.mcp.resource}); "
                               f"ask {self.mcp.issuer} for a token for {self.mcp.resource}") from None
        except jwt.InvalidIssuerError:
            issuer = _unverified(token).get("iss")
            raise Refused(401, f"the token was issued by {_shown(issuer)}, not by {self.mcp.issuer}") from None
        except jwt.MissingRequiredClaimError as exc:
            raise Refused(401, f"the token has no {exc.claim!r} claim") from None
        except jwt.InvalidSignatureError:
            raise Refused(401, f"the token's signature is not {self.mcp.issuer}'s") from None
        except jwt.ImmatureSignatureError:
            raise Refused(401, "the token is not valid yet (its nbf or iat lies ahead)") from None
        except jwt.InvalidTokenError as exc:
            raise Refused(401, f"the bearer token cannot be read: {shown_uid(str(exc))}") from None


def _unverified(token: str) -> dict:
    """Claims of a token whose signature checked, to name in a refusal what the token says."""
    return jwt.decode(token, options={"verify_signature": False})


def _shown(value: object) -> str:
    """A claim's value as a refusal names it: JSON, cut to 64 characters (it is the sender's text)."""
    return shown_uid(json.dumps(value))
