"""Notification: summaries, digests and alerts, delivered by SMTP or written to an outbox."""
