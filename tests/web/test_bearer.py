"""billing/web/bearer.py: the issuer's keys as they are kept and fetched again, and what tells an assistant where to
sign in (the protected resource metadata, the challenge of a 401) in each sign-in mode. Tokens of a real provider
checked by a real `billing mcp --http`: tests/integration/test_mcp_oauth.py."""

from __future__ import annotations

import time
from urllib.parse import urlsplit

import anyio
import httpx2
import jwt
import pytest
import responses
from cryptography.hazmat.primitives.asymmetric import rsa
from pydantic import ValidationError

from billing.config import Config
from billing.web.bearer import KEYS_LIFETIME, REFETCH_AFTER, BearerSignIn, IssuerKeys
from billing.web.mcp_server import PATH, signed_in
from billing.web.security import Refused
from tests.helpers.config import MINIMAL_CONFIG
from tests.web.test_mcp import uid_app

ISSUER = "https://sso.example.org/realms/lab"
DISCOVERY = f"{ISSUER}/.well-known/openid-configuration"
JWKS = f"{ISSUER}/protocol/openid-connect/certs"
RESOURCE = "https://billing.example.org/mcp"
METADATA = "https://billing.example.org/.well-known/oauth-protected-resource/mcp"


def _jwk(kid: str) -> dict:
    public = rsa.generate_private_key(public_exponent=65537, key_size=2048).public_key()
    return {**jwt.algorithms.RSAAlgorithm.to_jwk(public, as_dict=True), "kid": kid, "alg": "RS256", "use": "sig"}


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _published(keys: list[dict], issuer: str = ISSUER) -> None:
    responses.get(DISCOVERY, json={"issuer": issuer, "jwks_uri": JWKS})
    responses.get(JWKS, json={"keys": keys})


def _fetches() -> int:
    return sum(call.request.url == JWKS for call in responses.calls)


@responses.activate
def test_keys_are_kept_and_fetched_again_for_an_unknown_key_id_at_most_every_half_minute():
    clock = Clock()
    keys = IssuerKeys(ISSUER, clock)
    _published([_jwk("k1")])
    assert keys.key("k1").key_id == "k1" and _fetches() == 1
    clock.now += REFETCH_AFTER - 1
    with pytest.raises(Refused) as refused:  # too soon after the last fetch to ask again
        keys.key("k2")
    assert (refused.value.status, str(refused.value)) == (
        401, f"the token is signed with key id 'k2', which the issuer {ISSUER} does not publish")
    assert _fetches() == 1
    responses.replace(responses.GET, JWKS, json={"keys": [_jwk("k1"), _jwk("k2")]})  # the issuer rotates
    clock.now += 1
    assert keys.key("k2").key_id == "k2" and _fetches() == 2
    assert keys.key("k1").key_id == "k1" and _fetches() == 2
    clock.now += KEYS_LIFETIME
    keys.key("k1")
    assert _fetches() == 3


@responses.activate
def test_the_one_signing_key_checks_a_token_without_a_key_id_and_an_encryption_key_none():
    _published([_jwk("only"), {**_jwk("wrap"), "use": "enc", "alg": "RSA-OAEP"}, {**_jwk("enc"), "use": "enc"}])
    keys = IssuerKeys(ISSUER)
    assert keys.key(None).key_id == "only"
    for kid in ("wrap", "enc"):
        with pytest.raises(Refused, match=f"signed with key id '{kid}', which the issuer"):
            keys.key(kid)


@responses.activate
def test_an_issuer_that_cannot_say_its_keys_is_503_with_one_sentence():
    _published([_jwk("k1")], issuer="https://sso.example.org/realms/other")
    with pytest.raises(Refused) as refused:
        IssuerKeys(ISSUER).key("k1")
    assert (refused.value.status, str(refused.value)) == (
        503, f"the authorization server's discovery document names another issuer than {ISSUER} (mcp.issuer); "
             "no token can be checked until they agree")
    responses.replace(responses.GET, DISCOVERY, status=502)
    with pytest.raises(Refused) as refused:
        IssuerKeys(ISSUER).key("k1")
    assert (refused.value.status, str(refused.value)) == (
        503, f"the authorization server {ISSUER} cannot be asked for its signing keys at the moment; try again later")


def _config(web: dict, mcp: dict) -> Config:
    return Config.model_validate({**MINIMAL_CONFIG, "web": web, "mcp": mcp})


def _asked(config: Config, method: str, path: str, headers: dict[str, str],
           base_url: str = "http://localhost") -> httpx2.Response:
    app = signed_in(uid_app, config)

    async def ask() -> httpx2.Response:
        transport = httpx2.ASGITransport(app=app, client=("127.0.0.1", 4000))
        async with httpx2.AsyncClient(transport=transport, base_url=base_url) as http:
            return await http.request(method, path, headers=headers)

    return anyio.run(ask)


NAMED = {"issuer": ISSUER, "resource": RESOURCE}
LDAP = {"auth": "ldap", "session_key_env": "BILLING_SESSION_KEY"}


@pytest.mark.parametrize(("web", "challenges"), [
    ({}, [f'Bearer resource_metadata="{METADATA}"']),
    (LDAP, ['Basic realm="billing", charset="UTF-8"', f'Bearer resource_metadata="{METADATA}"']),
])
def test_with_an_issuer_named_header_and_ldap_sign_in_point_assistants_to_it(web, challenges):
    """serve's sign-in stays; the 401 names the metadata too, which anyone may read (a proxy takes the tokens)."""
    config = _config(web, NAMED)
    refused = _asked(config, "POST", PATH, {})
    assert refused.status_code == 401 and refused.headers.get_list("www-authenticate") == challenges
    for path in ("/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"):
        metadata = _asked(config, "GET", path, {})
        assert (metadata.status_code, metadata.json()) == (200, {
            "resource": RESOURCE, "authorization_servers": [ISSUER], "resource_name": "billing",
            "bearer_methods_supported": ["header"]})
    elsewhere = _asked(config, "GET", "/.well-known/oauth-authorization-server", {})
    assert (elsewhere.status_code, elsewhere.json()) == (404, {
        "error": f"billing is no authorization server: its authorization server is {ISSUER} ({METADATA})"})


def test_with_an_issuer_named_the_proxys_header_still_signs_in():
    answer = _asked(_config({}, NAMED), "POST", PATH, {"X-Forwarded-User": "alice"})
    assert (answer.status_code, answer.text) == (200, "alice")


def test_the_host_of_mcp_resource_is_answered_and_another_refused_before_sign_in():
    """mcp.resource is the address assistants are told to use, so its host is one billing answers to."""
    config = _config({}, NAMED)
    answer = _asked(config, "POST", PATH, {"X-Forwarded-User": "alice"}, base_url=f"https://{urlsplit(RESOURCE).netloc}")
    assert (answer.status_code, answer.text) == (200, "alice")
    refused = _asked(config, "POST", PATH, {"X-Forwarded-User": "alice"}, base_url="https://billing.evil.example")
    assert refused.status_code == 403 and "web.allowed_hosts" in refused.json()["error"]


def test_without_an_issuer_there_is_no_challenge_and_no_metadata_to_sign_in_for():
    config = _config({}, {})
    assert _asked(config, "POST", PATH, {}).headers.get_list("www-authenticate") == []
    missing = _asked(config, "GET", "/.well-known/oauth-protected-resource/mcp", {})
    assert (missing.status_code, missing.json()) == (404, {
        "error": "this server names no authorization server (mcp.issuer is not set); sign in as its web.auth says"})


@pytest.mark.parametrize(("mcp", "sentence"), [
    ({"issuer": ISSUER}, "set both issuer and resource"),
    ({"auth": "oauth"}, "auth oauth needs issuer"),
    ({**NAMED, "issuer": "http://sso.example.org"}, "must be https://"),
    ({**NAMED, "resource": f"{RESOURCE}#part"}, "has a fragment"),
])
def test_an_oauth_sign_in_named_by_half_is_a_configuration_error(mcp, sentence):
    with pytest.raises(ValidationError, match=sentence):
        _config({}, mcp)


class LocalKeys(IssuerKeys):
    """The issuer's keys as one made here, so that tests sign tokens the real provider would not mint."""

    def __init__(self, private: rsa.RSAPrivateKey) -> None:
        super().__init__(ISSUER)
        self.public = {**jwt.algorithms.RSAAlgorithm.to_jwk(private.public_key(), as_dict=True), "kid": "k1",
                       "alg": "RS256"}

    def _fetch(self) -> dict[str | None, jwt.PyJWK]:
        return {"k1": jwt.PyJWK(self.public)}


def test_claims_the_provider_gets_right_are_checked_too():
    private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    sign_in = BearerSignIn(_config({}, {**NAMED, "auth": "oauth", "uid_claim": "preferred_username"}).mcp,
                           LocalKeys(private))
    now = int(time.time())
    claims = {"iss": ISSUER, "aud": RESOURCE, "exp": now + 60, "preferred_username": "alice"}

    def uid_of(**changes) -> str:
        token = jwt.encode({key: value for key, value in {**claims, **changes}.items() if value is not None},
                           private, algorithm="RS256", headers={"kid": "k1"})
        try:
            return sign_in.uid(f"Bearer {token}")
        except Refused as refused:
            return str(refused)

    assert uid_of() == "alice"
    assert uid_of(aud=["https://other.example.org", RESOURCE]) == "alice"  # one of its audiences is billing
    assert uid_of(iss="https://sso.example.org/realms/other") == (
        f'the token was issued by "https://sso.example.org/realms/other", not by {ISSUER}')
    assert uid_of(aud=f"{RESOURCE}/") == (f'the token is for "{RESOURCE}/", not for this server ({RESOURCE}); '
                                          f"ask {ISSUER} for a token for {RESOURCE}")
    assert uid_of(exp=None) == "the token has no 'exp' claim"
    assert uid_of(nbf=now + 60) == "the token is not valid yet (its nbf or iat lies ahead)"
    assert uid_of(preferred_username=None) == (
        "the token has no 'preferred_username' claim naming the person (mcp.uid_claim)")
    assert uid_of(preferred_username=["alice"]) == "the token's 'preferred_username' claim holds no usable user id"
    with pytest.raises(Refused, match="sign in first: send an access token of"):
        sign_in.uid("Basic YWxpY2U6cHc=")
