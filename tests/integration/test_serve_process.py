"""A real `billing serve` process under connections that never finish a request, on 127.0.0.1.

waitress' default of 100 connections made 110 idle ones (half-sent headers, a byte every few seconds) stop the
server: /healthz no longer answered, and nobody could sign in."""

from __future__ import annotations

import socket
import time
import urllib.request

import pytest

from tests.helpers.serve import start_serve

IDLE = 300  # connections that never finish their request: three times waitress' default limit


@pytest.fixture
def serve_port(tmp_path):
    port, process = start_serve(tmp_path)
    yield port
    process.stop()


def test_idle_connections_do_not_stop_the_server(serve_port):
    idle = []
    try:
        for _ in range(IDLE):
            connection = socket.create_connection(("127.0.0.1", serve_port), timeout=5)
            connection.sendall(b"GET /healthz HTTP/1.1\r\nHost: billing\r\n")  # the headers never end
            idle.append(connection)
        time.sleep(1)
        for connection in idle[::10]:  # a byte more now and then keeps them from timing out
            connection.sendall(b"X")
        started = time.monotonic()
        with urllib.request.urlopen(f"http://127.0.0.1:{serve_port}/healthz", timeout=10) as answer:
            assert answer.status == 200 and answer.read() == b"ok\n"
        assert time.monotonic() - started < 5
    finally:
        for connection in idle:
            connection.close()
