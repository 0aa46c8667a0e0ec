"""cronjob/reports-nginx.conf in a real nginx on 127.0.0.1, its port and root moved into the test's directory."""

from __future__ import annotations

import urllib.error
import urllib.request
from pathlib import Path

from fixtures.servers import ManagedProcess, free_port, start_nginx

SITE = Path(__file__).resolve().parents[2] / "cronjob" / "reports-nginx.conf"


def get(url: str) -> tuple[int, dict, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, dict(response.headers), response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), ""


def start_reports_server(work_dir: Path, html: Path) -> tuple[str, ManagedProcess]:
    """nginx with the shipped server block, inside what the nginx image's own nginx.conf does around conf.d."""
    port = free_port()
    site = SITE.read_text()
    moved = site.replace("listen 8080;", f"listen 127.0.0.1:{port};").replace(
        "root /usr/share/nginx/html;", f"root {html};"
    )
    assert moved.count(str(port)) == 1 and moved.count(str(html)) == 1, "the shipped listen or root line changed"
    (work_dir / "site.conf").write_text(moved)
    process = start_nginx(work_dir, f"include {work_dir}/site.conf;", [port])
    return f"http://127.0.0.1:{port}", process


def test_the_reports_server_serves_reports_listings_and_health(tmp_path):
    html = tmp_path / "html"
    (html / "2026-11-20").mkdir(parents=True)
    (html / "index.html").write_text("<h1>All teams</h1>")
    (html / "2026-11-20" / "robotics.html").write_text("<h1>robotics</h1>")
    url, server = start_reports_server(tmp_path, html)
    try:
        assert get(url + "/healthz")[::2] == (200, "ok\n")
        status, headers, body = get(url + "/")
        assert (status, body) == (200, "<h1>All teams</h1>")
        assert headers["Content-Type"].startswith("text/html") and headers["X-Content-Type-Options"] == "nosniff"
        status, _, listing = get(url + "/2026-11-20/")
        assert status == 200 and 'href="robotics.html"' in listing
        assert get(url + "/2026-11-21/alice.html")[0] == 404
    finally:
        server.stop()
