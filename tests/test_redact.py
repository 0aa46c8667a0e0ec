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
])
def test_passwords_are_hidden_user_names_stay(text, shown):
    assert redact(text) == shown


@pytest.mark.parametrize("text", [
    "postgresql+psycopg://postgres@127.0.0.1:5432/db",  # a user without a password
    "http://prom:9090/api/v1/query?x=a:b@c",  # an @ after the path is not in the authority
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
