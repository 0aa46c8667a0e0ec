"""`billing serve`: the ledger, read-only, for everyone to look up their own costs.

A small Flask application, server-rendered with the report templates. Who is
asking comes from a trusted proxy's header (`web.auth: header`) or from a
login checked by an LDAP bind as the person (`web.auth: ldap`); what they may
see is `billing.web.access`, and how that is guarded `billing.web.security`.
Every page, CSV download and the JSON API answer from `billing.publish.answers`
(sums by the database), as `billing report` and the static pages do, so the
numbers are theirs: the API's JSON and a table's CSV are `billing report`'s for
the same question.
"""

from __future__ import annotations

import hmac
import logging
import resource
from dataclasses import dataclass, replace
from datetime import date
from urllib.parse import quote

import pandas as pd
import waitress
from flask import Flask, Response, g, redirect, request, session
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from sqlalchemy import Engine
from werkzeug.exceptions import HTTPException

from billing.config import Config, ConfigError
from billing.days import NotADay, parse_day
from billing.directory.ldap import WrongPassword
from billing.ledger.database import LedgerError, open_ledger
from billing.ledger.read import completed
from billing.publish import answers, asked
from billing.publish.asked import ReportError
from billing.publish.cost_metrics import add_cost_metrics, read_cost_figures
from billing.publish.formatting import price_change_note
from billing.publish.links import slug
from billing.publish.pages import render_template
from billing.publish.report import (
    LABEL_PREFIX,
    NOT_BROKEN_DOWN,
    SUMS,
    WORKLOAD,
    Report,
    Subject,
    UnknownSubject,
    known_names,
)
from billing.publish.report_formats import csv_text, html_table, json_text
from billing.web.access import Forbidden, Viewer, viewer
from billing.web.access import spelled as spelled_in
from billing.web.security import Guard, LoginThrottle, Refused, check_csrf, csrf_token, shown_uid

log = logging.getLogger(__name__)

MOST_CONNECTIONS = 20_000  # connections waitress may hold open (fewer where the process may open fewer files)
CHANNEL_TIMEOUT = 30  # seconds a connection may stay silent
LARGEST_BODY = 64 * 1024  # bytes of a request body: only the login and logout forms are posted
API_GROUPINGS = ("namespace", "team", "person", WORKLOAD)  # and label:NAME of a configured cost label
PAGE_WORKLOADS = 20  # a page's workload table shows the most expensive ones, the rest in one row; CSV has all
PAGE_TABLES = {  # page -> the breakdowns it shows of the range, each also a CSV download
    "me": ("namespace", "cluster", WORKLOAD),
    "team": ("person", "namespace", WORKLOAD),
    "all": ("team", "cluster"),
}


def _page_day(value: str) -> date:
    """The day of a static page's address; 404 for anything else."""
    try:
        return parse_day(value)
    except NotADay:
        raise Refused(404, f"no day's pages are at {value!r}") from None


def _only(*allowed: str) -> None:
    """Refuse query parameters a route does not know, and one given twice (`from=A&from=B`): nothing is silently
    ignored."""
    unknown = sorted(set(request.args) - set(allowed))
    if unknown:
        raise Refused(400, f"unknown query parameter {unknown[0]!r} (this address takes {', '.join(allowed) or 'none'})")
    repeated = sorted(name for name, values in request.args.lists() if len(values) > 1)
    if repeated:
        raise Refused(400, f"the query parameter {repeated[0]!r} is given {len(request.args.getlist(repeated[0]))} "
                           "times; give it once")


def create_app(config: Config, engine: Engine | None = None, throttle: LoginThrottle | None = None) -> Flask:
    """The application over the configured ledger: its routes, each answered by `Site`."""
    web = config.web
    ledger = engine or open_ledger(web.database or config.database, key="web.database" if web.database else "database")
    guard = Guard(web, (config.reports_url,), throttle)
    if web.metrics_token is not None:  # read now: a variable unset or empty, a file missing, is refused at start
        log.info("/metrics answers a scraper sending the token of %s", web.metrics_token_key)
    app = Flask(__name__)
    guard.protect(app)
    site = Site(config, ledger, guard)
    _error_pages(app, config)
    app.after_request(site.logged)

    @app.before_request
    def named_host():
        """Before anyone is signed in: a host billing answers to, from no other site's page. The probe, the
        scraper (its token is no browser's to send) and the icon name the pod's address, not a host."""
        if request.path not in ("/healthz", "/metrics", "/favicon.ico"):
            guard.check_host(request.headers.get("Host"), request.headers.get("Origin"))

    @app.get("/healthz")
    def health():
        """Ready when the ledger answers; no identity needed (the kubelet's probe has none)."""
        _only()
        completed(ledger, date.today(), date.today())
        return Response("ok\n", mimetype="text/plain")

    @app.get("/metrics")
    def metrics():
        _only()
        return site.metrics()

    @app.get("/favicon.ico")
    def favicon():
        return Response(status=204)

    @app.get("/")
    def index():
        _only()
        site.viewer()
        return redirect("/me", code=303)

    @app.get("/me")
    def me():
        who = site.viewer()
        return site.page("me", site.spelled(who.person(who.uid)), f"Your costs, {who.uid}", "namespace")

    @app.get("/teams/<path:team>")
    def team(team: str):
        subject = site.spelled(site.viewer().team(team))
        return site.page("team", subject, f"Team {subject.name}", "owner")

    @app.get("/all")
    def everything():
        return site.page("all", site.viewer().everything(), "All teams", "team", links="team")

    @app.get("/index.html")
    def static_index():  # the static reports' archive: here, one's own costs, as at /
        return redirect("/me", code=303)

    @app.get("/<day>/index.html")
    def static_day(day: str):
        """The all-teams page of a day at its address in the static reports (emails link there, and reports_url
        may be this server): the same day here."""
        return redirect(f"/all?from={_page_day(day)}&to={_page_day(day)}", code=303)

    @app.get("/<day>/teams/<name>.html")
    def static_team(day: str, name: str):
        """A team's page of a day at its static address (links.team_page: the team's slug); signed in only, so
        that nobody learns team names from 303 against 404."""
        site.viewer()
        found = next((team for team in known_names(ledger, "team") if slug(team) == name), None)
        if found is None:
            raise Refused(404, f"no team's page is named {name}.html")
        return redirect(f"/teams/{quote(found, safe='')}?from={_page_day(day)}&to={_page_day(day)}", code=303)

    @app.get("/api/v1/costs")
    def costs():
        """The JSON of `billing report --format json` (docs/serve.md): `team=` or `person=` narrows it; without
        them an admin gets all teams, anyone else their own costs."""
        _only("from", "to", "by", "team", "person")
        return site.costs()

    if web.auth == "ldap":
        _login_routes(app, config, guard)
    return app


@dataclass(frozen=True)
class Site:
    """What a request is answered from: the config, the ledger and the guard that says who is asking. Each
    method reads the request's question, asks `billing.publish.answers` and shows its answer."""

    config: Config
    ledger: Engine
    guard: Guard

    def viewer(self) -> Viewer:
        """Who is asking and what they may see, once per request."""
        if "viewer" not in g:
            g.viewer = viewer(self.ledger, self.guard.identity(), self.config.web.admins)
        return g.viewer

    def spelled(self, subject: Subject) -> Subject:
        return spelled_in(self.ledger, subject)

    def asked_range(self) -> tuple[date, date]:
        """from= and to=, by default the month to yesterday as for `billing report`; ReportError (400) naming
        them."""
        return asked.bounded_range(self.config.zone, request.args.get("from"), request.args.get("to"), ("from", "to"))

    def page(self, name: str, subject: Subject, heading: str, waste_key: str, links: str | None = None) -> Response:
        """A page of a subject (the figures of the range's last day, the range's breakdowns and waste), or one of
        its tables as CSV: the CSV of `billing report --format csv --by` that table."""
        _only("from", "to", "by", "format")
        first, last = self.asked_range()
        form = request.args.get("format", "html")
        if form not in ("html", "csv"):
            raise Refused(400, f"format={form!r} is not html or csv")
        by = request.args.get("by")
        if by is not None and (form != "csv" or by not in PAGE_TABLES[name]):
            raise Refused(400, f"by= goes with format=csv and one of {', '.join(PAGE_TABLES[name])}")
        config = self.config
        if form == "csv":
            by = by or PAGE_TABLES[name][0]
            answer = answers.costs(self.ledger, config, subject, first, last, by)
            return Response(csv_text(answer), mimetype="text/csv", headers={
                "Content-Disposition": f'attachment; filename="billing-{name}-{by}-{first}-{last}.csv"'})
        shown = answers.page(self.ledger, config, subject, first, last, waste_key, PAGE_TABLES[name])
        tables = [(table.by, html_table(_shortened(table))) for table in shown.tables or [] if _broken_down(table)]
        nothing = "" if shown.tables is not None else f"the ledger holds no costs of namespaces owned by {subject.name}"
        held = shown.tables[0].held_before_running if shown.tables else []  # the same range and subject in every table
        energy = shown.tables[0].energy if shown.tables else []  # likewise: kWh and carbon beside the cost
        return _html(render_template(
            "web.html.j2", viewer=self.viewer(), heading=heading, page=name, subject=subject, first=first, last=last,
            report=shown.figures, tables=tables, links=links, waste=_nones(shown.waste), waste_key=waste_key, held=held,
            reports_url=config.reports_url, nothing=nothing, csrf=csrf_token() if config.web.auth == "ldap" else "",
            today_missing=not shown.last_day_run, budget=shown.budget, allocations=shown.allocations,
            energy=energy,
            price_notes=[price_change_note(*change) for change in shown.price_changes]))

    def costs(self) -> Response:
        """The API's answer: whose costs (team=, person=, else an admin's all teams or one's own), by what, when."""
        who = self.viewer()
        by = request.args.get("by")
        if by is not None and by not in API_GROUPINGS and not by.startswith(LABEL_PREFIX):
            raise Refused(400, f"by={by!r} is not one of {', '.join(API_GROUPINGS)} or {LABEL_PREFIX}NAME")
        by = asked.breakdown(by, self.config.cost_labels)  # a label that is not a cost label: ReportError, 400
        subject = who.asked(asked.subject(request.args.get("team"), request.args.get("person"),
                                          names=("team=", "person=")))
        first, last = self.asked_range()
        answer = answers.costs(self.ledger, self.config, self.spelled(subject), first, last, by)
        return Response(json_text(answer), mimetype="application/json")

    def metrics(self) -> Response:
        """Team, cluster and resource costs of the latest billed day for Prometheus (billing/publish/cost_metrics.py):
        aggregates, never a person's; only to a scraper sending the token web.metrics_token_env or _file names."""
        web = self.config.web
        try:
            token = web.metrics_token  # read at each scrape: a mounted Secret may be rotated
        except ConfigError as exc:  # its file gone since the start: the log says which, the scraper that it failed
            log.error("/metrics cannot read its token: %s", exc)
            raise Refused(503, "/metrics cannot read its token at the moment; the server's log says why") from None
        if token is None:
            raise Refused(404, "no metrics here: web.metrics_token_env or web.metrics_token_file is not set")
        if not hmac.compare_digest(request.headers.get("Authorization", "").encode(), f"Bearer {token}".encode()):
            raise Refused(401, f"/metrics needs the bearer token of {web.metrics_token_key}")
        registry = CollectorRegistry()
        figures = read_cost_figures(self.ledger, self.config)
        if figures is not None:
            add_cost_metrics(registry, figures)
        return Response(generate_latest(registry), mimetype=CONTENT_TYPE_LATEST)

    def logged(self, response: Response) -> Response:
        """Every answer with the security headers, logged with who asked (the kubelet's probes are not)."""
        self.guard.add_headers(response)
        if request.path == "/healthz" and response.status_code == 200:
            return response  # the kubelet asks every few seconds
        who = g.viewer.uid if "viewer" in g else None
        log.info("%s %s %d", request.method, request.path, response.status_code,
                 extra={"method": request.method, "path": request.path, "status": response.status_code,
                        "uid": who, "remote_addr": self.guard.client_address()})
        return response


def _error_pages(app: Flask, config: Config) -> None:
    """Every refusal as one sentence with its status: JSON under /api/, else a page (with the login form where a
    login would help)."""

    def said(status: int, sentence: str):
        """The sentence as it was said (it may start with a uid, whose case is kept), as JSON or a page; the page
        ends it with the one full stop."""
        sentence = sentence.rstrip(". ")
        if request.path.startswith("/api/"):
            return {"error": sentence}, status
        login = status == 401 and config.web.auth == "ldap"
        return _html(render_template("web_error.html.j2", status=status, sentence=sentence, login=login,
                                     csrf=csrf_token() if login else "", uid="", failed="")), status

    @app.errorhandler(Refused)
    def refused(error: Refused):
        return said(error.status, str(error))

    @app.errorhandler(Forbidden)
    def forbidden(error: Forbidden):
        return said(403, str(error))

    @app.errorhandler(UnknownSubject)
    def unknown(error: UnknownSubject):  # without the closest names, which would tell who else has costs
        return said(404, error.plain)

    @app.errorhandler(ReportError)
    def unanswerable(error: ReportError):  # e.g. a range with costs in two currencies
        return said(400, str(error))

    @app.errorhandler(LedgerError)
    def unavailable(error: LedgerError):
        log.error("%s", error)
        return said(503, str(error))

    @app.errorhandler(HTTPException)
    def http_error(error: HTTPException):
        if error.code == 404:
            return said(404, f"no page is at {request.path}")
        # werkzeug's descriptions are two sentences and more: the first says it
        return said(error.code or 500, (error.description or error.name).split(". ")[0])


def _broken_down(report: Report) -> bool:
    """False for a workload table of a range that no workload row breaks down: it would repeat the namespaces."""
    return report.by != WORKLOAD or any(row[WORKLOAD] != NOT_BROKEN_DOWN for row in report.rows)


def _shortened(report: Report) -> Report:
    """A workload table of at most PAGE_WORKLOADS rows and one summing the others (per currency), so its totals
    stay."""
    if report.by != WORKLOAD or len(report.rows) <= PAGE_WORKLOADS + 1:
        return report
    others = report.rows[PAGE_WORKLOADS:]
    parts = {currency: [row for row in others if report.currency_of(row) == currency]
             for currency in sorted({report.currency_of(row) for row in others})}
    return replace(report, rows=[*report.rows[:PAGE_WORKLOADS], *(
        {"namespace": "", WORKLOAD: f"{len(part)} other workloads (in the CSV)", "currency": currency,
         **{column: sum(row[column] for row in part) for column in SUMS}} for currency, part in parts.items())])


def _nones(frame: pd.DataFrame) -> list[dict]:
    """Records with None where a measure is NaN (the templates show a dash)."""
    return [{k: None if pd.isna(v) else v for k, v in row.items()} for row in frame.to_dict("records")]


def _html(text: str) -> Response:
    return Response(text, mimetype="text/html")


def _login_routes(app: Flask, config: Config, guard: Guard) -> None:
    """The login form and logout, for `web.auth: ldap`; failures count per user and per client address."""

    @app.get("/login")
    def login_form():
        _only()
        return _html(render_template("web_error.html.j2", status=200, sentence="", login=True, csrf=csrf_token(),
                                     uid="", failed=""))

    @app.post("/login")
    def login():
        check_csrf()
        uid = request.form.get("uid", "").strip()
        try:
            canonical = guard.sign_in(config.directory, uid, request.form.get("password", ""), guard.client_address())
        except WrongPassword:
            return _html(render_template("web_error.html.j2", status=401, sentence="", login=True, csrf=csrf_token(),
                                         uid=shown_uid(uid), failed="Wrong user name or password.")), 401
        session.clear()
        session.permanent = True
        session["uid"], session["id"] = canonical, guard.sessions.start()
        return redirect("/me", code=303)

    @app.post("/logout")
    def logout():
        check_csrf()
        guard.sessions.end(session.get("id", ""))
        session.clear()
        return redirect("/login", code=303)


def serve(config: Config, host: str, port: int) -> None:
    """Run the application on waitress until SIGTERM or Ctrl-C; OSError when the port cannot be had.

    waitress reads requests without a thread per connection, but by default takes only 100 connections
    (and select() none past descriptor 1,024): 110 clients that never finish their headers stopped it. So it
    may hold as many connections as the process may open files (raised to its hard limit), polls them, drops
    a silent one after CHANNEL_TIMEOUT, and takes no body larger than a login form needs. The peer it hands on is
    the TCP peer, and the proxy headers are left as they came, for Guard to judge."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        soft = hard
    server = waitress.create_server(
        create_app(config), host=host, port=port, ident="billing", asyncore_use_poll=True,
        connection_limit=max(100, min(soft, MOST_CONNECTIONS) - 64), channel_timeout=CHANNEL_TIMEOUT,
        max_request_body_size=LARGEST_BODY,
        # the forwarded headers reach billing as sent: security.Guard believes them from web.trusted_proxies only
        # (waitress' default dropped X-Forwarded-For and -Proto from every peer, proxies included)
        trusted_proxy=None, clear_untrusted_proxy_headers=False)
    log.info("billing serve listening on http://%s:%d (web.auth %s)", host, port, config.web.auth)
    server.run()  # returns on KeyboardInterrupt, which SIGTERM raises (billing.cli)
    log.info("billing serve stopped")

