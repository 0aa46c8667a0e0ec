"""The demo's recorded answers are what a real Prometheus answers today."""

import json
from pathlib import Path

from billing.config import load_config
from fixtures.demo import record
from fixtures.demo import world as demo
from tests.integration.servers import start_prometheus, world_blocks

DEMO = Path(record.__file__).parent


def answers(directory: Path) -> dict[str, object]:
    return {path.relative_to(directory).as_posix(): json.loads(path.read_text()) for path in directory.rglob("*.json")}


def test_recordings_are_current(tmp_path, tsdb_cache, monkeypatch):
    monkeypatch.chdir(DEMO.parents[1])  # the demo config's paths are relative to the repository
    server = start_prometheus(world_blocks(demo.world(), tsdb_cache), tmp_path / "prometheus")
    try:
        record.record(load_config(record.CONFIG), server.url, tmp_path / "recorded")
    finally:
        server.stop()
    assert answers(tmp_path / "recorded") == answers(DEMO / "prometheus"), (
        "the demo's recorded answers are stale: run `python -m fixtures.demo.record`")
    assert (DEMO / "directory.ldif").read_text() == demo.ldif()
