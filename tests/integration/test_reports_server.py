"""cronjob/reports-nginx.conf in a real nginx on 127.0.0.1, its port and root moved into the test's directory."""

from __future__ import annotations

import os
import urllib.error
import urllib.request
from pathlib import Path

from tests.integration.servers import ManagedProcess, accepts_connections, free_port, require_program

SITE = Path(__file__).resolve().parents[2] / "cronjob" / "reports-nginx.conf"


def get(url: str) -> tuple[int, dict, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, dict(response.headers), response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), ""


def start_reports_server(work_dir: Path, html: Path) -> tuple[str, ManagedProcess]:
    """nginx with the shipped server block, inside what the nginx image's own nginx.conf does around conf.d."""
    nginx = require_program("nginx", ("/usr/sbin",))
    port = free_port()
    site = SITE.read_text()
    moved = site.replace("listen 8080;", f"listen 127.0.0.1:{port};").replace(
        "root /usr/share/nginx/html;", f"root {html};"
    )
    assert moved.count(str(port)) == 1 and moved.count(str(html)) == 1, "the shipped listen or root line changed"
    (work_dir / "site.conf").write_text(moved)
    (work_dir / "nginx.conf").write_text(f"""
        {"user root;" if os.geteuid() == 0 else ""}
        daemon off;
        worker_processes 1;
        pid {work_dir}/nginx.pid;
        error_log stderr;
        events {{}}
        http {{
            include /etc/nginx/mime.types;
            access_log off;
            client_body_temp_path {work_dir}/client_temp;
            proxy_temp_path {work_dir}/proxy_temp;
            fastcgi_temp_path {work_dir}/fastcgi_temp;
            uwsgi_temp_path {work_dir}/uwsgi_temp;
            scgi_temp_path {work_dir}/scgi_temp;
            include {work_dir}/site.conf;
        }}
    """)
    process = ManagedProcess([nginx, "-p", work_dir, "-c", work_dir / "nginx.conf"], work_dir / "nginx.log")
    process.wait_until(accepts_connections(port), "nginx", timeout=10)
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
