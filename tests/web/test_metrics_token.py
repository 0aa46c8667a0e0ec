"""serve's /metrics token (web.metrics_token_env / web.metrics_token_file): refused at start when unusable, a
503 and one log line when its file goes away while serving, and a 401 naming the key that is configured."""

from __future__ import annotations

import logging

import pytest

from billing.config import ConfigError
from billing.web.app import create_app
from tests.helpers.report_ledger import fill_ledger
from tests.helpers.serve import web_config


@pytest.fixture
def ledger(tmp_path) -> str:
    return fill_ledger(f"sqlite:///{tmp_path / 'ledger.db'}")


@pytest.mark.parametrize("key", ["metrics_token_env", "metrics_token_file"])
def test_a_scraper_without_the_token_is_told_the_key_that_holds_it(ledger, tmp_path, monkeypatch, key):
    monkeypatch.setenv("BILLING_METRICS_TOKEN", "scrape-me\n")  # a Secret's value often ends in a newline
    (tmp_path / "token").write_text("scrape-me\n")
    source = {"metrics_token_env": "BILLING_METRICS_TOKEN", "metrics_token_file": str(tmp_path / "token")}[key]
    client = create_app(web_config(ledger, **{key: source})).test_client()
    answer = client.get("/metrics", headers={"Authorization": "Bearer wrong"})
    assert answer.status_code == 401
    assert f"/metrics needs the bearer token of web.{key}" in answer.get_data(as_text=True)
    assert client.get("/metrics", headers={"Authorization": "Bearer scrape-me"}).status_code == 200


@pytest.mark.parametrize("value, words", [
    (None, "web: metrics_token_env names the environment variable BILLING_METRICS_TOKEN, which is not set"),
    ("", "web: metrics_token_env names the environment variable BILLING_METRICS_TOKEN, which is empty or only spaces"),
    (" \t ", "web: metrics_token_env names the environment variable BILLING_METRICS_TOKEN, which is empty or only "
              "spaces"),  # no scraper can send it: a header's value loses the spaces around it
])
def test_serve_refuses_to_start_with_a_token_variable_unset_or_empty(ledger, monkeypatch, value, words):
    """An empty token would let `Authorization: Bearer ` in; an unset one answered every scrape with a 500."""
    monkeypatch.delenv("BILLING_METRICS_TOKEN", raising=False)
    if value is not None:
        monkeypatch.setenv("BILLING_METRICS_TOKEN", value)
    with pytest.raises(ConfigError) as refused:
        create_app(web_config(ledger, metrics_token_env="BILLING_METRICS_TOKEN"))
    assert str(refused.value) == words


def test_serve_refuses_to_start_with_a_token_file_missing_or_empty(ledger, tmp_path):
    token = tmp_path / "token"
    with pytest.raises(ConfigError, match=f"^web: metrics_token_file {token} cannot be read \\(No such file"):
        create_app(web_config(ledger, metrics_token_file=str(token)))
    token.write_text("\n")
    with pytest.raises(ConfigError, match=f"^web: metrics_token_file {token} is empty$"):
        create_app(web_config(ledger, metrics_token_file=str(token)))


def test_a_token_file_gone_while_serving_is_a_503_and_one_log_line(ledger, tmp_path, caplog):
    token = tmp_path / "token"
    token.write_text("scrape-me")
    client = create_app(web_config(ledger, metrics_token_file=str(token))).test_client()
    token.unlink()  # a Secret's mount rotated away, say
    with caplog.at_level(logging.INFO):
        answer = client.get("/metrics", headers={"Authorization": "Bearer scrape-me"})
    assert answer.status_code == 503
    text = answer.get_data(as_text=True)
    assert "/metrics cannot read its token" in text and str(token) not in text  # the path is for the log only
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert [r.getMessage() for r in errors] == [
        f"/metrics cannot read its token: web: metrics_token_file {token} cannot be read (No such file or directory)"]
    assert all(r.exc_info is None for r in caplog.records)  # no traceback
    token.write_text("scrape-me")  # back again: answered again
    assert client.get("/metrics", headers={"Authorization": "Bearer scrape-me"}).status_code == 200
