"""Each summary once: the claims in the ledger database that make retries, re-runs and concurrent runs send a
message at most once (billing/notify/deliveries.py), written to an outbox here; docs/spec.md "Messages go out
once". Real SMTP: tests/integration/test_mail_smtp.py."""

from __future__ import annotations

from datetime import date, datetime, timedelta, timezone

from sqlalchemy import insert, select

from billing.config import EmailConfig
from billing.ledger.database import open_ledger
from billing.ledger.tables import deliveries
from billing.notify.deliveries import CLAIM_SECONDS, deliver_once
from billing.notify.mail import Envelope, Letter, build_message

DAY = date(2026, 11, 20)


def envelopes() -> list[Envelope]:
    letter = Letter("Cluster billing 2026-11-20", "text", "<p>html</p>")
    return [Envelope(f"{DAY}-admins-{name}", build_message("billing@example.org", [f"{name}@example.org"], letter))
            for name in ("infra", "finance")]


def outbox(tmp_path) -> dict[str, str]:
    return {path.stem: path.read_text() for path in sorted((tmp_path / "outbox").glob("*.eml"))}


def test_a_claim_left_by_a_run_that_died_is_taken_over_only_once_it_is_old(tmp_path):
    ledger = open_ledger(f"sqlite:///{tmp_path / 'ledger.db'}")
    email = EmailConfig(enabled=True, outbox_dir=str(tmp_path / "outbox"))
    now = datetime.now(timezone.utc)
    with ledger.begin() as connection:  # infra's claimed a minute ago (being sent), finance's long ago (died)
        connection.execute(insert(deliveries), [
            {"day": DAY, "message": f"{DAY}-admins-infra", "address": "infra@example.org",
             "claimed_at": now - timedelta(minutes=1), "delivered_at": None},
            {"day": DAY, "message": f"{DAY}-admins-finance", "address": "finance@example.org",
             "claimed_at": now - timedelta(seconds=CLAIM_SECONDS + 60), "delivered_at": None}])
    assert deliver_once(envelopes(), email, ledger, DAY) == []
    assert list(outbox(tmp_path)) == [f"{DAY}-admins-finance"]
    with ledger.connect() as connection:
        delivered = dict(connection.execute(select(deliveries.c.message, deliveries.c.delivered_at)).all())
    assert delivered[f"{DAY}-admins-finance"] is not None and delivered[f"{DAY}-admins-infra"] is None


def test_a_resend_goes_to_everyone_as_a_correction_and_a_failure_is_released(tmp_path):
    ledger = open_ledger(f"sqlite:///{tmp_path / 'ledger.db'}")
    email = EmailConfig(enabled=True, outbox_dir=str(tmp_path / "outbox"))
    assert deliver_once(envelopes(), email, ledger, DAY) == []
    assert deliver_once(envelopes(), email, ledger, DAY) == []  # nothing again
    assert all("Subject: Cluster billing" in text for text in outbox(tmp_path).values())
    assert deliver_once(envelopes(), email, ledger, DAY, resend=True) == []
    assert all("Subject: Correction: Cluster billing" in text for text in outbox(tmp_path).values())
    # an outbox that cannot be written: the claims are released, so that the next run writes them
    (tmp_path / "outbox").rename(tmp_path / "gone")
    (tmp_path / "outbox").write_text("a file in the way")
    other = date(2026, 11, 21)
    assert len(deliver_once(envelopes(), email, ledger, other)) == 2
    with ledger.connect() as connection:
        assert connection.execute(select(deliveries).where(deliveries.c.day == other)).all() == []
