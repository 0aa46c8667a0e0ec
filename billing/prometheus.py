"""Asking Prometheus: the HTTP API with retries.

The collection code only sees `PrometheusSource`: two methods that return the
`result` list of Prometheus' JSON answer. `LivePrometheus` asks a server (POST,
bearer token, CA file, timeout, retries with backoff on connection errors,
timeouts, 429 and 5xx); `ReplayPrometheus` (billing/replay.py) reads answers
recorded from a real server earlier, which is how the demo runs without one.

An answer that says it is incomplete is refused: Prometheus answers
"success" with `warnings` when a remote-read store was out of reach (Thanos
does the same for a partial response, VictoriaMetrics sets `isPartial`), and
a bill from such an answer would be quietly too low.
"""

from __future__ import annotations

import logging
from datetime import datetime, timezone
from typing import Protocol

import requests
from prometheus_api_client import PrometheusApiClientException, PrometheusConnect
from urllib3.exceptions import NewConnectionError
from urllib3.exceptions import TimeoutError as Urllib3Timeout
from urllib3.util.retry import Retry

from billing.config import PrometheusConfig

log = logging.getLogger(__name__)

RETRY_STATUSES = (429, 500, 502, 503, 504)


class PrometheusError(Exception):
    """A query could not be answered; the message names cluster, URL and cause."""


class _Rejected(Exception):
    """An error answer, with Prometheus' reason; raised from the response hook, `_ask` names the server."""


class _PartialAnswer(Exception):
    """An answer that says it is incomplete; raised from the response hook, `_ask` names the server."""


def _check_answer(response: requests.Response, *args, **kwargs) -> None:
    """A requests response hook: Prometheus' own reason for an error, and answers that say they are incomplete.

    It sees the answer urllib3's retries ended with; an answer that is not
    JSON at all is left to the caller.
    """
    if response.status_code >= 400:
        raise _Rejected(f"HTTP {response.status_code}: {_error_text(response)}")
    if not (b'"warnings"' in response.content or b'"isPartial"' in response.content):
        return
    try:
        body = response.json()
    except ValueError:
        return
    if isinstance(body, dict) and (body.get("warnings") or body.get("isPartial") is True):
        raise _PartialAnswer("; ".join(map(str, body.get("warnings") or ["isPartial is true"])))


def _error_text(response: requests.Response) -> str:
    """The `error` of Prometheus' JSON, else the start of whatever a proxy answered."""
    try:
        return str(response.json()["error"])
    except (ValueError, KeyError, TypeError):
        return " ".join(response.text.split())[:200] or response.reason


class PrometheusSource(Protocol):
    def instant(self, query: str, at: float) -> list[dict]: ...

    def range(self, query: str, start: float, end: float, step: float) -> list[dict]: ...

    def buildinfo(self) -> dict: ...


class LivePrometheus:
    """One Prometheus server (or Thanos/Mimir/VictoriaMetrics query endpoint)."""

    def __init__(self, cluster: str, config: PrometheusConfig, backoff: float = 1.0):
        self.cluster = cluster
        self.url = config.url.rstrip("/")
        self.timeout = config.timeout
        self.attempts = config.retries + 1
        session = requests.Session()
        session.verify = config.ca_file or True
        session.hooks["response"].append(_check_answer)
        retry = Retry(
            total=config.retries,
            backoff_factor=backoff,
            status_forcelist=RETRY_STATUSES,
            allowed_methods=frozenset({"GET", "POST"}),
            respect_retry_after_header=True,
        )
        headers = {"Authorization": f"Bearer {config.bearer_token}"} if config.bearer_token else None
        self._client = PrometheusConnect(
            url=self.url, headers=headers, retry=retry, session=session, timeout=config.timeout, method="POST"
        )

    def instant(self, query: str, at: float) -> list[dict]:
        return self._ask(query, lambda: self._client.custom_query(query, params={"time": at}))

    def range(self, query: str, start: float, end: float, step: float) -> list[dict]:
        return self._ask(
            query,
            lambda: self._client.custom_query_range(
                query, datetime.fromtimestamp(start, timezone.utc), datetime.fromtimestamp(end, timezone.utc), str(step)
            ),
        )

    def buildinfo(self) -> dict:
        """The `data` of /api/v1/status/buildinfo ({} from VictoriaMetrics); {"version": ""} where the
        store has no such page (a proxy in front, an old Thanos): then nothing is known of it."""
        client = self._client

        def call() -> dict:
            try:
                response = client._session.get(f"{self.url}/api/v1/status/buildinfo", headers=client.headers,
                                               timeout=self.timeout)
            except _Rejected as exc:
                log.warning("cluster %s: %s has no build information (%s); querying it as Prometheus 2",
                            self.cluster, self.url, exc)
                return {"version": "unknown"}
            return response.json()["data"]

        return self._ask("/api/v1/status/buildinfo", call, answer=lambda data: isinstance(data, dict))

    def _ask(self, query: str, call, answer=lambda result: _is_result(result)):
        where = f"Prometheus of cluster {self.cluster} at {self.url}"
        try:
            result = call()
        except _PartialAnswer as exc:
            raise PrometheusError(
                f"{where} answered only in part ({exc}), so the bill would be too low; refusing it "
                f"(query: {_short(query)})"
            ) from None
        except requests.exceptions.RetryError as exc:
            raise PrometheusError(f"{where} kept failing after retries ({_reason(exc)})") from None
        except requests.exceptions.SSLError as exc:
            raise PrometheusError(f"{where}: TLS failed ({_reason(exc)})") from None
        except (requests.exceptions.Timeout, requests.exceptions.ConnectionError) as exc:
            if _timed_out(exc):
                raise PrometheusError(
                    f"{where} did not answer within the {self.timeout:g} s timeout in {self.attempts} "
                    f"attempt(s) (query: {_short(query)})"
                ) from None
            raise PrometheusError(f"{where} is unreachable ({_reason(exc)})") from None
        except (_Rejected, PrometheusApiClientException) as exc:
            raise PrometheusError(f"{where} rejected the query {_short(query)}: {exc}") from None
        except (ValueError, KeyError, TypeError):  # not JSON, or JSON without data.result
            result = None
        except requests.exceptions.RequestException as exc:  # e.g. the connection broke off mid-answer
            raise PrometheusError(f"{where} failed to answer ({_reason(exc)})") from None
        if not answer(result):
            raise PrometheusError(f"{where} answered something that is not a Prometheus JSON result")
        return result


def _timed_out(exc: requests.exceptions.RequestException) -> bool:
    """True for a timeout, also one that urllib3's retries wrapped into a ConnectionError."""
    reason = getattr(exc.args[0] if exc.args else None, "reason", None)
    refused = isinstance(reason, NewConnectionError)  # urllib3 makes it a kind of timeout, for history's sake
    return isinstance(exc, requests.exceptions.Timeout) or (isinstance(reason, Urllib3Timeout) and not refused)


def _is_result(result: object) -> bool:
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
