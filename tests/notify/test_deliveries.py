"""Each message once: claimed, sent and recorded one at a time, so that retries, re-runs and concurrent runs send
a message at most once (billing/notify/deliveries.py), written to an outbox here; docs/spec.md "Messages go out
once". Real SMTP and real killed processes: tests/integration/test_mail_smtp.py."""

from __future__ import annotations

import threading
import time
from datetime import date, datetime, timedelta, timezone
from email import message_from_bytes, policy

import pytest
from sqlalchemy import insert, select, update

import billing.notify.deliveries
from billing.config import EmailConfig
from billing.ledger.database import open_ledger
from billing.ledger.tables import deliveries
from billing.notify.deliveries import deliver_once
from billing.notify.mail import Envelope, Letter, Outgoing, build_message

DAY = date(2026, 11, 20)
NAMES = ("infra", "finance", "legal", "ops", "audit")


def envelopes(names=NAMES[:2]) -> list[Envelope]:
    letter = Letter("Cluster billing 2026-11-20", "text", "<p>html</p>")
    return [Envelope(f"{DAY}-admins-{name}", build_message("billing@example.org", [f"{name}@example.org"], letter))
            for name in names]


def outbox(tmp_path) -> dict[str, str]:
    return {path.name: path.read_text() for path in sorted((tmp_path / "outbox").glob("*.eml"))}


def message_ids(tmp_path) -> dict[str, str]:
    return {name: str(message_from_bytes(text.encode(), policy=policy.default)["Message-ID"])
            for name, text in outbox(tmp_path).items()}


def rows(ledger) -> dict[str, tuple]:
    """message -> (claimed, delivered, taken over) as booleans, and its Message-ID."""
    with ledger.connect() as connection:
        return {row.message: (row.claimed_at is not None, row.delivered_at is not None, row.taken_over_at is not None,
                              row.message_id) for row in connection.execute(select(deliveries))}


@pytest.fixture
def short_lease(monkeypatch):
    """A lease of a second and a half, looked at every tenth of a second: the waits of a retry, shortened."""
    monkeypatch.setattr(billing.notify.deliveries, "CLAIM_SECONDS", 1.5)
    monkeypatch.setattr(billing.notify.deliveries, "LOOK_AGAIN_SECONDS", 0.1)


@pytest.fixture
def setup(tmp_path):
    return open_ledger(f"sqlite:///{tmp_path / 'ledger.db'}"), EmailConfig(enabled=True, outbox_dir=str(tmp_path / "outbox"))


class Killed(BaseException):
    """The process dies here (kill -9): nothing after it runs, no handler catches it."""


def test_a_run_killed_at_message_3_leaves_2_delivered_1_in_doubt_and_its_retry_sends_exactly_the_rest(
        setup, tmp_path, monkeypatch, short_lease):
    """Issue 44.5: delivery was recorded only after the whole batch, so a retry after a kill sent none of the
    unsent messages (all claimed) and a run after the lease sent every one again."""
    ledger, email = setup
    real_send, sent = Outgoing.send, []

    def dying_at_the_third(self, envelope):
        if len(sent) == 2:
            real_send(self, envelope)  # the third is written, and the run dies before it is recorded
            raise Killed
        sent.append(envelope.name)
        return real_send(self, envelope)

    monkeypatch.setattr(Outgoing, "send", dying_at_the_third)
    with pytest.raises(Killed):
        deliver_once(envelopes(NAMES), email, ledger, DAY)
    monkeypatch.setattr(Outgoing, "send", real_send)
    left = rows(ledger)
    assert {name: state[:3] for name, state in left.items()} == {
        f"{DAY}-admins-infra": (True, True, False), f"{DAY}-admins-finance": (True, True, False),
        f"{DAY}-admins-legal": (True, False, False)}  # ops and audit were never claimed
    first_id = left[f"{DAY}-admins-legal"][3]

    started = time.monotonic()
    assert deliver_once(envelopes(NAMES), email, ledger, DAY) == []
    assert time.monotonic() - started >= 1.5  # legal's claim was waited for until its lease ran out
    after = rows(ledger)
    assert {name: state[:3] for name, state in after.items()} == {
        **{f"{DAY}-admins-{name}": (True, True, False) for name in ("infra", "finance", "ops", "audit")},
        f"{DAY}-admins-legal": (True, True, True)}  # taken over: it may have arrived twice
    # the one in flight was written again over its own file, with its first Message-ID: the outbox holds it once
    assert sorted(message_ids(tmp_path)) == sorted(f"{DAY}-admins-{name}.eml" for name in NAMES)
    assert message_ids(tmp_path)[f"{DAY}-admins-legal.eml"] == first_id == after[f"{DAY}-admins-legal"][3]


def test_a_run_waits_for_a_message_another_run_is_sending_and_does_not_send_it(setup, tmp_path, short_lease):
    ledger, email = setup
    with ledger.begin() as connection:
        connection.execute(insert(deliveries).values(day=DAY, message=f"{DAY}-admins-infra",
                                                     address="infra@example.org", claimed_at=datetime.now(timezone.utc)))

    def the_other_run_records_it() -> None:
        time.sleep(0.5)
        with ledger.begin() as connection:
            connection.execute(update(deliveries).values(delivered_at=datetime.now(timezone.utc)))

    other = threading.Thread(target=the_other_run_records_it)
    other.start()
    assert deliver_once(envelopes(), email, ledger, DAY) == []
    other.join()
    assert list(outbox(tmp_path)) == [f"{DAY}-admins-finance.eml"]
    assert {name: state[:3] for name, state in rows(ledger).items()} == {
        f"{DAY}-admins-infra": (True, True, False), f"{DAY}-admins-finance": (True, True, False)}


def test_a_claim_younger_than_the_lease_is_not_taken_over(setup, tmp_path, monkeypatch):
    ledger, email = setup
    monkeypatch.setattr(billing.notify.deliveries, "LOOK_AGAIN_SECONDS", 0.1)
    now = datetime.now(timezone.utc)
    with ledger.begin() as connection:
        connection.execute(insert(deliveries).values(day=DAY, message=f"{DAY}-admins-infra",
                                                     address="infra@example.org", claimed_at=now, message_id="<a@b>"))
    waiter = threading.Thread(target=deliver_once, args=(envelopes(), email, ledger, DAY), daemon=True)
    waiter.start()
    waiter.join(2.0)
    assert waiter.is_alive()  # still waiting: the lease of 150 s has not run out
    assert list(outbox(tmp_path)) == [f"{DAY}-admins-finance.eml"]
    with ledger.begin() as connection:  # the claiming run records it: the waiting one ends without sending it
        connection.execute(update(deliveries).values(delivered_at=now))
    waiter.join(5.0)
    assert not waiter.is_alive() and list(outbox(tmp_path)) == [f"{DAY}-admins-finance.eml"]


def test_a_resend_writes_corrections_beside_the_originals_and_a_failure_is_released(setup, tmp_path):
    """Issue 43: the corrections overwrote the original .eml files, so the record of the first message was gone."""
    ledger, email = setup
    assert deliver_once(envelopes(), email, ledger, DAY) == []
    first = outbox(tmp_path)
    assert deliver_once(envelopes(), email, ledger, DAY) == []  # nothing again
    assert outbox(tmp_path) == first
    assert deliver_once(envelopes(), email, ledger, DAY, resend=True) == []
    assert deliver_once(envelopes(), email, ledger, DAY, resend=True) == []
    now = outbox(tmp_path)
    for name in ("infra", "finance"):
        assert now[f"{DAY}-admins-{name}.eml"] == first[f"{DAY}-admins-{name}.eml"]  # kept as it was sent
        assert "Subject: Cluster billing" in now[f"{DAY}-admins-{name}.eml"]
        assert "Subject: Correction: Cluster billing" in now[f"{DAY}-admins-{name}.2.eml"]
        assert "Subject: Correction: Cluster billing" in now[f"{DAY}-admins-{name}.3.eml"]
    assert len(now) == 6 and len(set(message_ids(tmp_path).values())) == 6
    # an outbox that cannot be written: the claims are released, so that the next run writes them
    (tmp_path / "outbox").rename(tmp_path / "gone")
    (tmp_path / "outbox").write_text("a file in the way")
    other = date(2026, 11, 21)
    assert len(deliver_once(envelopes(), email, ledger, other)) == 2
    with ledger.connect() as connection:
        released = connection.execute(select(deliveries.c.claimed_at, deliveries.c.delivered_at)
                                      .where(deliveries.c.day == other)).all()
    assert released == [(None, None), (None, None)]
    (tmp_path / "outbox").unlink()
    assert deliver_once(envelopes(), email, ledger, other) == []
    assert sorted(outbox(tmp_path)) == [f"{DAY}-admins-finance.eml", f"{DAY}-admins-infra.eml"]


def test_a_claim_long_left_is_taken_over_at_once(setup, tmp_path):
    ledger, email = setup
    with ledger.begin() as connection:
        connection.execute(insert(deliveries).values(
            day=DAY, message=f"{DAY}-admins-infra", address="infra@example.org", message_id="<first@example.org>",
            claimed_at=datetime.now(timezone.utc) - timedelta(seconds=billing.notify.deliveries.CLAIM_SECONDS + 1)))
    assert deliver_once(envelopes(), email, ledger, DAY) == []
    assert message_ids(tmp_path)[f"{DAY}-admins-infra.eml"] == "<first@example.org>"
    assert rows(ledger)[f"{DAY}-admins-infra"][:3] == (True, True, True)
