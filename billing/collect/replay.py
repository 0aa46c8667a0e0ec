"""Answers recorded from a real Prometheus, replayed: how the demo runs without a server.

A recording is a directory per cluster with one gzip'd JSON file per billing
day (`2026-11-16.json.gz`), each mapping a question's `request_key` to the
`result` list Prometheus answered. Changing a query re-records one file per
cluster-day, not one file per question; fixtures/demo/record.py writes them.
"""

from __future__ import annotations

import gzip
import hashlib
import json
from pathlib import Path

from billing.collect.prometheus import LivePrometheus, PrometheusError, PrometheusSource, _short
from billing.config import PrometheusConfig

SUFFIX = ".json.gz"
# the key of the store's /api/v1/status/buildinfo answer in a recording: {"data": ..., "headers": {...}}
BUILDINFO = "buildinfo"
# recordings without it were made from Prometheus 2.42
DEFAULT_BUILDINFO = {"data": {"version": "2.42.0", "goVersion": "go1.19.8"}, "headers": {}}


def request_key(kind: str, query: str, **params: float) -> str:
    """A stable name for one question, so recorded answers can be found again."""
    text = json.dumps({"kind": kind, "query": query, **params}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def read_recording(directory: Path) -> dict[str, list[dict]]:
    """Every answer recorded for one cluster, all days together."""
    answers: dict[str, list[dict]] = {}
    for path in sorted(directory.glob("*" + SUFFIX)):
        answers |= json.loads(gzip.decompress(path.read_bytes()))
    return answers


def cluster_recording(cluster: str, directory: Path) -> dict[str, list[dict]]:
    """A cluster's recorded answers; a directory that is not there is named, not taken for one without answers."""
    if not directory.is_dir():
        raise PrometheusError(
            f"the recorded answers directory {directory} of cluster {cluster} does not exist (relative paths "
            "in the config are resolved against the config file's directory)"
        )
    return read_recording(directory)


def write_recording(path: Path, answers: dict[str, list[dict]]) -> None:
    """One day's answers; the same answers always give the same bytes (no time stamp in the gzip header)."""
    text = json.dumps(answers, sort_keys=True, separators=(",", ":"))
    path.write_bytes(gzip.compress(text.encode(), compresslevel=9, mtime=0))


class ReplayPrometheus:
    """Answers recorded from a real Prometheus, read from one cluster's recording directory."""

    def __init__(self, cluster: str, directory: Path):
        self.cluster = cluster
        self.directory = directory
        self._answers: dict[str, list[dict]] | None = None

    def instant(self, query: str, at: float) -> list[dict]:
        return self._load(request_key("instant", query, time=at), query)

    def range(self, query: str, start: float, end: float, step: float) -> list[dict]:
        return self._load(request_key("range", query, start=start, end=end, step=step), query)

    def buildinfo(self) -> tuple[dict, dict[str, str]]:
        """Recorded beside the answers (the same in every day's file)."""
        recorded = self._recording().get(BUILDINFO)
        info: dict = recorded if isinstance(recorded, dict) else DEFAULT_BUILDINFO
        return dict(info.get("data") or {}), dict(info.get("headers") or {})

    def _recording(self) -> dict[str, list[dict]]:
        if self._answers is None:
            self._answers = cluster_recording(self.cluster, self.directory)
        return self._answers

    def _load(self, key: str, query: str) -> list[dict]:
        self._answers = self._recording()
        if key not in self._answers:
            raise PrometheusError(
                f"recorded answers of cluster {self.cluster} in {self.directory} hold no answer for "
                f"{_short(query, 120)} (record them again, or is the day outside the recording?)"
            )
        return self._answers[key]


def prometheus_source(cluster: str, config: PrometheusConfig) -> PrometheusSource:
    """The cluster's recorded answers when the config names a recording (`replay`), else its live server."""
    if config.replay:
        return ReplayPrometheus(cluster, Path(config.replay))
    return LivePrometheus(cluster, config)
