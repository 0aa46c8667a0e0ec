"""`billing mcp`: the ledger's tools (billing/web/tools.py) for assistants, over the Model Context Protocol.

Over stdio, for a person's own assistant, the viewer is the local user (`billing mcp --as UID`, else the login
name), seeing what `billing serve` would show them. That process runs with the caller's own configuration and so
with the ledger's credentials: it trusts the caller, as `billing report` does; the rules keep the assistant to the
person's figures but are no barrier against the person (docs/mcp.md). Over streamable HTTP (`--http`), run beside `billing serve`
behind the same proxy, the viewer is whom serve's sign-in names: the trusted proxy's header (`web.auth: header`), or
for `web.auth: ldap` an HTTP Basic user name and password checked by an LDAP bind as the person, counted by serve's
login throttle; with `mcp.auth: oauth`, the person an access token of the lab's authorization server names
(billing/web/bearer.py). A request without a viewer is refused before it reaches a tool, with a challenge that
points an assistant to the protected resource metadata where `mcp.issuer` is set.

Each tool declares its arguments and its answer as JSON Schemas (billing/web/tools.py) and answers with the document
both as structured content and as its JSON text. Errors a tool meets (an argument it does not take or of the wrong
kind, no such team, a day that is no day, a range too long, a team the viewer does not lead) come back as tool errors
of one sentence; an unknown team or person is named without the closest names, which would tell who else has costs.
The server is the SDK's low-level one with tools alone registered, so it advertises tools and nothing else.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
from collections.abc import Callable
from importlib.metadata import version

import anyio.to_thread
import uvicorn
from mcp.server import Server, ServerRequestContext
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError
from mcp_types import (
    INVALID_PARAMS,
    CallToolRequestParams,
    CallToolResult,
    ListToolsResult,
    PaginatedRequestParams,
    TextContent,
    Tool,
    ToolAnnotations,
)
from sqlalchemy import Engine
from starlette.types import ASGIApp, Receive, Scope, Send

from billing.config import Config
from billing.directory.ldap import WrongPassword
from billing.errors import BillingError
from billing.ledger.database import open_ledger
from billing.publish.report import UnknownSubject
from billing.resources import RESOURCES, UNITS, hours_columns
from billing.web.access import Forbidden, viewer
from billing.web.bearer import BearerSignIn
from billing.web.security import Guard, Refused
from billing.web.tools import NAMES, Tools
from billing.web.tools import answer_schemas as tool_answers

log = logging.getLogger(__name__)

PATH = "/mcp"  # where the HTTP server answers
UID_KEY = "billing_uid"  # the signed-in uid, in the ASGI scope's state, for the tools

WHOSE = "Give team or person, or neither for your own costs (an admin: every team). "


def descriptions(currency: str) -> dict[str, str]:
    """What each tool answers, in which units and currency (the assistant reads these to choose a tool)."""
    money = f"Money is in {currency}, unrounded as the ledger holds it (round to cents to quote it)"
    hours = f"quantities in resource-hours: {hours_columns()}"
    return {
        "costs": f"What a person, a team or every team spent over a range of days, summed per namespace (per team "
                 f"for everyone) or per the `by` asked (team, person, namespace, cluster, resource, GPU model (a "
                 f"storage row's storage class), day, workload or cost label; `rows`: the ledger's own rows, long); the same document as "
                 f"`billing report --by BY --format json`, with a team's budget and the range's price changes. {WHOSE}"
                 f"{money}; where the range holds two currencies, each row names its own, `total_costs` has each "
                 f"currency's total and `total_cost` is null (never add them); {hours}.",
        "changes": f"What changed between two ranges of days and why: cost before and after per namespace, per "
                   f"workload and per resource (with hours and cost per hour, so that more hours tell apart from "
                   f"dearer hours), largest change first, and the price sets that came into force in between. {WHOSE}"
                   f"{money}; hours in resource-hours ({', '.join(f'{name} in {UNITS[name]}' for name in RESOURCES)}).",
        "waste": f"What was held but not used over a range (shown, never billed): idle GPU-hours, unused CPU "
                 f"core-hours and unused storage GiB-hours, per namespace for a person, per owner for a team, per team "
                 f"for everyone; null where no day measured it. {WHOSE}Quantities in GPU-hours, core-hours and "
                 f"GiB-hours, no money.",
        "budget": f"A team's month against its budget: budget, month to date, the month's forecast (and how it is "
                  f"made), shares used, days not billed yet, and the month's days never billed (which month to date "
                  f"leaves out); as of a day (default yesterday). For the team's leads and admins. {money}; shares "
                  f"as fractions (0.5 is 50 %).",
        "statement": f"A month's statement for finance, as `billing statement --format json`: per team its lines "
                     f"(list price, discounts, credits, unrequested shares, corrections, cost recovery) and total; "
                     f"a closed month as it was closed. A team's for its leads, every team's for admins. {money}.",
        "figure_source": f"Where a day's figures come from: the day's ledger rows of the subject (quantity × "
                         f"unit_price, less discounts: cost, as `billing report --from DAY --to DAY --format json`), "
                         f"the prices in force on each cluster that day, the billing rules, the run that wrote the day "
                         f"and its data coverage and self-audit. {WHOSE}{money}; unit prices per resource-hour.",
    }


def build_server(config: Config, ledger: Engine, uid_of: Callable[[ServerRequestContext], str]) -> Server:
    """The MCP server of the tools, each answering for the viewer of `uid_of(ctx)` under serve's rules. It offers
    tools only, so it advertises no other capability: a request for prompts or resources is "method not found"."""
    tools = Tools(ledger, config)
    said = descriptions(config.currency)
    answer_schemas = tool_answers(config.currency)
    read_only = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True,
                                open_world_hint=False)
    listed = ListToolsResult(tools=[
        Tool(name=name, description=said[name], input_schema=tools.arguments[name],
             output_schema=answer_schemas[name], annotations=read_only)
        for name in NAMES])

    async def list_tools(ctx: ServerRequestContext, params: PaginatedRequestParams | None) -> ListToolsResult:
        return listed

    async def call_tool(ctx: ServerRequestContext, params: CallToolRequestParams) -> CallToolResult:
        """The tool's document as structured content and as its JSON text; a question it cannot answer a tool
        error of one sentence, logged with who asked; a tool it does not have the protocol's invalid params."""
        if params.name not in NAMES:
            raise MCPError(code=INVALID_PARAMS, message=f"no tool named {params.name!r}: the tools are "
                                                        f"{', '.join(NAMES)}")
        uid, name = uid_of(ctx), params.name
        try:
            found = await anyio.to_thread.run_sync(
                tools.answer, viewer(ledger, uid, config.web.admins), name, params.arguments or {})
        except UnknownSubject as exc:  # without the closest names, which would tell who else has costs
            sentence = exc.plain
        except (BillingError, Forbidden) as exc:
            sentence = str(exc)
        else:
            log.info("%s asked %s", uid, name, extra={"uid": uid, "tool": name})
            return CallToolResult(content=[TextContent(type="text", text=json.dumps(found, indent=1))],
                                  structured_content=found)
        log.info("%s asked %s: %s", uid, name, sentence, extra={"uid": uid, "tool": name})
        return CallToolResult(content=[TextContent(type="text", text=sentence)], is_error=True)

    return Server("billing", version=version("billing"), on_list_tools=list_tools, on_call_tool=call_tool,
                  instructions="GPU/CPU chargeback from the billing ledger: read-only; each person sees their own "
                               "costs, a team lead their teams', admins everything.")


def _quiet_sdk() -> None:
    """The SDK's per-request chatter ("Terminating session: None" for each stateless request) kept out of the log;
    its warnings stay."""
    logging.getLogger("mcp").setLevel(logging.WARNING)


def _read_only_ledger(config: Config) -> Engine:
    """The ledger as serve reads it: through web.database (a read-only role) where configured."""
    return open_ledger(config.web.database or config.database, key="web.database" if config.web.database else "database")


def run_stdio(config: Config, uid: str) -> None:
    """Answer one assistant on stdin and stdout as `uid` until it closes them."""
    _quiet_sdk()
    ledger = _read_only_ledger(config)
    log.info("billing mcp on stdio for %s", uid)
    server = build_server(config, ledger, lambda ctx: uid)

    async def answer() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(answer)


class SignIn:
    """ASGI middleware: the viewer's uid by serve's sign-in or a bearer token, into the scope for the tools; else
    401 (429 for a locked-out login, 503 without a directory or authorization server) and one sentence as JSON,
    before any tool is listed or called. Before the sign-in, as serve: 403 for a host or origin billing does not
    answer to; then the protected resource metadata, answered to anyone; then 405 for anything but POST."""

    def __init__(self, app: ASGIApp, config: Config, guard: Guard, bearer: BearerSignIn | None = None) -> None:
        self.app, self.config, self.guard, self.bearer = app, config, guard, bearer
        self.metadata_paths: list[str] = []
        self.metadata: ASGIApp | None = None
        if bearer is not None:
            self.metadata_paths, self.metadata = bearer.metadata()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        peer = (scope.get("client") or ("", 0))[0]
        client = self.guard.client_of(peer, ", ".join(_text(scope, "x-forwarded-for")))  # each proxy's line, in order
        authorization = next(iter(_text(scope, "authorization")), "")
        try:
            self.guard.check_host(next(iter(_text(scope, "host")), None), next(iter(_text(scope, "origin")), None))
            if self.metadata is not None and scope["path"] in self.metadata_paths:  # where to sign in: open to all
                await self.metadata(scope, receive, send)
                return
            if scope["path"].startswith("/.well-known/"):  # nothing else to find there: 404, not a 401 to sign in for
                raise Refused(404, self.bearer.elsewhere() if self.bearer is not None else
                              "this server names no authorization server (mcp.issuer is not set); "
                              "sign in as its web.auth says")
            if scope["method"] != "POST":  # the SDK's stateless transport would hold a GET's event stream open
                raise Refused(405, f"billing mcp answers POST only: it is stateless, with no event stream to open "
                                   f"and no session to end ({scope['method']})")
            uid = await self._uid(scope, peer, client, authorization)
        except Refused as exc:
            log.info("%s %s %d", scope.get("method"), scope.get("path"), exc.status,
                     extra={"path": scope.get("path"), "status": exc.status, "remote_addr": client})
            await _refuse(send, exc, self._challenges(exc, authorization))
            return
        scope.setdefault("state", {})[UID_KEY] = uid
        await self.app(scope, receive, send)

    async def _uid(self, scope: Scope, peer: str, client: str, authorization: str) -> str:
        if self.bearer is not None and self.config.mcp.auth == "oauth":  # fetching the issuer's keys blocks
            return await anyio.to_thread.run_sync(self.bearer.uid, authorization)
        if self.config.web.auth == "ldap":
            return await self._password_user(authorization, client)
        return self.guard.proxy_user(_lines(scope, self.config.web.user_header), peer)

    def _challenges(self, refused: Refused, authorization: str) -> list[str]:
        """The WWW-Authenticate values of a 401: HTTP Basic where passwords sign in, and the bearer challenge naming
        the protected resource metadata wherever `mcp.issuer` is set (behind a proxy that takes the issuer's tokens
        too), so that an assistant finds where to sign in; `invalid_token` for a token billing itself refused."""
        if refused.status != 401:
            return []
        oauth = self.config.mcp.auth == "oauth"
        basic = ['Basic realm="billing", charset="UTF-8"'] if self.config.web.auth == "ldap" and not oauth else []
        token_refused = oauth and authorization.lower().startswith("bearer ")
        return basic + ([self.bearer.challenge(token_refused)] if self.bearer is not None else [])

    async def _password_user(self, authorization: str, client: str) -> str:
        """The uid of HTTP Basic credentials that bind to the directory as the person (a bind per request), counted
        by serve's login throttle against the uid and the client's address."""
        scheme, _, encoded = authorization.partition(" ")
        try:
            uid, _, password = base64.b64decode(encoded, validate=True).decode().partition(":")
        except (binascii.Error, UnicodeDecodeError):
            uid = password = ""
        if scheme.lower() != "basic" or not uid:
            raise Refused(401, "sign in first: send your user name and password (HTTP Basic)")
        return await anyio.to_thread.run_sync(self._sign_in, uid, password, client)

    def _sign_in(self, uid: str, password: str, client: str) -> str:
        try:
            return self.guard.sign_in(self.config.directory, uid, password, client)
        except WrongPassword:
            raise Refused(401, "wrong user name or password") from None


def _lines(scope: Scope, name: str) -> list[bytes]:
    """The value of each line of the header `name` (any case) as sent."""
    return [value for key, value in scope["headers"] if key.lower() == name.lower().encode()]


def _text(scope: Scope, name: str) -> list[str]:
    return [value.decode("latin-1") for value in _lines(scope, name)]


async def _refuse(send: Send, refused: Refused, challenges: list[str]) -> None:
    body = json.dumps({"error": str(refused)}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    headers += [(b"www-authenticate", challenge.encode()) for challenge in challenges]
    if refused.status == 405:
        headers.append((b"allow", b"POST"))
    await send({"type": "http.response.start", "status": refused.status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def http_app(config: Config, ledger: Engine) -> ASGIApp:
    """The streamable HTTP application at PATH behind serve's sign-in; stateless, so replicas need share nothing."""

    def uid_of(ctx: ServerRequestContext) -> str:
        request = ctx.request
        assert request is not None, "every HTTP request carries its Starlette request"
        return request.scope["state"][UID_KEY]

    server = build_server(config, ledger, uid_of)
    # the SDK's own Host check off (host 0.0.0.0): SignIn checks Host and Origin against web.allowed_hosts as
    # serve does, answering 403 and one sentence
    app = server.streamable_http_app(streamable_http_path=PATH, stateless_http=True, json_response=True,
                                     host="0.0.0.0")
    return signed_in(app, config)


def signed_in(app: ASGIApp, config: Config) -> SignIn:
    """`app` behind billing mcp's sign-in as configured: it answers to the hosts of web.allowed_hosts and of its
    public URLs (reports_url, mcp.resource), and takes the issuer's tokens where mcp.issuer is set."""
    return SignIn(app, config, Guard(config.web, (config.reports_url, config.mcp.resource)),
                  BearerSignIn(config.mcp) if config.mcp.issuer else None)


def serve_http(config: Config, host: str, port: int) -> None:
    """Run the HTTP server on uvicorn until SIGTERM or Ctrl-C; OSError when the port cannot be had."""
    _quiet_sdk()
    ledger = _read_only_ledger(config)
    sign_in = f"tokens of {config.mcp.issuer}" if config.mcp.auth == "oauth" else f"web.auth {config.web.auth}"
    log.info("billing mcp listening on http://%s:%d%s (%s)", host, port, PATH, sign_in)
    # proxy_headers off: the peer billing judges (security.Guard, web.trusted_proxies) is the TCP peer; uvicorn's
    # default took X-Forwarded-For from 127.0.0.1 as the peer, before billing could judge it
    uvicorn.run(http_app(config, ledger), host=host, port=port, log_level="warning", access_log=False,
                proxy_headers=False, server_header=False)
    log.info("billing mcp stopped")

