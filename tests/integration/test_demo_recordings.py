"""The demo's recorded answers are what a real Prometheus answers today."""

from pathlib import Path

from billing.collect.replay import SUFFIX, read_recording
from billing.config import load_config
from fixtures.demo import record
from fixtures.demo import world as demo
from fixtures.servers import start_prometheus, world_blocks

DEMO = Path(record.__file__).parent


def answers(directory: Path) -> dict[str, object]:
    """Every cluster's answers, `<cluster>/<question's key>`, and which cluster-day files hold them."""
    clusters = sorted(path for path in directory.iterdir() if path.is_dir())
    files = sorted(path.relative_to(directory).as_posix() for path in directory.rglob("*" + SUFFIX))
    return {"files": files} | {f"{cluster.name}/{key}": answer
                               for cluster in clusters for key, answer in read_recording(cluster).items()}


def same(key: str, recorded: object, kept: object) -> bool:
    """Equal, or (answers, rounding only where they differ: most do not) equal to 12 significant digits."""
    if recorded == kept:
        return True
    return key != "files" and None not in (recorded, kept) and rounded(recorded) == rounded(kept)  # type: ignore[arg-type]


def rounded(answer: list[dict] | dict) -> list[dict] | dict:
    """Sample values to 12 significant digits: Prometheus adds up some sums (e.g. of an `or`) in no
    fixed order, so their last bits differ from one run to the next. (buildinfo.json is no answer.)"""
    if isinstance(answer, dict):
        return answer
    def value(sample: list) -> list:
        return [sample[0], f"{float(sample[1]):.12g}"]

    return [{**series, **({"value": value(series["value"])} if "value" in series else {}),
             **({"values": [value(s) for s in series["values"]]} if "values" in series else {})}
            for series in answer]


def test_recordings_are_current(tmp_path, tsdb_cache, monkeypatch):
    monkeypatch.chdir(DEMO.parents[1])  # the demo config's paths are relative to the repository
    server = start_prometheus(world_blocks(demo.world(), tsdb_cache), tmp_path / "prometheus")
    try:
        record.record(load_config(record.CONFIG), server.url, tmp_path / "recorded")
    finally:
        server.stop()
    recorded, kept = answers(tmp_path / "recorded"), answers(DEMO / "prometheus")
    # named, not diffed: a diff of every answer takes the test runner many minutes to write
    stale = sorted(key for key in recorded.keys() | kept.keys() if not same(key, recorded.get(key), kept.get(key)))
    assert not stale, (f"the demo's recorded answers are stale ({len(stale)} differ, among them {stale[:3]}): "
                       "run `python -m fixtures.demo.record`")
    assert (DEMO / "directory.ldif").read_text() == demo.ldif()
