"""`billing mcp`: the ledger's tools (billing/web/tools.py) for assistants, over the Model Context Protocol.

Over stdio, for a person's own assistant, the viewer is the local user (`billing mcp --as UID`, else the login
name), seeing what `billing serve` would show them. That process runs with the caller's own configuration and so
with the ledger's credentials: it trusts the caller, as `billing report` does; the rules keep the assistant to the
person's figures but are no barrier against the person (docs/mcp.md). Over streamable HTTP (`--http`), run beside `billing serve`
behind the same proxy, the viewer is whom serve's sign-in names: the trusted proxy's header (`web.auth: header`), or
for `web.auth: ldap` an HTTP Basic user name and password checked by an LDAP bind as the person, counted by serve's
login throttle. A request without a viewer is refused before it reaches a tool.

Errors a tool meets (no such team, a day that is no day, a range too long, a team the viewer does not lead) come
back as tool errors of one sentence; an unknown team or person is named without the closest names, which would tell
who else has costs.
"""

from __future__ import annotations

import base64
import binascii
import functools
import json
import logging
from collections.abc import Callable
from importlib.metadata import version
from typing import Annotated, Any

import anyio.to_thread
import uvicorn
from mcp.server.mcpserver import Context, MCPServer
from mcp_types import CallToolResult, TextContent, ToolAnnotations
from pydantic import Field
from sqlalchemy import Engine
from starlette.types import ASGIApp, Receive, Scope, Send

from billing.config import Config
from billing.days import NotADay
from billing.directory.ldap import WrongPassword
from billing.errors import BillingError
from billing.ledger.database import open_ledger
from billing.publish.report import UnknownSubject
from billing.web.access import Forbidden, Viewer, viewer
from billing.web.security import Guard, Refused
from billing.web.tools import Tools

log = logging.getLogger(__name__)

PATH = "/mcp"  # where the HTTP server answers
UID_KEY = "billing_uid"  # the signed-in uid, in the ASGI scope's state, for the tools

Team = Annotated[str | None, Field(description="A team's name (a lead sees their teams, admins all).")]
Person = Annotated[str | None, Field(description="A person's uid (people see only themselves, admins all).")]
First = Annotated[str | None, Field(description="First day, YYYY-MM-DD (default: the first of the month of the last).")]
Last = Annotated[str | None, Field(description="Last day, YYYY-MM-DD, inclusive (default: yesterday).")]
Day = Annotated[str, Field(description="A day, YYYY-MM-DD.")]
Month = Annotated[str, Field(description="A month, YYYY-MM.")]
By = Annotated[str | None, Field(description="Sum per team, person, namespace, cluster, resource, gpu_model or day; "
                                             "below the namespace per workload or label:NAME of a cost label; "
                                             "none: the ledger's rows.")]

WHOSE = "Give team or person, or neither for your own costs (an admin: every team). "


def descriptions(currency: str) -> dict[str, str]:
    """What each tool answers, in which units and currency (the assistant reads these to choose a tool)."""
    money = f"Money is in {currency}, unrounded as the ledger holds it (round to cents to quote it)"
    hours = "quantities in resource-hours: gpu_hours in GPU-hours, cpu_core_hours in core-hours, memory_gib_hours in GiB-hours"
    return {
        "costs": f"What a person, a team or every team spent over a range of days, optionally summed per team, person, "
                 f"namespace, cluster, resource, GPU model, day, workload or cost label; the same document as "
                 f"`billing report --format json`, with a team's budget and the range's price changes. {WHOSE}"
                 f"{money}; {hours}.",
        "changes": f"What changed between two ranges of days and why: cost before and after per namespace, per "
                   f"workload and per resource (with hours and cost per hour, so that more hours tell apart from "
                   f"dearer hours), largest change first, and the price sets that came into force in between. {WHOSE}"
                   f"{money}; hours in resource-hours (GPU-h, core-h, GiB-h).",
        "waste": f"What was held but not used over a range (shown, never billed): idle GPU-hours and unused CPU "
                 f"core-hours, per namespace for a person, per owner for a team, per team for everyone; null where no "
                 f"day measured it. {WHOSE}Quantities in GPU-hours and core-hours, no money.",
        "budget": f"A team's month against its budget: budget, month to date, the month's forecast (and how it is "
                  f"made), shares used, days not billed yet; as of a day (default yesterday). For the team's leads "
                  f"and admins. {money}; shares as fractions (0.5 is 50 %).",
        "statement": f"A month's statement for finance, as `billing statement --format json`: per team its lines "
                     f"(list price, discounts, credits, unrequested shares, corrections, cost recovery) and total; "
                     f"a closed month as it was closed. A team's for its leads, every team's for admins. {money}.",
        "figure_source": f"Where a day's figures come from: the day's ledger rows of the subject (quantity × "
                         f"unit_price, less discounts: cost, as `billing report --from DAY --to DAY --format json`), "
                         f"the prices in force on each cluster that day, the billing rules, the run that wrote the day "
                         f"and its data coverage and self-audit. {WHOSE}{money}; unit prices per resource-hour.",
    }


def build_server(config: Config, ledger: Engine, uid_of: Callable[[Context], str]) -> MCPServer:
    """The MCP server of the tools, each answering for the viewer of `uid_of(ctx)` under serve's rules."""
    tools = Tools(ledger, config)
    said = descriptions(config.currency)
    server = MCPServer("billing", version=version("billing"), log_level="WARNING",
                       instructions="GPU/CPU chargeback from the billing ledger: read-only; each person sees their "
                                    "own costs, a team lead their teams', admins everything.")

    def who(ctx: Context) -> Viewer:
        return viewer(ledger, uid_of(ctx), config.web.admins)

    def one_sentence(tool: Callable[..., dict]) -> Callable[..., dict | CallToolResult]:
        """The tool, logged with who asked; its refusals and unanswerable questions tool errors of one sentence as
        the assistant reads them (a ToolError would come back prefixed with the SDK's "Error executing tool")."""

        @functools.wraps(tool)
        def answered(ctx: Context, **arguments: Any) -> dict | CallToolResult:
            uid, name = uid_of(ctx), tool.__name__
            try:
                found = tool(ctx, **arguments)
            except UnknownSubject as exc:  # without the closest names, which would tell who else has costs
                sentence = exc.plain
            except (BillingError, Forbidden, NotADay) as exc:
                sentence = str(exc)
            else:
                log.info("%s asked %s", uid, name, extra={"uid": uid, "tool": name})
                return found
            log.info("%s asked %s: %s", uid, name, sentence, extra={"uid": uid, "tool": name})
            return CallToolResult(content=[TextContent(type="text", text=sentence)], is_error=True)

        return answered

    def costs(ctx: Context, team: Team = None, person: Person = None, first_day: First = None,
              last_day: Last = None, by: By = None) -> dict:
        return tools.costs(who(ctx), team, person, first_day, last_day, by)

    def changes(ctx: Context, before_first_day: Day, before_last_day: Day, after_first_day: Day,
                after_last_day: Day, team: Team = None, person: Person = None) -> dict:
        return tools.changes(who(ctx), before_first_day, before_last_day, after_first_day, after_last_day,
                             team, person)

    def waste(ctx: Context, team: Team = None, person: Person = None, first_day: First = None,
              last_day: Last = None) -> dict:
        return tools.waste(who(ctx), team, person, first_day, last_day)

    def budget(ctx: Context, team: Annotated[str, Field(description="The team's name.")],
               as_of: Annotated[str | None, Field(description="The day, YYYY-MM-DD (default: yesterday).")] = None
               ) -> dict:
        return tools.budget(who(ctx), team, as_of)

    def statement(ctx: Context, month: Month, team: Team = None) -> dict:
        return tools.statement(who(ctx), month, team)

    def figure_source(ctx: Context, day: Day, team: Team = None, person: Person = None) -> dict:
        return tools.figure_source(who(ctx), day, team, person)

    read_only = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True,
                                open_world_hint=False)
    for tool in (costs, changes, waste, budget, statement, figure_source):
        server.add_tool(one_sentence(tool), name=tool.__name__, description=said[tool.__name__],
                        annotations=read_only, structured_output=False)
    return server


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
    build_server(config, ledger, lambda ctx: uid).run("stdio")


class SignIn:
    """ASGI middleware: the viewer's uid by serve's sign-in, into the scope for the tools; else 401 (429 for a
    locked-out login, 503 without a directory) and one sentence as JSON, before any tool is listed or called.
    Before the sign-in, as serve: 403 for a host or origin billing does not answer to, and 405 for anything but
    POST."""

    def __init__(self, app: ASGIApp, config: Config, guard: Guard) -> None:
        self.app, self.config, self.guard = app, config, guard

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        peer = (scope.get("client") or ("", 0))[0]
        client = self.guard.client_of(peer, ", ".join(_text(scope, "x-forwarded-for")))  # each proxy's line, in order
        try:
            self.guard.check_host(next(iter(_text(scope, "host")), None), next(iter(_text(scope, "origin")), None))
            if scope["method"] != "POST":  # the SDK's stateless transport would hold a GET's event stream open
                raise Refused(405, f"billing mcp answers POST only: it is stateless, with no event stream to open "
                                   f"and no session to end ({scope['method']})")
            uid = (await self._password_user(next(iter(_text(scope, "authorization")), ""), client)
                   if self.config.web.auth == "ldap"
                   else self.guard.proxy_user(_lines(scope, self.config.web.user_header), peer))
        except Refused as exc:
            log.info("%s %s %d", scope.get("method"), scope.get("path"), exc.status,
                     extra={"path": scope.get("path"), "status": exc.status, "remote_addr": client})
            await _refuse(send, exc, self.config.web.auth == "ldap")
            return
        scope.setdefault("state", {})[UID_KEY] = uid
        await self.app(scope, receive, send)

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


async def _refuse(send: Send, refused: Refused, basic: bool) -> None:
    body = json.dumps({"error": str(refused)}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if basic and refused.status == 401:
        headers.append((b"www-authenticate", b'Basic realm="billing", charset="UTF-8"'))
    if refused.status == 405:
        headers.append((b"allow", b"POST"))
    await send({"type": "http.response.start", "status": refused.status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def http_app(config: Config, ledger: Engine) -> ASGIApp:
    """The streamable HTTP application at PATH behind serve's sign-in; stateless, so replicas need share nothing."""

    def uid_of(ctx: Context) -> str:
        request = ctx.request_context.request
        assert request is not None, "every HTTP request carries its Starlette request"
        return request.scope["state"][UID_KEY]

    server = build_server(config, ledger, uid_of)
    # the SDK's own Host check off (host 0.0.0.0): SignIn checks Host and Origin against web.allowed_hosts as
    # serve does, answering 403 and one sentence
    app = server.streamable_http_app(streamable_http_path=PATH, stateless_http=True, json_response=True,
                                     host="0.0.0.0")
    return SignIn(app, config, Guard(config.web, config.reports_url))


def serve_http(config: Config, host: str, port: int) -> None:
    """Run the HTTP server on uvicorn until SIGTERM or Ctrl-C; OSError when the port cannot be had."""
    _quiet_sdk()
    ledger = _read_only_ledger(config)
    log.info("billing mcp listening on http://%s:%d%s (web.auth %s)", host, port, PATH, config.web.auth)
    # proxy_headers off: the peer billing judges (security.Guard, web.trusted_proxies) is the TCP peer; uvicorn's
    # default took X-Forwarded-For from 127.0.0.1 as the peer, before billing could judge it
    uvicorn.run(http_app(config, ledger), host=host, port=port, log_level="warning", access_log=False,
                proxy_headers=False, server_header=False)
    log.info("billing mcp stopped")

