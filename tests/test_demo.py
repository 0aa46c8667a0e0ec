"""The README's first command: the demo runs with no servers at all."""

import os
from email import message_from_bytes, policy
from pathlib import Path

import pandas as pd
from click.testing import CliRunner
from sqlalchemy import create_engine

from billing.cli import main
from fixtures.demo import world as demo

ROOT = Path(__file__).resolve().parents[1]


def test_the_demo_bills_three_days_from_recorded_answers(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    os.symlink(ROOT / "fixtures", tmp_path / "fixtures")  # the config's paths are relative to the repository

    result = CliRunner().invoke(main, ["backfill", "--config", "fixtures/demo/billing.yaml",
                                       "--from", "2026-11-16", "--to", "2026-11-18"])
    assert result.exit_code == 0, result.output

    with create_engine("sqlite:///demo-out/billing.db").connect() as conn:
        ledger = pd.read_sql("select * from chargeback", conn)
        completed = pd.read_sql("select day from completed_days", conn)
    assert sorted(ledger["day"].unique()) == ["2026-11-16", "2026-11-17", "2026-11-18"]
    assert len(completed) == 3
    assert set(ledger["cluster"]) == set(demo.CLUSTERS)
    assert set(ledger["currency"]) == {"CHF"}
    # every directory team with a namespace, the unknown team-quantum and unplaced people land somewhere
    assert set(demo.TEAMS) <= set(ledger["team"]) and "unallocated" in set(ledger["team"])
    assert {"NVIDIA-H100-80GB-HBM3", "NVIDIA-A100-SXM4-80GB"} <= set(ledger["gpu_model"])
    # alice is on robotics and vision: her namespace is split half and half
    alice = ledger[(ledger["namespace"] == "alice")].groupby("team")["quantity"].sum()
    assert sorted(alice.index) == ["robotics", "vision"] and alice["robotics"] == alice["vision"]

    reports = tmp_path / "demo-out" / "reports"
    assert (reports / "2026-11-18" / "index.html").exists()
    assert len(list((reports / "2026-11-18" / "teams").glob("*.html"))) == len(set(ledger["team"]))

    outbox = list((tmp_path / "demo-out" / "outbox").glob("2026-11-18-*.eml"))
    leads = sum(len(demo.leads(team, members)) for team, members in demo.memberships().items())
    assert len(outbox) == 1 + leads  # the admin summary and one per team lead
    admin = next(message_from_bytes(p.read_bytes(), policy=policy.default) for p in outbox if "admins" in p.name)
    day_total = ledger.loc[ledger["day"] == "2026-11-18", "cost"].sum()
    assert f"{day_total:,.2f} CHF" in admin["Subject"]
