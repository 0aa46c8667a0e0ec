"""billing serve's test client: who visits, what each may see, the directory it reads."""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from billing import frames
from billing.charge.bill import DayBill
from billing.config import Config
from billing.directory.people import Directory, Person, Team, directory_to_json
from billing.ledger.database import open_ledger
from billing.ledger.write import replace_day
from billing.web.app import create_app
from fixtures.servers import ManagedProcess, accepts_connections, free_port
from tests.helpers.config import MINIMAL_CONFIG
from tests.helpers.report_ledger import DAY, ROWS, frame, write_ledger

RANGE = "from=2026-11-01&to=2026-11-20"


PEOPLE = ["alice", "bob", "carol", "dave", "root"]


TEAMS = {  # bob is on two teams; carol leads robotics, dave leads vision
    "robotics": Team("robotics", ("alice", "bob", "carol"), ("carol",)),
    "vision": Team("vision", ("bob", "dave"), ("dave",)),
}


TRUSTED, UNTRUSTED = "127.0.0.1", "10.1.2.3"


def web_config(url: str, **web) -> Config:
    return Config.model_validate({**MINIMAL_CONFIG, "currency": "USD", "database": url,
                                  "web": {"admins": ["root"], **web}})


def store_directory(url: str) -> str:
    """The directory snapshot a run stores with its day: who leads which team."""
    directory = Directory({uid: Person(uid, uid.title(), f"{uid}@example.org") for uid in PEOPLE}, TEAMS)
    engine = open_ledger(url)
    wasted = pd.DataFrame([("jaguar", "alice", "robotics", "alice", 3.5, None, None),  # alice held 3.5 idle GPU-hours
                           ("ibis", "stray", "unallocated", None, None, None, None)], columns=frames.CHARGED_WASTE.columns)
    replace_day(engine, DAY, DayBill(frame(ROWS[DAY]), wasted=wasted), "USD", snapshot=directory_to_json(directory))
    engine.dispose()
    return url


@pytest.fixture(scope="module")
def ledger_url(tmp_path_factory) -> str:
    return store_directory(write_ledger(tmp_path_factory.mktemp("web") / "ledger.db"))


@pytest.fixture(scope="module")
def client(ledger_url):
    return create_app(web_config(ledger_url)).test_client()


def get(client, path: str, user: str | None, address: str = TRUSTED):
    headers = {"X-Forwarded-User": user} if user is not None else {}
    return client.get(path, headers=headers, environ_base={"REMOTE_ADDR": address})


OK, DENIED = 200, 403


VISITORS = ["alice", "bob", "carol", "root", "mallory"]  # a person, on two teams, a lead, an admin, unknown


MATRIX = {  # route -> status for each visitor in VISITORS
    "/": [303, 303, 303, 303, 303],
    f"/me?{RANGE}": [OK, OK, OK, OK, OK],  # carol, root and mallory have no costs: an empty page says so
    f"/me?{RANGE}&by=namespace&format=csv": [OK, OK, 404, 404, 404],
    f"/teams/robotics?{RANGE}": [DENIED, DENIED, OK, OK, DENIED],
    f"/teams/robotics?{RANGE}&by=person&format=csv": [DENIED, DENIED, OK, OK, DENIED],
    f"/teams/vision?{RANGE}": [DENIED, DENIED, DENIED, OK, DENIED],
    # names match without regard to case, as uids do, for leads and admins alike; pages use the ledger's spelling
    f"/teams/Vision?{RANGE}": [DENIED, DENIED, DENIED, OK, DENIED],
    f"/teams/ROBOTICS?{RANGE}": [DENIED, DENIED, OK, OK, DENIED],
    f"/all?{RANGE}": [DENIED, DENIED, DENIED, OK, DENIED],
    f"/all?{RANGE}&by=team&format=csv": [DENIED, DENIED, DENIED, OK, DENIED],
    f"/api/v1/costs?{RANGE}": [OK, OK, 404, OK, 404],  # default: yourself; an admin: all teams
    f"/api/v1/costs?{RANGE}&person=alice": [OK, DENIED, DENIED, OK, DENIED],
    f"/api/v1/costs?{RANGE}&person=bob&by=team": [DENIED, OK, DENIED, OK, DENIED],
    f"/api/v1/costs?{RANGE}&team=robotics&by=person": [DENIED, DENIED, OK, OK, DENIED],
    f"/api/v1/costs?{RANGE}&team=vision": [DENIED, DENIED, DENIED, OK, DENIED],
    f"/api/v1/costs?{RANGE}&team=ROBOTICS": [DENIED, DENIED, OK, OK, DENIED],
    f"/api/v1/costs?{RANGE}&person=BOB": [DENIED, OK, DENIED, OK, DENIED],
}


REPOSITORY = Path(__file__).resolve().parents[2]


def serve_config(tmp_path: Path, database: str = "", currency: str = "USD", changes: dict | None = None,
                 **web) -> Path:
    """tmp_path/billing.yaml for `billing serve`: header auth and `web` keys over the hand-worked ledger, or over
    `database` (a ledger with its directory stored, e.g. the demo's); `changes` replace top-level keys."""
    config = {**MINIMAL_CONFIG, "currency": currency, "web": {"admins": ["root"], **web},
              "database": database or store_directory(write_ledger(tmp_path / "ledger.db")), **(changes or {})}
    (tmp_path / "billing.yaml").write_text(yaml.safe_dump(config))
    return tmp_path / "billing.yaml"


def serve_command(config: Path, port: int) -> list:
    return [sys.executable, "-m", "billing", "--log-format", "json", "serve", "--port", port, "--config", config]


def start_serve(tmp_path: Path, database: str = "", currency: str = "USD", changes: dict | None = None,
                **web) -> tuple[int, ManagedProcess]:
    """A real `billing serve` process (JSON log in tmp_path/serve.log) of `serve_config`."""
    return serve_of(serve_config(tmp_path, database, currency, changes, **web), tmp_path)


def serve_of(config: Path, tmp_path: Path) -> tuple[int, ManagedProcess]:
    """A real `billing serve` process of the configuration file `config` (JSON log in tmp_path/serve.log)."""
    port = free_port()
    process = ManagedProcess(serve_command(config, port), tmp_path / "serve.log", cwd=REPOSITORY)
    process.wait_until(accepts_connections(port), "billing serve", timeout=30)
    return port, process


def start_mcp(tmp_path: Path, config: Path) -> tuple[int, ManagedProcess]:
    """A real `billing mcp --http` process (uvicorn; JSON log in tmp_path/mcp.log) of `config`."""
    port = free_port()
    process = ManagedProcess([sys.executable, "-m", "billing", "--log-format", "json", "mcp", "--http", "--port", port,
                              "--config", config], tmp_path / "mcp.log", cwd=REPOSITORY)
    process.wait_until(accepts_connections(port), "billing mcp --http", timeout=30)
    return port, process
