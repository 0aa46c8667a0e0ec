"""`billing serve`: the ledger, read-only, for everyone to look up their own costs.

A small Flask application, server-rendered with the report templates. Who is
asking comes from a trusted proxy's header (`web.auth: header`) or from a
login checked by an LDAP bind as the person (`web.auth: ldap`); what they may
see is `billing.web.access`, and how that is guarded `billing.web.security`.
Every page and the JSON API answer from `billing.publish.answers` and
`billing.publish.report` (sums by the database), as `billing report` and the
static pages do, so the numbers are theirs.
"""

from __future__ import annotations

import hmac
import logging
import resource
from dataclasses import replace
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
from billing.directory.ldap import WrongPassword, authenticate
from billing.directory.people import DirectoryError
from billing.ledger.database import LedgerError, open_ledger
from billing.ledger.read import completed
from billing.publish import answers
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
    ReportError,
    Subject,
    UnknownSubject,
    breakdown,
    build_report,
    known_names,
    report_range,
)
from billing.publish.report_formats import csv_text, html_table, json_text
from billing.web.access import Forbidden, Viewer, viewer
from billing.web.security import UID, Guard, LoginThrottle, Refused, check_csrf, csrf_token, login_key, shown_uid

log = logging.getLogger(__name__)

LONGEST_RANGE = 366  # days one question may span
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


def _day(name: str) -> date | None:
    """The query's day parameter `name`, None when absent; 400 naming it when it is no day."""
    value = request.args.get(name)
    if value is None or value == "":
        return None
    try:
        return parse_day(value)
    except NotADay as exc:
        raise Refused(400, f"{name}={exc}") from None


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
    """The application over the configured ledger."""
    web = config.web
    ledger = engine or open_ledger(web.database or config.database, key="web.database" if web.database else "database")
    guard = Guard(web, throttle)
    if web.metrics_token is not None:  # read now: a variable unset or empty, a file missing, is refused at start
        log.info("/metrics answers a scraper sending the token of %s", web.metrics_token_key)
    app = Flask(__name__)
    guard.protect(app)

    def current() -> Viewer:
        if "viewer" not in g:
            g.viewer = viewer(ledger, guard.identity(), web.admins)
        return g.viewer

    def spelled(subject: Subject) -> Subject:
        """The team or person as the ledger spells it: names match without regard to case, as uids do in LDAP,
        for every viewer alike."""
        if subject.name is None:
            return subject
        names = known_names(ledger, subject.kind)
        wanted = subject.name.casefold()
        found = subject.name if subject.name in names else next((n for n in names if n.casefold() == wanted), None)
        return Subject(subject.kind, found or subject.name)

    def asked_range() -> tuple[date, date]:
        """from= and to=, by default the month to yesterday as for `billing report`."""
        try:
            first, last = report_range(config.zone, _day("from"), _day("to"))
        except ReportError as exc:
            raise Refused(400, str(exc)) from None
        if (last - first).days >= LONGEST_RANGE:
            raise Refused(400, f"the range {first} to {last} is longer than {LONGEST_RANGE} days")
        return first, last

    def question(page: str) -> tuple[date, date, str | None, str]:
        """(first, last, by, format) of a page's query: from, to, and for a CSV download which table."""
        _only("from", "to", "by", "format")
        first, last = asked_range()
        form = request.args.get("format", "html")
        if form not in ("html", "csv"):
            raise Refused(400, f"format={form!r} is not html or csv")
        by = request.args.get("by")
        if by is not None and (form != "csv" or by not in PAGE_TABLES[page]):
            raise Refused(400, f"by= goes with format=csv and one of {', '.join(PAGE_TABLES[page])}")
        return first, last, by or PAGE_TABLES[page][0], form

    def page(name: str, subject: Subject, heading: str, waste_key: str, links: str | None = None) -> Response:
        """A page of a subject: the figures of the range's last day, the range's breakdowns and waste."""
        first, last, by, form = question(name)
        if form == "csv":
            answer = build_report(ledger, subject, first, last, by, config.currency)
            return Response(csv_text(answer), mimetype="text/csv", headers={
                "Content-Disposition": f'attachment; filename="billing-{name}-{by}-{first}-{last}.csv"'})
        try:
            reports = [(table, build_report(ledger, subject, first, last, table, config.currency))
                       for table in PAGE_TABLES[name]]
            tables = [(table, html_table(_shortened(answer))) for table, answer in reports if _broken_down(answer)]
            held = reports[0][1].held_before_running if reports else []  # the same range and subject in every table
            nothing = ""
        except UnknownSubject:  # someone with no costs at all still gets their (empty) page
            if subject.kind != "person":
                raise
            tables, held, nothing = [], [], f"the ledger holds no costs of namespaces owned by {subject.name}"
        shown = answers.page(ledger, config, subject, first, last, waste_key)
        return _html(render_template(
            "web.html.j2", viewer=current(), heading=heading, page=name, subject=subject, first=first, last=last,
            report=shown.figures, tables=tables, links=links, waste=_nones(shown.waste), waste_key=waste_key, held=held,
            reports_url=config.reports_url, nothing=nothing, csrf=csrf_token() if web.auth == "ldap" else "",
            today_missing=not shown.last_day_run, budget=shown.budget,
            price_notes=[price_change_note(*change) for change in shown.price_changes]))

    @app.errorhandler(Refused)
    def refused(error: Refused):
        return _error(error.status, str(error))

    @app.errorhandler(Forbidden)
    def forbidden(error: Forbidden):
        return _error(403, str(error))

    @app.errorhandler(UnknownSubject)
    def unknown(error: UnknownSubject):  # without the closest names, which would tell who else has costs
        return _error(404, error.plain)

    @app.errorhandler(ReportError)
    def unanswerable(error: ReportError):  # e.g. a range with costs in two currencies
        return _error(400, str(error))

    @app.errorhandler(LedgerError)
    def unavailable(error: LedgerError):
        log.error("%s", error)
        return _error(503, str(error))

    @app.errorhandler(HTTPException)
    def http_error(error: HTTPException):
        if error.code == 404:
            return _error(404, f"no page is at {request.path}")
        # werkzeug's descriptions are two sentences and more: the first says it
        return _error(error.code or 500, (error.description or error.name).split(". ")[0])

    def _error(status: int, sentence: str):
        """The sentence as it was said (it may start with a uid, whose case is kept), as JSON or a page; the page
        ends it with the one full stop."""
        sentence = sentence.rstrip(". ")
        if request.path.startswith("/api/"):
            return {"error": sentence}, status
        login = status == 401 and web.auth == "ldap"
        return _html(render_template("web_error.html.j2", status=status, sentence=sentence, login=login,
                                     csrf=csrf_token() if login else "", uid="", failed="")), status

    @app.after_request
    def headers(response: Response) -> Response:
        guard.add_headers(response)
        if request.path == "/healthz" and response.status_code == 200:
            return response  # the kubelet asks every few seconds
        who = g.viewer.uid if "viewer" in g else None
        log.info("%s %s %d", request.method, request.path, response.status_code,
                 extra={"method": request.method, "path": request.path, "status": response.status_code,
                        "uid": who, "remote_addr": guard.client_address()})
        return response

    @app.get("/healthz")
    def health():
        """Ready when the ledger answers; no identity needed (the kubelet's probe has none)."""
        _only()
        completed(ledger, date.today(), date.today())
        return Response("ok\n", mimetype="text/plain")

    @app.get("/metrics")
    def metrics():
        """Team, cluster and resource costs of the latest billed day for Prometheus (billing/publish/cost_metrics.py):
        aggregates, never a person's; only to a scraper sending the token web.metrics_token_env or _file names."""
        _only()
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
        figures = read_cost_figures(ledger, config)
        if figures is not None:
            add_cost_metrics(registry, figures)
        return Response(generate_latest(registry), mimetype=CONTENT_TYPE_LATEST)

    @app.get("/favicon.ico")
    def favicon():
        return Response(status=204)

    @app.get("/")
    def index():
        _only()
        current()
        return redirect("/me", code=303)

    @app.get("/me")
    def me():
        who = current()
        return page("me", spelled(who.person(who.uid)), f"Your costs, {who.uid}", "namespace")

    @app.get("/teams/<path:team>")
    def team(team: str):
        subject = spelled(current().team(team))
        return page("team", subject, f"Team {subject.name}", "owner")

    @app.get("/all")
    def everything():
        return page("all", current().everything(), "All teams", "team", links="team")

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
        current()
        found = next((team for team in known_names(ledger, "team") if slug(team) == name), None)
        if found is None:
            raise Refused(404, f"no team's page is named {name}.html")
        return redirect(f"/teams/{quote(found, safe='')}?from={_page_day(day)}&to={_page_day(day)}", code=303)

    @app.get("/api/v1/costs")
    def costs():
        """The JSON report of docs/spec.md "Command line": `team=` or `person=` narrows it; without them an admin gets all teams,
        anyone else their own costs."""
        _only("from", "to", "by", "team", "person")
        who = current()
        by = request.args.get("by")
        if by is not None and by not in API_GROUPINGS and not by.startswith(LABEL_PREFIX):
            raise Refused(400, f"by={by!r} is not one of {', '.join(API_GROUPINGS)} or {LABEL_PREFIX}NAME")
        by = breakdown(by, config.cost_labels)  # a label that is not a cost label: ReportError, 400
        if "team" in request.args and "person" in request.args:
            raise Refused(400, "give team= or person=, not both")
        if "team" in request.args:
            subject = who.team(request.args["team"])
        elif "person" in request.args:
            subject = who.person(request.args["person"])
        else:
            subject = who.everything() if who.admin else who.person(who.uid)
        first, last = asked_range()
        answer = build_report(ledger, spelled(subject), first, last, by, config.currency)
        return Response(json_text(answer), mimetype="application/json")

    if web.auth == "ldap":
        _login_routes(app, config, guard)
    return app


def _broken_down(report: Report) -> bool:
    """False for a workload table of a range that no workload row breaks down: it would repeat the namespaces."""
    return report.by != WORKLOAD or any(row[WORKLOAD] != NOT_BROKEN_DOWN for row in report.rows)


def _shortened(report: Report) -> Report:
    """A workload table of at most PAGE_WORKLOADS rows and one summing the others, so its total stays."""
    if report.by != WORKLOAD or len(report.rows) <= PAGE_WORKLOADS + 1:
        return report
    others = report.rows[PAGE_WORKLOADS:]
    summed = {column: sum(row[column] for row in others) for column in SUMS}
    return replace(report, rows=[*report.rows[:PAGE_WORKLOADS],
                                 {"namespace": "", WORKLOAD: f"{len(others)} other workloads (in the CSV)", **summed}])


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
        shown, client = shown_uid(uid), guard.client_address()
        keys = [f"user:{login_key(shown)}", f"address:{client}"]
        wait = guard.throttle.wait(keys)
        if wait > 0:
            log.warning("login of %r from %s refused: locked out", shown, client,
                        extra={"uid": shown, "remote_addr": client})
            raise Refused(429, f"too many failed logins for this user or address; try again in "
                               f"{max(1, round(wait / 60))} minute(s)")
        try:
            if not UID.fullmatch(uid):  # no directory holds it: not worth asking, nor logging whole
                raise WrongPassword(f"no user id has {len(uid)} characters or control characters")
            canonical = authenticate(config.directory, uid, request.form.get("password", ""))
        except WrongPassword as exc:
            guard.throttle.failed(keys)
            log.warning("login of %r from %s failed: %s", shown, client, shown_uid(str(exc)),
                        extra={"uid": shown, "remote_addr": client})
            return _html(render_template("web_error.html.j2", status=401, sentence="", login=True, csrf=csrf_token(),
                                         uid=shown, failed="Wrong user name or password.")), 401
        except DirectoryError as exc:
            log.error("login: %s", exc)
            raise Refused(503, "the directory cannot check passwords at the moment; try again later") from None
        session.clear()
        session.permanent = True
        session["uid"], session["id"] = canonical, guard.sessions.start()
        log.info("login of %s from %s", canonical, client,
                 extra={"uid": canonical, "remote_addr": client})
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
    a silent one after CHANNEL_TIMEOUT, and takes no body larger than a login form needs."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        soft = hard
    server = waitress.create_server(
        create_app(config), host=host, port=port, ident="billing", asyncore_use_poll=True,
        connection_limit=max(100, min(soft, MOST_CONNECTIONS) - 64), channel_timeout=CHANNEL_TIMEOUT,
        max_request_body_size=LARGEST_BODY)
    log.info("billing serve listening on http://%s:%d (web.auth %s)", host, port, config.web.auth)
    server.run()  # returns on KeyboardInterrupt, which SIGTERM raises (billing.cli)
    log.info("billing serve stopped")

