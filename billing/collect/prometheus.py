"""Asking Prometheus: the HTTP API with retries, or recorded answers.

The collection code only sees `PrometheusSource`: two methods that return the
`result` list of Prometheus' JSON answer. `LivePrometheus` asks a server with
a plain `requests` session (the query in a form-encoded POST body, so a long
one stays out of the URL; bearer token, CA file, timeout, urllib3's retries
with backoff on connection errors, timeouts, 429 and 5xx); `ReplayPrometheus`
(billing/collect/replay.py) reads answers recorded from a real server earlier, which
is how the demo runs without one. `buildinfo` is what billing/collect/stores.py reads
which store answers from.

However many days a backfill collects at once, and however many threads
each uses, a store URL is asked at most `max_queries_in_flight` queries at a
time by the process (one semaphore per URL).

An answer that says it is incomplete is refused: Prometheus answers
"success" with `warnings` when a remote-read store was out of reach (Thanos
does the same for a partial response, VictoriaMetrics sets `isPartial`), and
a bill from such an answer would be quietly too low. Thanos is asked not to
give one at all (`partial_response=false`).
"""

from __future__ import annotations

import json
import logging
import os
import re
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Protocol, TypeGuard, TypeVar

import requests
import urllib3
from requests.adapters import HTTPAdapter
from urllib3.exceptions import NewConnectionError
from urllib3.exceptions import TimeoutError as Urllib3Timeout
from urllib3.util.retry import Retry

from billing.config import PrometheusConfig, untrusted_certificate
from billing.errors import RunFailed

log = logging.getLogger(__name__)
T = TypeVar("T")

RETRY_STATUSES = (429, 500, 502, 503, 504)
# Thanos Query: fail rather than answer without an unreachable store, and merge HA replicas. Prometheus,
# Mimir and VictoriaMetrics ignore parameters they do not know, so every query carries them.
COMPLETE_ANSWERS = {"partial_response": "false", "dedup": "true"}
# Answers asked for uncompressed: requests accepts gzip by default, and Prometheus then compresses every answer, which
# cost it 5 to 9% of its CPU on a 20,000-pod night (docs/performance.md). A store across a slow link can be asked
# for compressed answers again through clusters[].prometheus.headers (Accept-Encoding: gzip).
UNCOMPRESSED = {"Accept-Encoding": "identity"}


class PrometheusError(RunFailed):
    """A query could not be answered; the message names cluster, URL and cause."""


class _PartialAnswer(Exception):
    """An answer that says it is incomplete; `_ask` names the server."""


def _result(response: requests.Response, largest: int, deadline: float) -> object:
    """The `result` of an answer; Prometheus' own reason for an error, and answers that say they are incomplete.

    It sees the answer urllib3's retries ended with; an answer that is not
    JSON at all gives None, and the caller says so. An answer of more than
    `largest` bytes is refused as it arrives, before it is parsed, and one
    still arriving at `deadline` (time.monotonic) is a timeout.
    """
    if response.status_code >= 400:
        raise _Rejected(response.status_code, _error_text(response))
    try:
        body = json.loads(_content(response, largest, deadline).decode(), object_hook=_labels_shared)
    except ValueError:  # not JSON, or not UTF-8
        return None
    if not isinstance(body, dict):
        return None
    if body.get("warnings") or body.get("isPartial") is True:
        raise _PartialAnswer("; ".join(map(str, body.get("warnings") or ["isPartial is true"])))
    data = body.get("data")
    return data.get("result") if isinstance(data, dict) else None


def _content(response: requests.Response, largest: int, deadline: float) -> bytearray:
    """The answer's body, read piece by piece; _TooLarge past `largest` bytes (decoded). The timeout of requests
    bounds each read from the socket, so a server (or a proxy) that sends its answer a few bytes at a time would
    hold the night for as long as it likes: past `deadline` it is a timeout."""
    body = bytearray()
    for piece in _arriving(response):
        body += piece
        if len(body) > largest:
            response.close()
            raise _TooLarge()
        if time.monotonic() > deadline:
            response.close()
            raise _StillArriving()
    return body


def _arriving(response: requests.Response) -> Iterator[bytes]:
    """The body as it arrives, decoded: whatever one read from the socket brought (urllib3's read1), where
    iter_content waits for a whole piece; urllib3's failures as requests names them (requests.models)."""
    try:
        while piece := response.raw.read1(1 << 20, decode_content=True):
            yield piece
    except urllib3.exceptions.ReadTimeoutError as exc:
        raise requests.exceptions.ReadTimeout(exc) from None
    except (urllib3.exceptions.ProtocolError, urllib3.exceptions.DecodeError) as exc:
        raise requests.exceptions.ChunkedEncodingError(exc) from None
    except urllib3.exceptions.SSLError as exc:
        raise requests.exceptions.SSLError(exc) from None


class _Rejected(Exception):
    """An error answer: its status and reason in one line; `_call` names the server and the key to fix."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(f"HTTP {status}: {reason}")
        self.status = status

    @property
    def no_access(self) -> bool:
        """The server (or a proxy in front) refused the credentials, or their absence. nginx answers a missing or
        refused client certificate 400 "No required SSL certificate was sent" / "The SSL certificate error"."""
        return self.status in (401, 403) or (self.status == 400 and "SSL certificate" in str(self))


class _TooLarge(Exception):
    """An answer larger than a run may hold; `_call` names the server and the limit."""


class _StillArriving(Exception):
    """An answer still arriving when the query's timeout ran out; `_call` names the server and the key."""


_TITLE = re.compile(r"<title>(.*?)</title>", re.IGNORECASE | re.DOTALL)


def _error_text(response: requests.Response) -> str:
    """The `error` of Prometheus' JSON; else of a proxy's HTML page its title only (the page is no sentence);
    else the first line of a short text (Mimir's "no org id"), at most 200 characters; else the status's name."""
    try:
        return str(response.json()["error"])
    except (ValueError, KeyError, TypeError):
        pass
    text = response.text.strip()
    if text.startswith("<") or "html" in response.headers.get("Content-Type", ""):
        title = _TITLE.search(text)
        text = title[1] if title else ""
    line = " ".join(text.splitlines()[0].split()) if text else ""
    return _short(line, 200) if line else response.reason


class PrometheusSource(Protocol):
    def instant(self, query: str, at: float) -> list[dict]: ...

    def range(self, query: str, start: float, end: float, step: float) -> list[dict]: ...

    def buildinfo(self) -> tuple[dict, dict[str, str]]: ...


_IN_FLIGHT: dict[str, threading.BoundedSemaphore] = {}
_IN_FLIGHT_LOCK = threading.Lock()


def in_flight(url: str, limit: int) -> threading.BoundedSemaphore:
    """The process's one semaphore for a store URL: however many days are billed at once, and by however many
    threads each, the store is asked at most `limit` queries at a time (the first caller's limit)."""
    with _IN_FLIGHT_LOCK:
        return _IN_FLIGHT.setdefault(url, threading.BoundedSemaphore(limit))


class LivePrometheus:
    """One Prometheus server (or Thanos/Mimir/VictoriaMetrics query endpoint)."""

    def __init__(self, cluster: str, config: PrometheusConfig, backoff: float = 1.0):
        self.cluster = cluster
        self.url = config.url.rstrip("/")
        self.timeout = config.timeout
        self.attempts = config.retries + 1
        self.largest = config.max_answer_mib * 2**20
        self._in_flight = in_flight(self.url, config.max_queries_in_flight)
        self.config = config
        self.where = f"Prometheus of cluster {cluster} at {self.url}"  # how every sentence of it begins
        self._session = _StoreSession(config.headers)
        # given with each request: a session's own `verify` loses to REQUESTS_CA_BUNDLE in the environment
        self._verify: str | bool = config.ca_file or True
        if config.bearer_token:
            self._session.headers["Authorization"] = f"Bearer {config.bearer_token}"
        self._session.auth = config.basic_auth
        if config.cert_file:
            self._session.cert = (config.cert_file, config.key_file)
        retry = Retry(
            total=config.retries,
            backoff_factor=backoff,
            status_forcelist=RETRY_STATUSES,
            allowed_methods=frozenset({"GET", "POST"}),
            respect_retry_after_header=True,
        )
        for scheme in ("http://", "https://"):
            self._session.mount(scheme, HTTPAdapter(max_retries=retry))

    def instant(self, query: str, at: float) -> list[dict]:
        return self._ask("query", query, {"time": at})

    def range(self, query: str, start: float, end: float, step: float) -> list[dict]:
        return self._ask("query_range", query, {"start": start, "end": end, "step": step})

    def buildinfo(self) -> tuple[dict, dict[str, str]]:
        """The `data` of /api/v1/status/buildinfo and the answer's headers (stores.engine_of reads which
        store it is from both). A store without the page (a proxy in front, an old Thanos) gives ({}, its
        headers): nothing is known of it. One that cannot be reached fails like a query, since how the
        queries are written depends on the answer."""
        url = f"{self.url}/api/v1/status/buildinfo"
        response = self._call(url, lambda: self._session.get(url, timeout=self.timeout, verify=self._verify))
        if not response.ok:
            refused = _Rejected(response.status_code, _error_text(response))
            if refused.no_access:  # every query would be refused alike
                raise PrometheusError(self._rejected(refused, url))
            log.warning("cluster %s: %s has no build information (%s); querying it as Prometheus 2",
                        self.cluster, self.url, refused)
            return {}, dict(response.headers)
        try:
            data = response.json().get("data")
        except (ValueError, AttributeError):
            data = None
        return (data if isinstance(data, dict) else {}), dict(response.headers)

    def _ask(self, endpoint: str, query: str, params: dict[str, float]) -> list[dict]:
        """POST the query form-encoded (a long query stays out of the URL, whose length proxies limit)."""
        form = {"query": query, **params, **COMPLETE_ANSWERS}
        url = f"{self.url}/api/v1/{endpoint}"

        def answer() -> object:
            deadline = time.monotonic() + self.timeout
            return _result(self._session.post(url, data=form, timeout=self.timeout, stream=True, verify=self._verify),
                           self.largest, deadline)

        result = self._call(query, answer)
        where = self.where
        if not _is_result(result):
            raise PrometheusError(f"{where} answered something that is not a Prometheus JSON result")
        # an instant query may answer a range of values (a range selector asked at one instant); a range query
        # that answers single values is no answer to what was asked
        if endpoint == "query_range" and any("values" not in series for series in result):
            raise PrometheusError(f"{where} answered a range query with an instant vector")
        for series in result:
            for _, value in series["values"] if "values" in series else [series["value"]]:
                try:
                    float(value)
                except (TypeError, ValueError):
                    raise PrometheusError(f"{where} answered a sample value that is no number ({value!r}, series "
                                          f"{_short(repr(series['metric']), 200)}): query {_short(query)}") from None
        return result

    def _call(self, query: str, ask: Callable[[], T]) -> T:
        """ask(), its failures as one sentence naming cluster, server and cause."""
        where, key = self.where, self.config.key
        try:
            with self._in_flight:
                return ask()
        except _PartialAnswer as exc:
            raise PrometheusError(
                f"{where} answered only in part ({exc}), so the bill would be too low; refusing it "
                f"(query: {_short(query)})"
            ) from None
        except requests.exceptions.RetryError as exc:
            raise PrometheusError(
                f"{where} kept failing after retries ({_reason(exc)}): the server behind {key('url')} is failing "
                f"or overloaded; {key('retries')} ({self.attempts - 1}) sets how often a query is asked again, with "
                f"backoff, and {key('timeout')} ({self.timeout:g} s) how long each attempt may take") from None
        except requests.exceptions.SSLError as exc:
            raise PrometheusError(f"{where}: TLS failed ({_reason(exc)}){self._tls_fix(str(exc))}") from None
        except (requests.exceptions.Timeout, requests.exceptions.ConnectionError) as exc:
            if _timed_out(exc):
                raise PrometheusError(
                    f"{where} did not answer within the {self.timeout:g} s timeout in {self.attempts} "
                    f"attempt(s) (query: {_short(query)}); {key('timeout')} and retries allow it more"
                ) from None
            raise PrometheusError(f"{where} is unreachable ({_reason(exc)}); the store is down or {key('url')} "
                                  "is wrong") from None
        except _Rejected as exc:
            raise PrometheusError(self._rejected(exc, query)) from None
        except _StillArriving:
            raise PrometheusError(
                f"{where} was still sending its answer when the {self.timeout:g} s timeout ran out (query: "
                f"{_short(query)}); a proxy in between may be holding it back; {key('timeout')} allows it more"
            ) from None
        except _TooLarge:
            raise PrometheusError(
                f"{where} answered more than the {self.largest // 2**20} MiB one answer may take "
                f"({key('max_answer_mib')}), which a run would need many times over to read; raise it "
                f"where the job has the memory (query: {_short(query)})") from None
        except requests.exceptions.RequestException as exc:  # e.g. the connection broke off mid-answer
            raise PrometheusError(f"{where} failed to answer ({_reason(exc)})") from None

    def _rejected(self, exc: _Rejected, query: str) -> str:
        """The sentence for an error answer: for one refusing access, which keys send this cluster's
        credentials; for a 404, that `url` does not lead to the API."""
        where = self.where
        if exc.no_access:
            return f"{where} refused access ({exc}): {self._credentials()}"
        if exc.status == 404:
            return (f"{where} has no Prometheus API there ({exc}): {self.config.key('url')} must be the address "
                    "/api/v1 follows, with any path prefix (Mimir's /prometheus, a proxy's or --web.route-prefix)")
        return f"{where} rejected the query {_short(query)}: {exc}"

    def _credentials(self) -> str:
        """Which keys of the cluster send what it identifies itself with, or which could."""
        key, config = self.config.key, self.config
        sent = [f"{key(name)} {getattr(config, name)}" for name in
                ("bearer_token_env", "bearer_token_file", "basic_auth_user", "basic_auth_password_env",
                 "basic_auth_password_file") if getattr(config, name)]
        sent += [f"{key('headers')} {', '.join(config.headers)}"] if config.headers else []
        sent += [f"{key('cert_file')} {config.cert_file}"] if config.cert_file else []
        if sent:
            return f"check the credentials this cluster sends ({'; '.join(sent)})"
        return (f"this cluster sends none; set {key('bearer_token_env')} or _file, {key('basic_auth_user')} and "
                f"basic_auth_password_env or _file, {key('headers')} (an API key, a tenant's X-Scope-OrgID), or "
                f"{key('cert_file')} and key_file")

    def _tls_fix(self, failure: str) -> str:
        """'; ' and what to set for a TLS failure: the CA for a certificate that did not verify, the client certificate
        for one the server refused (its alert); '' for others (a server that speaks no TLS)."""
        key = self.config.key
        if "mismatch" in failure:
            return f"; the server's certificate does not name the host of {key('url')}"
        if "CERTIFICATE_VERIFY_FAILED" in failure:
            bundle = os.environ.get("REQUESTS_CA_BUNDLE")  # requests trusts it where ca_file is unset
            return "; " + untrusted_certificate(self.config, f"the bundle REQUESTS_CA_BUNDLE names, {bundle},"
                                                if bundle else "the system's CAs")
        if "alert" in failure.lower():
            return f"; the server refused the client certificate, which {key('cert_file')} and key_file give"
        return ""


class _StoreSession(requests.Session):
    """A session that drops the store's own `headers` where requests drops Authorization: on a redirect to another
    host. An API key in them is for the configured store only."""

    def __init__(self, headers: dict[str, str]) -> None:
        super().__init__()
        self.headers.update({**UNCOMPRESSED, **headers})
        self.own = list(headers)

    def rebuild_auth(self, prepared_request: requests.PreparedRequest, response: requests.Response) -> None:
        if response.request.url and prepared_request.url and self.should_strip_auth(
                response.request.url, prepared_request.url):
            for name in self.own:
                prepared_request.headers.pop(name, None)
        super().rebuild_auth(prepared_request, response)


def _timed_out(exc: requests.exceptions.RequestException) -> bool:
    """True for a timeout, also one that urllib3's retries wrapped into a ConnectionError."""
    reason = getattr(exc.args[0] if exc.args else None, "reason", None)
    refused = isinstance(reason, NewConnectionError)  # urllib3 makes it a kind of timeout, for history's sake
    return isinstance(exc, requests.exceptions.Timeout) or (isinstance(reason, Urllib3Timeout) and not refused)


def _labels_shared(parsed: dict) -> dict:
    """A JSON object of an answer as it is parsed, with a series' labels shared (`_shared`) at once: an answer
    never holds a copy of its label values per series, only the text and the series parsed so far. (orjson, used
    before, built every series first, in a buffer of its own several times the text's size; the standard parser
    takes about as long, docs/performance.md "The client's share".)"""
    labels = parsed.get("metric")
    if isinstance(labels, dict):
        parsed["metric"] = _shared(labels)
    return parsed


def _shared(labels: dict) -> dict:
    """The labels with one str object per distinct name and value for the whole process (sys.intern). Every
    series of an answer repeats its namespace, resource, node and priority class, and on a big cluster what a
    run keeps of them (a chunk's usage rows, a pod's workload) would otherwise hold a copy per series: at
    250,000 pods several hundred MB (docs/performance.md)."""
    return {sys.intern(name): sys.intern(value) if isinstance(value, str) else value for name, value in labels.items()}


def _is_result(result: object) -> TypeGuard[list[dict]]:
    """The `result` list of a query answer: series with labels and a value or values."""
    return isinstance(result, list) and all(
        isinstance(s, dict) and isinstance(s.get("metric"), dict) and ("value" in s or "values" in s) for s in result
    )


def _reason(exc: Exception) -> str:
    """The useful end of requests' nested error text (e.g. "Connection refused")."""
    inner = exc.args[0] if exc.args and isinstance(exc.args[0], Exception) else exc
    inner = getattr(inner, "reason", None) or inner
    text = inner.args[0] if isinstance(inner, Exception) and inner.args and isinstance(inner.args[0], str) else str(inner)
    return text.rsplit("] ", 1)[-1].rstrip("')") if "[Errno" in text else text


def _short(query: str, limit: int = 300) -> str:
    flat = " ".join(query.split())
    return flat if len(flat) <= limit else flat[:limit] + "…"
