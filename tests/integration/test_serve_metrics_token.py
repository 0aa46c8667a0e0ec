"""A real `billing serve` process and its /metrics token (issue 44.7): refused at start in one sentence with exit 2
when the variable is unset or empty; a token file gone while serving is a 503 and one log line, no traceback."""

from __future__ import annotations

import json
import subprocess
import urllib.error
import urllib.request

import pytest

from fixtures.servers import free_port
from tests.helpers.serve import REPOSITORY, serve_command, serve_config, start_serve


def scrape(port: int, token: str) -> int:
    request = urllib.request.Request(f"http://127.0.0.1:{port}/metrics", headers={"Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status
    except urllib.error.HTTPError as refused:
        return refused.code


@pytest.mark.parametrize("value, cause", [(None, "which is not set"), ("", "which is empty or only spaces"),
                                          ("   ", "which is empty or only spaces")])
def test_serve_with_the_token_variable_unset_or_empty_does_not_start(tmp_path, monkeypatch, value, cause):
    monkeypatch.delenv("BILLING_METRICS_TOKEN", raising=False)
    if value is not None:
        monkeypatch.setenv("BILLING_METRICS_TOKEN", value)
    config = serve_config(tmp_path, metrics_token_env="BILLING_METRICS_TOKEN")
    done = subprocess.run([str(a) for a in serve_command(config, free_port())], capture_output=True, text=True,
                          timeout=60, cwd=REPOSITORY)
    assert done.returncode == 2, done.stderr
    lines = [json.loads(line) for line in done.stderr.splitlines()]
    assert [(line["level"], line["message"]) for line in lines] == [
        ("ERROR", f"web: metrics_token_env names the environment variable BILLING_METRICS_TOKEN, {cause}")]


def test_a_token_file_gone_while_serving_is_a_503_and_one_log_line(tmp_path):
    token = tmp_path / "metrics-token"
    token.write_text("scrape-me\n")
    port, serve = start_serve(tmp_path, metrics_token_file=str(token))
    try:
        assert scrape(port, "scrape-me") == 200
        token.unlink()
        assert scrape(port, "scrape-me") == 503
        token.write_text("scrape-me\n")
        assert scrape(port, "scrape-me") == 200
    finally:
        serve.stop()
    lines = [json.loads(line) for line in (tmp_path / "serve.log").read_text().splitlines()]
    assert not any("exception" in line or "Traceback" in line["message"] for line in lines)
    assert [line["message"] for line in lines if line["level"] == "ERROR"] == [
        f"/metrics cannot read its token: web: metrics_token_file {token} cannot be read (No such file or directory)"]
    assert [line["status"] for line in lines if line.get("path") == "/metrics"] == [200, 503, 200]
