"""What every fault test checks, and small HTTP servers that misbehave on purpose.

A fault must leave the ledger exactly as the previous run left it (every
row, its `computed_at` included), end the run with exit status 1 and say one
sentence naming the cause, never a traceback.
"""

from __future__ import annotations

import json
import re
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs
from urllib.request import Request, urlopen

from sqlalchemy import create_engine, select

from billing.ledger.tables import chargeback, completed_days

EMPTY_ANSWER = b'{"status":"success","data":{"resultType":"vector","result":[]}}'
PREFLIGHT_BRANCH = re.compile(r'"found", "(\w+)"')  # a branch of billing/collect/preflight.py's one query


def ledger_state(url: str) -> dict[str, list[tuple]]:
    """Every row of the ledger's tables, in a stable order, read with plain SQL."""
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            return {
                table.name: sorted((tuple(row) for row in conn.execute(select(table))), key=repr)
                for table in (chargeback, completed_days)
            }
    finally:
        engine.dispose()


def failure_sentence(exit_code: int, output: str) -> str:
    """The one `billing: ...` line of a failed run (exit 1, no traceback, nothing after it)."""
    assert exit_code == 1, output
    assert "Traceback" not in output, output
    sentences = [line for line in output.splitlines() if line.startswith("billing: ")]
    assert len(sentences) == 1, output
    assert output.strip().splitlines()[-1] == sentences[0], output
    return sentences[0]


@dataclass(frozen=True)
class Reply:
    """What a StubServer sends for one request; `length` may claim more bytes than `body` has."""

    body: bytes = EMPTY_ANSWER
    status: int = 200
    delay: float = 0.0
    length: int | None = None


class StubServer:
    """A real HTTP server on 127.0.0.1 whose n-th answer (from 1) is `answer(n, path, body)`."""

    def __init__(self, answer: Callable[[int, str, bytes], Reply]):
        self.requests = 0
        lock = threading.Lock()
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with lock:
                    stub.requests += 1
                    number = stub.requests
                reply = answer(number, self.path, body)
                time.sleep(reply.delay)
                try:
                    self.send_response(reply.status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(reply.length or len(reply.body)))
                    self.end_headers()
                    self.wfile.write(reply.body)
                except OSError:  # the client is gone, e.g. a run that was terminated
                    pass

            def log_message(self, *args) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def every_family(answer: Callable[[int, str, bytes], Reply]) -> Callable[[int, str, bytes], Reply]:
    """`answer`, except that the preflight's query finds every family it asks about: a store whose fault comes
    while the day is collected, not one that lacks series (tests/integration/test_preflight_prometheus.py)."""

    def answering(number: int, path: str, body: bytes) -> Reply:
        branches = PREFLIGHT_BRANCH.findall(parse_qs(body.decode()).get("query", [""])[0])
        if not branches:
            return answer(number, path, body)
        found = [{"metric": {"found": branch}, "value": [0, "1"]} for branch in branches]
        return Reply(json.dumps({"status": "success", "data": {"resultType": "vector", "result": found}}).encode())

    return answering


@contextmanager
def stub_server(answer: Callable[[int, str, bytes], Reply]) -> Iterator[StubServer]:
    server = StubServer(answer)
    try:
        yield server
    finally:
        server.stop()


def forward_to(upstream: str, delay: Callable[[], float] = lambda: 0.0) -> Callable[[int, str, bytes], Reply]:
    """An answer function that passes each request on to a real Prometheus, `delay()` seconds late."""

    def answer(number: int, path: str, body: bytes) -> Reply:
        request = Request(upstream + path, data=body, headers={"Content-Type": "application/x-www-form-urlencoded"})
        with urlopen(request, timeout=60) as response:
            return Reply(response.read(), response.status, delay())

    return answer


@contextmanager
def silent_server() -> Iterator[str]:
    """The URL of a server that accepts connections (the kernel does) and never answers."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(64)
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"


@contextmanager
def trickling_server(body: bytes, every: float, headers_at_once: bool = False) -> Iterator[str]:
    """The URL of a server that answers every request with `body` (a 200 of JSON) one byte every `every` seconds,
    status line and headers included unless `headers_at_once`: never silent for as long as a read's timeout, and
    never done."""
    head = (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n"
            b"Content-Length: %d\r\n\r\n" % len(body))
    stopped = threading.Event()

    def trickle(connection: socket.socket) -> None:
        with connection, suppress(OSError):  # the client gave up
            while b"\r\n\r\n" not in connection.recv(65536):
                pass
            if headers_at_once:
                connection.sendall(head)
            for byte in body if headers_at_once else head + body:
                if stopped.wait(every):
                    return
                connection.sendall(bytes([byte]))

    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        listener.settimeout(0.1)

        def accept() -> None:
            while not stopped.is_set():
                with suppress(TimeoutError):
                    threading.Thread(target=trickle, args=(listener.accept()[0],), daemon=True).start()

        accepting = threading.Thread(target=accept, daemon=True)
        accepting.start()
        try:
            yield f"http://127.0.0.1:{listener.getsockname()[1]}"
        finally:
            stopped.set()
            accepting.join()
