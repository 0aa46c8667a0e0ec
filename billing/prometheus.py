"""Asking Prometheus: the HTTP API with retries, or recorded answers.

The collection code only sees `PrometheusSource`: two methods that return the
`result` list of Prometheus' JSON answer. `LivePrometheus` asks a server (POST,
bearer token, CA file, timeout, retries with backoff on connection errors,
timeouts, 429 and 5xx); `ReplayPrometheus` reads answers recorded from a real
server earlier, which is how the demo runs without one.
"""

from __future__ import annotations

import hashlib
import json
import logging
from datetime import datetime, timezone
from pathlib import Path
from typing import Protocol

import requests
from prometheus_api_client import PrometheusApiClientException, PrometheusConnect
from urllib3.util.retry import Retry

from billing.config import PrometheusConfig

log = logging.getLogger(__name__)

RETRY_STATUSES = (429, 500, 502, 503, 504)


class PrometheusError(Exception):
    """A query could not be answered; the message names cluster, URL and cause."""


class PrometheusSource(Protocol):
    def instant(self, query: str, at: float) -> list[dict]: ...

    def range(self, query: str, start: float, end: float, step: float) -> list[dict]: ...


def request_key(kind: str, query: str, **params: float) -> str:
    """A stable name for one question, so recorded answers can be found again."""
    text = json.dumps({"kind": kind, "query": query, **params}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


class LivePrometheus:
    """One Prometheus server (or Thanos/Mimir/VictoriaMetrics query endpoint)."""

    def __init__(self, cluster: str, config: PrometheusConfig, backoff: float = 1.0):
        self.cluster = cluster
        self.url = config.url.rstrip("/")
        session = requests.Session()
        session.verify = config.ca_file or True
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

    def _ask(self, query: str, call) -> list[dict]:
        where = f"Prometheus of cluster {self.cluster} at {self.url}"
        try:
            return call()
        except requests.exceptions.RetryError as exc:
            raise PrometheusError(f"{where} kept failing after retries ({_reason(exc)})") from None
        except requests.exceptions.Timeout:
            raise PrometheusError(f"{where} did not answer in time (query: {_short(query)})") from None
        except requests.exceptions.SSLError as exc:
            raise PrometheusError(f"{where}: TLS failed ({_reason(exc)})") from None
        except requests.exceptions.ConnectionError as exc:
            raise PrometheusError(f"{where} is unreachable ({_reason(exc)})") from None
        except PrometheusApiClientException as exc:
            raise PrometheusError(f"{where} rejected the query {_short(query)}: {exc}") from None
        except (ValueError, KeyError, TypeError):
            raise PrometheusError(f"{where} answered something that is not a Prometheus JSON result") from None


def _reason(exc: Exception) -> str:
    """The useful end of requests' nested error text (e.g. "Connection refused")."""
    inner = exc.args[0] if exc.args and isinstance(exc.args[0], Exception) else exc
    text = str(getattr(inner, "reason", None) or inner)
    return text.rsplit("] ", 1)[-1].rstrip("')") if "[Errno" in text else text


def _short(query: str, limit: int = 300) -> str:
    flat = " ".join(query.split())
    return flat if len(flat) <= limit else flat[:limit] + "…"


class ReplayPrometheus:
    """Answers recorded from a real Prometheus, one JSON file per question."""

    def __init__(self, cluster: str, directory: Path):
        self.cluster = cluster
        self.directory = directory

    def instant(self, query: str, at: float) -> list[dict]:
        return self._load(request_key("instant", query, time=at), query)

    def range(self, query: str, start: float, end: float, step: float) -> list[dict]:
        return self._load(request_key("range", query, start=start, end=end, step=step), query)

    def _load(self, key: str, query: str) -> list[dict]:
        path = self.directory / f"{key}.json"
        try:
            return json.loads(path.read_text())
        except FileNotFoundError:
            raise PrometheusError(
                f"recorded answers of cluster {self.cluster} in {self.directory} hold no answer for "
                f"{_short(query, 120)} (record them again, or is the day outside the recording?)"
            ) from None


def prometheus_source(cluster: str, config: PrometheusConfig) -> PrometheusSource:
    if config.replay:
        return ReplayPrometheus(cluster, Path(config.replay))
    return LivePrometheus(cluster, config)
