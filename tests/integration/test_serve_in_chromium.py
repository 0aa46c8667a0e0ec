"""A real `billing serve` process behind nginx as the authenticating proxy, opened in headless Chromium.

nginx stands in for oauth2-proxy: it sets X-Forwarded-User and forwards from
127.0.0.1, the default web.trusted_proxies. Screenshots at phone and desktop
width must show a page and leave no console message (the CSP header forbids
any script or resource from elsewhere, so an attempt would show up there).
"""

from __future__ import annotations

import json
import signal
import urllib.request
from pathlib import Path

import pytest

from fixtures.servers import ManagedProcess, free_port, require_program, start_nginx
from tests.helpers.chromium import assert_not_blank, screenshot
from tests.helpers.serve import RANGE, start_serve

REPOSITORY = Path(__file__).resolve().parents[2]
USERS = ("alice", "root")  # a person and an admin, one proxy port each


def start_proxy(tmp_path: Path, upstream: int) -> tuple[dict[str, int], ManagedProcess]:
    """nginx with one port per user, each setting that user's header as an authenticating proxy would."""
    ports = {user: free_port() for user in USERS}
    sites = "\n".join(f"""
        server {{
            listen 127.0.0.1:{port};
            location / {{
                proxy_pass http://127.0.0.1:{upstream};
                proxy_set_header X-Forwarded-User {user};
            }}
        }}""" for user, port in ports.items())
    return ports, start_nginx(tmp_path, sites, list(ports.values()))


@pytest.fixture(scope="module")
def browser() -> str:
    return require_program("chromium")  # Debian package chromium; skipped if missing, except in CI


@pytest.fixture
def served(tmp_path):
    port, serve = start_serve(tmp_path)
    ports, proxy = start_proxy(tmp_path, port)
    yield ports, serve
    proxy.stop()
    serve.stop()


PAGES = [("alice", f"/me?{RANGE}"), ("root", f"/all?{RANGE}"), ("root", f"/teams/robotics?{RANGE}")]


@pytest.mark.parametrize("width, height", [(1280, 1800), (390, 2600)])  # a desktop and a phone
def test_pages_open_without_console_messages_and_are_not_blank(browser, served, tmp_path, width, height):
    ports, _ = served
    for user, path in PAGES:
        png = tmp_path / f"serve-{path[1:].split('?')[0].replace('/', '-')}-{width}.png"
        url = f"http://127.0.0.1:{ports[user]}{path}"
        assert screenshot(browser, url, png, width, height, tmp_path / "profile") == [], url
        assert_not_blank(png)


def test_the_process_logs_json_lines_and_stops_cleanly_on_sigterm(served):
    ports, serve = served
    with urllib.request.urlopen(f"http://127.0.0.1:{ports['alice']}/me?{RANGE}", timeout=10) as answer:
        assert answer.status == 200 and "37.20 USD" in answer.read().decode()
    serve.popen.send_signal(signal.SIGTERM)
    assert serve.popen.wait(timeout=15) == 0
    lines = [json.loads(line) for line in serve.log_path.read_text().splitlines()]
    request = next(line for line in lines if line.get("path") == "/me")
    assert request["uid"] == "alice" and request["status"] == 200 and request["remote_addr"] == "127.0.0.1"
    assert lines[-1]["message"] == "billing serve stopped"
