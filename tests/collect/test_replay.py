import gzip
import json

import pytest

from billing.collect.prometheus import LivePrometheus, PrometheusError
from billing.collect.replay import (
    BUILDINFO,
    ReplayPrometheus,
    prometheus_source,
    read_recording,
    request_key,
    write_recording,
)
from billing.config import PrometheusConfig

UP = [{"metric": {}, "values": [[0, "1"]]}]


def test_replay_reads_answers_from_every_day_of_the_recording(tmp_path):
    first, second = request_key("range", "up", start=0, end=60, step=60), request_key("instant", "up", time=86400)
    write_recording(tmp_path / "2026-11-16.json.gz", {first: UP})
    write_recording(tmp_path / "2026-11-17.json.gz", {second: []})
    replay = ReplayPrometheus("jaguar", tmp_path)
    assert replay.range("up", 0, 60, 60) == UP
    assert replay.instant("up", 86400) == []
    with pytest.raises(PrometheusError, match="cluster jaguar in .* hold no answer for up"):
        replay.instant("up", 0)


def test_a_recording_file_is_gzip_json_and_the_same_answers_give_the_same_bytes(tmp_path):
    write_recording(tmp_path / "a.json.gz", {"k2": [], "k1": UP})
    write_recording(tmp_path / "b.json.gz", {"k1": UP, "k2": []})
    assert (tmp_path / "a.json.gz").read_bytes() == (tmp_path / "b.json.gz").read_bytes()
    assert json.loads(gzip.decompress((tmp_path / "a.json.gz").read_bytes())) == {"k1": UP, "k2": []}
    assert read_recording(tmp_path) == {"k1": UP, "k2": []}


def test_a_question_key_depends_on_every_part_of_the_question():
    keys = {request_key("range", "up", start=0, end=60, step=60), request_key("range", "up", start=0, end=60, step=30),
            request_key("range", "down", start=0, end=60, step=60), request_key("instant", "up", time=0)}
    assert len(keys) == 4


def test_the_source_is_the_recording_when_the_config_names_one(tmp_path):
    assert isinstance(prometheus_source("jaguar", PrometheusConfig(replay=str(tmp_path))), ReplayPrometheus)
    assert isinstance(prometheus_source("jaguar", PrometheusConfig(url="http://127.0.0.1:9")), LivePrometheus)


def test_replay_answers_the_recorded_buildinfo_and_prometheus_2_42_without_one(tmp_path):
    (tmp_path / "vm").mkdir()
    recorded = {"data": {}, "headers": {"X-Server-Hostname": "vm"}}  # VictoriaMetrics 1.79
    write_recording(tmp_path / "vm" / "2026-11-16.json.gz", {BUILDINFO: recorded, "k": UP})
    assert ReplayPrometheus("jaguar", tmp_path / "vm").buildinfo() == ({}, {"X-Server-Hostname": "vm"})
    (tmp_path / "old").mkdir()
    write_recording(tmp_path / "old" / "2026-11-16.json.gz", {"k": UP})
    assert ReplayPrometheus("jaguar", tmp_path / "old").buildinfo()[0]["version"] == "2.42.0"
