"""Passwords of URLs hidden in any text, the way SQLAlchemy hides a database URL's."""

import logging

import pytest
from sqlalchemy.engine import make_url

from billing.logs import JsonFormatter, RedactingFormatter
from billing.redact import redact


@pytest.mark.parametrize("text, shown", [
    ("Prometheus at http://billing:s3cret@prom:9090 is unreachable", "Prometheus at http://billing:***@prom:9090 is unreachable"),
    ("at 'https://a:p@ss@h/api'", "at 'https://a:***@h/api'"),  # an unescaped @ in the password is still hidden
    ("http://a:b@c and postgresql+psycopg://d:e%40f@g/db", "http://a:***@c and postgresql+psycopg://d:***@g/db"),
    ("ldap://cn=admin,dc=x:pw@h", "ldap://cn=admin,dc=x:***@h"),
    ("http://a:@c", "http://a:***@c"),  # an empty password: shown as hidden too, nothing is told
    # /, ? and # end the authority where a URL is parsed, but a password typed unescaped is still a password
    ("could not push to http://pgwuser:Push/Pw-SECRET@127.0.0.1:9091 (refused)",
     "could not push to http://pgwuser:***@127.0.0.1:9091 (refused)"),
    ("http://u:a?b#c@pushgateway:9091/metrics", "http://u:***@pushgateway:9091/metrics"),
    ("https://u:/?#@h", "https://u:***@h"),
    ("http://u:p@ss/w?rd@h:1/x", "http://u:***@h:1/x"),  # and @ with them
    ('{"pushgateway": "http://u:s/3cret@h", "day": "2026-11-20"}', '{"pushgateway": "http://u:***@h", "day": "2026-11-20"}'),
    ("http://u:p/w@h,http://v:q?x@k", "http://u:***@h,http://v:***@k"),  # two URLs without a space between
    # text cannot tell host:port/path@x from user:pass/word@host, so an @ after a path is hidden too: a log line
    # loses some detail rather than a password its words
    ("http://prom:9090/api/v1/query?x=a:b@c", "http://prom:***@c"),
])
def test_passwords_are_hidden_user_names_stay(text, shown):
    assert redact(text) == shown


@pytest.mark.parametrize("text", [
    "postgresql+psycopg://postgres@127.0.0.1:5432/db",  # a user without a password
    "http://prom:9090/api/v1/query?x=a%40b",  # an escaped @ in a query
    "http://prom:9090/api?x=1 at user@example.org",  # an @ after the URL has ended (a space)
    "at 12:30 @home, mail me at a:b@example.org",  # no URL
    "postgresql://u:***@h/db",  # already hidden
])
def test_text_without_url_passwords_is_left_as_it_is(text):
    assert redact(text) == text


def test_same_form_as_sqlalchemy_database_urls():
    url = "postgresql+psycopg://billing:s3cret@db.example.org:5432/ledger"
    assert redact(url) == make_url(url).render_as_string(hide_password=True)


@pytest.mark.parametrize("inner", [logging.Formatter("%(levelname)s %(message)s"), JsonFormatter()])
def test_log_lines_are_redacted_whoever_logged_them(inner):
    record = logging.makeLogRecord({"msg": "retrying %s", "args": ("http://u:s3cret@h",), "levelname": "WARNING",
                                    "pushgateway": "http://u:s3cret@h"})
    line = RedactingFormatter(inner).format(record)
    assert "s3cret" not in line and line.count("http://u:***@h") == (2 if isinstance(inner, JsonFormatter) else 1)
