"""`billing mcp`'s tools through the MCP SDK's own client, connected in-process, over the hand-worked ledger.

The ledger is tests/helpers/report_ledger.py (figures worked out by hand there) with the directory of
tests/helpers/serve.py: carol leads robotics, dave leads vision, bob is on both teams, root is the admin.
Each tool is asked by each kind of visitor under serve's rules; each answer is compared with the command
line's answer to the same question (`billing report --format json`, `billing statement --format json`) and
with figures worked out by hand; bad arguments come back as tool errors of one sentence.
The same server over stdio and over HTTP in real processes: tests/integration/test_mcp_process.py.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

import anyio
import httpx2
import pytest
import yaml
from click.testing import CliRunner
from mcp import Client
from mcp.shared.exceptions import MCPError

from billing.cli import main
from billing.config import WebConfig, load_config
from billing.directory.ldap import WrongPassword
from billing.directory.people import DirectoryError
from billing.ledger.database import LedgerError, open_ledger
from billing.publish import answers
from billing.web.mcp_server import PATH, UID_KEY, SignIn, build_server, http_app
from billing.web.security import Guard
from tests.helpers.serve import UNTRUSTED, serve_config

BUDGETS = {"budgets": {"monthly": {"robotics": 100}}}  # robotics may spend 100 USD a month
NOVEMBER = {"first_day": "2026-11-01", "last_day": "2026-11-20"}
VISITORS = ["alice", "bob", "carol", "dave", "root", "mallory"]  # person, on two teams, lead, second lead, admin, unknown
TOOLS = ["costs", "changes", "waste", "budget", "statement", "figure_source"]
BEFORE_AFTER = {"before_first_day": "2026-11-19", "before_last_day": "2026-11-19",
                "after_first_day": "2026-11-20", "after_last_day": "2026-11-20"}


@pytest.fixture(scope="module")
def config_path(tmp_path_factory) -> Path:
    return serve_config(tmp_path_factory.mktemp("mcp"), changes=BUDGETS)


def ask(config_path: Path, uid: str, calls: list[tuple[str, dict]]) -> list:
    """The results of the tool calls made in order by `uid`'s assistant (an SDK client) in one session."""
    config = load_config(config_path)
    server = build_server(config, open_ledger(config.database), lambda ctx: uid)

    async def session() -> list:
        async with Client(server) as client:
            return [await client.call_tool(name, arguments) for name, arguments in calls]

    return anyio.run(session)


def answer(result) -> dict:
    """The tool's document: its structured content, which is its text read as JSON (the SDK's client has checked
    it against the tool's output schema)."""
    assert not result.is_error, result.content[0].text
    assert result.structured_content == json.loads(result.content[0].text)
    return result.structured_content


def command_json(config_path: Path, *args: str) -> dict:
    """What `billing ... --format json` prints for the same question."""
    result = CliRunner().invoke(main, [*args, "--format", "json", "--config", str(config_path)])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_every_tool_says_what_it_answers_in_which_units_and_currency(config_path):
    config = load_config(config_path)
    server = build_server(config, open_ledger(config.database), lambda ctx: "root")

    async def listed():
        async with Client(server) as client:
            return (await client.list_tools()).tools

    tools = {tool.name: tool for tool in anyio.run(listed)}
    assert sorted(tools) == sorted(TOOLS)
    units = {"costs": "GPU-hours", "changes": "GPU-h", "waste": "GPU-hours", "budget": "fractions",
             "statement": "in USD", "figure_source": "per resource-hour"}
    for name, tool in tools.items():
        assert tool.annotations.read_only_hint is True, name
        assert units[name] in tool.description, name
        assert "Money is in USD" in tool.description or name == "waste", name
    assert "no money" in tools["waste"].description


# (tool, arguments, whether each of VISITORS gets an answer (True) or a refusal (False)), as serve decides
MATRIX = [
    ("costs", NOVEMBER, [True, True, False, False, True, False]),  # carol, dave, mallory own no namespace
    ("costs", {"team": "robotics", **NOVEMBER}, [False, False, True, False, True, False]),
    ("costs", {"team": "ROBOTICS", **NOVEMBER}, [False, False, True, False, True, False]),
    ("costs", {"team": "vision", **NOVEMBER}, [False, False, False, True, True, False]),
    ("costs", {"person": "alice", **NOVEMBER}, [True, False, False, False, True, False]),
    ("costs", {"person": "BOB", "by": "team", **NOVEMBER}, [False, True, False, False, True, False]),
    ("changes", {"team": "robotics", **BEFORE_AFTER}, [False, False, True, False, True, False]),
    ("changes", {"person": "bob", **BEFORE_AFTER}, [False, True, False, False, True, False]),
    ("waste", {"team": "robotics", **NOVEMBER}, [False, False, True, False, True, False]),
    ("waste", {"person": "alice", **NOVEMBER}, [True, False, False, False, True, False]),
    ("budget", {"team": "robotics", "as_of": "2026-11-20"}, [False, False, True, False, True, False]),
    ("budget", {"team": "vision", "as_of": "2026-11-20"}, [False, False, False, True, True, False]),
    ("statement", {"month": "2026-11", "team": "robotics"}, [False, False, True, False, True, False]),
    ("statement", {"month": "2026-11"}, [False, False, False, False, True, False]),
    ("figure_source", {"day": "2026-11-20", "person": "alice"}, [True, False, False, False, True, False]),
    ("figure_source", {"day": "2026-11-20", "team": "vision"}, [False, False, False, True, True, False]),
]


@pytest.mark.parametrize("visitor", VISITORS)
def test_who_may_see_what(config_path, visitor):
    calls = [(name, arguments) for name, arguments, _ in MATRIX]
    results = ask(config_path, visitor, calls)
    answered = [not result.is_error for result in results]
    expected = [allowed[VISITORS.index(visitor)] for _, _, allowed in MATRIX]
    assert dict(zip(map(str, calls), answered)) == dict(zip(map(str, calls), expected))
    for result in results:
        if result.is_error:  # a refusal names who and what, never a figure of anyone
            text = result.content[0].text
            assert "\n" not in text and not any(ch.isdigit() for ch in text), text


def test_a_refusal_says_why_in_one_sentence(config_path):
    [lead, person] = ask(config_path, "alice", [("costs", {"team": "robotics"}), ("costs", {"person": "bob"})])
    assert lead.content[0].text.startswith("alice is not a lead of team 'robotics'")
    assert person.content[0].text == "alice may see only their own costs, not those of 'bob'"


def test_a_lead_asking_for_a_team_the_ledger_does_not_know_is_told_so(config_path):
    """As docs/mcp.md promises, for leads as for admins; a person that may not be seen is not told whether the
    ledger knows them."""
    [team, person] = ask(config_path, "carol", [("costs", {"team": "robotix"}), ("costs", {"person": "nobody"})])
    assert (team.is_error, team.content[0].text) == (True, "no team named 'robotix' in the ledger")
    assert (person.is_error, person.content[0].text) == (True, "carol may see only their own costs, not those of 'nobody'")


def listing(config_path: Path) -> tuple[object, dict]:
    """The server's capabilities and its tools by name, as the SDK's client sees them after initialize."""
    config = load_config(config_path)
    server = build_server(config, open_ledger(config.database), lambda ctx: "root")

    async def listed():
        async with Client(server) as client:
            return client.server_capabilities, (await client.list_tools()).tools

    capabilities, tools = anyio.run(listed)
    return capabilities, {tool.name: tool for tool in tools}


def test_every_tool_declares_typed_arguments_and_refuses_others(config_path):
    _, tools = listing(config_path)
    for name, tool in tools.items():
        schema = tool.input_schema
        assert schema["additionalProperties"] is False, name
        assert all(spec["type"] == "string" and spec["description"] for spec in schema["properties"].values()), name
    dates = {name: sorted(arg for arg, spec in tool.input_schema["properties"].items() if spec.get("format") == "date")
             for name, tool in tools.items()}
    assert dates == {"costs": ["first_day", "last_day"], "waste": ["first_day", "last_day"], "budget": ["as_of"],
                     "changes": sorted(BEFORE_AFTER), "statement": [], "figure_source": ["day"]}
    assert tools["costs"].input_schema["properties"]["by"]["enum"] == [
        "team", "person", "namespace", "cluster", "resource", "gpu_model", "day", "workload", "rows"]
    assert {name: tool.input_schema["required"] for name, tool in tools.items()} == {
        "costs": [], "waste": [], "changes": list(BEFORE_AFTER), "budget": ["team"], "statement": ["month"],
        "figure_source": ["day"]}


def test_a_cost_label_is_a_word_of_by(tmp_path):
    config_path = serve_config(tmp_path, changes={**BUDGETS, "cost_labels": ["experiment"]})
    _, tools = listing(config_path)
    assert tools["costs"].input_schema["properties"]["by"]["enum"][-2:] == ["label:experiment", "rows"]


def test_every_tool_declares_its_answer_with_units_and_currency(config_path):
    _, tools = listing(config_path)
    for name, tool in tools.items():
        schema = tool.output_schema
        assert schema["type"] == "object" and schema["required"], name
        assert schema["properties"]["currency" if name != "waste" else "rows"], name
    costs = tools["costs"].output_schema["properties"]
    assert costs["total_cost"]["description"].startswith("USD, unrounded")
    assert "gpu_hours in GPU-hours" in costs["rows"]["items"]["description"]
    assert "hours_before and hours_after in resource-hours" in tools["changes"].output_schema[
        "properties"]["by_resource"]["items"]["description"]
    assert "no money" in tools["waste"].output_schema["properties"]["rows"]["description"]


def test_the_server_offers_tools_only_and_answers_other_methods_as_json_rpc_says(config_path):
    """No capability advertised without something behind it; a method not offered is -32601 (method not found),
    a tool it does not have -32602 (invalid params), as the MCP specification's tools page gives it."""
    capabilities, _ = listing(config_path)
    offered = {name for name, value in capabilities.model_dump(exclude_none=True).items() if value}
    assert offered == {"tools"}
    config = load_config(config_path)
    server = build_server(config, open_ledger(config.database), lambda ctx: "root")

    async def errors() -> list[tuple[int, str]]:
        found = []
        async with Client(server) as client:
            for call in (client.get_prompt("robotics"), client.list_resources(), client.call_tool("invoices", {})):
                with pytest.raises(MCPError) as raised:
                    await call
                found.append((raised.value.error.code, raised.value.error.message))
        return found

    assert anyio.run(errors) == [(-32601, "Method not found"), (-32601, "Method not found"), (
        -32602, "no tool named 'invoices': the tools are costs, changes, waste, budget, statement, figure_source")]


BAD = [  # arguments -> the one sentence the admin's assistant reads
    (("costs", {"team": "robotix"}), "no team named 'robotix' in the ledger"),  # no closest names: they tell who has costs
    (("costs", {"person": "nobody"}), "no person named 'nobody' in the ledger"),
    (("costs", {"first_day": "1969-12-31"}), "first_day='1969-12-31' is not a day between 1970-01-01 and 9999-12-30"),
    (("costs", {"first_day": "2026-11-31"}), "first_day='2026-11-31' is not a date like 2026-11-20"),
    (("costs", {"first_day": "2025-01-01", "last_day": "2026-11-20"}),
     "the range 2025-01-01 to 2026-11-20 is longer than 366 days; ask for a shorter one"),
    (("costs", {"first_day": "2026-11-20", "last_day": "2026-11-01"}), "the range ends (2026-11-01) before it starts (2026-11-20)"),
    (("costs", {"team": "robotics", "person": "alice"}), "give team or person, not both"),
    (("costs", {"by": "colour"}), "by='colour' is not one of team, person, namespace, cluster, resource, gpu_model, "
                                  "day, workload or rows"),
    (("costs", {"teem": "robotics"}), "costs takes no argument 'teem': it takes team, person, first_day, last_day or by"),
    (("costs", {"team": 5}),
     "team=5 is not a string: give it in quotes, a team's name (a lead sees their teams, admins all)"),
    (("changes", {**BEFORE_AFTER, "after_first_day": ["2026-11-20"]}),
     'after_first_day=["2026-11-20"] is not a string: give it in quotes, the first day of the range asked, YYYY-MM-DD'),
    (("budget", {"as_of": "2026-11-20"}), "budget needs team (the team's name)"),
    (("costs", {"first_day": "2026-11-02", "last_day": "2026-11-09"}),
     "no day in this range was ever run (2026-11-02 to 2026-11-09): run them with billing run or billing backfill first"),
    (("budget", {"team": "robotics", "as_of": "tomorrow"}), "as_of='tomorrow' is not a date like 2026-11-20"),
    (("statement", {"month": "2026-13"}), "month='2026-13' is not a month like 2026-11"),
    (("changes", {**BEFORE_AFTER, "after_last_day": "99999-01-01"}),
     "after_last_day='99999-01-01' is not a date like 2026-11-20"),
]


def test_bad_arguments_are_tool_errors_of_one_sentence(config_path):
    results = ask(config_path, "root", [call for call, _ in BAD])
    assert [(result.is_error, result.content[0].text) for result in results] == [(True, said) for _, said in BAD]


# The same question asked of the command line: the tool's document is the command's, figure for figure
SAME_QUESTION = [
    (("costs", {"team": "robotics", "by": "person", **NOVEMBER}),
     ["report", "--team", "robotics", "--by", "person", "--from", "2026-11-01", "--to", "2026-11-20"]),
    (("costs", {"person": "alice", "by": "rows", **NOVEMBER}),
     ["report", "--person", "alice", "--from", "2026-11-01", "--to", "2026-11-20"]),
    (("costs", {"person": "alice", **NOVEMBER}),  # by default a person's or a team's costs per namespace
     ["report", "--person", "alice", "--by", "namespace", "--from", "2026-11-01", "--to", "2026-11-20"]),
    (("costs", {"team": "robotics", **NOVEMBER}),
     ["report", "--team", "robotics", "--by", "namespace", "--from", "2026-11-01", "--to", "2026-11-20"]),
    (("costs", NOVEMBER), ["report", "--all-teams", "--by", "team", "--from", "2026-11-01", "--to", "2026-11-20"]),
    (("costs", {"by": "cluster", **NOVEMBER}),
     ["report", "--all-teams", "--by", "cluster", "--from", "2026-11-01", "--to", "2026-11-20"]),
    (("costs", {"team": "vision", "by": "workload", **NOVEMBER}),
     ["report", "--team", "vision", "--by", "workload", "--from", "2026-11-01", "--to", "2026-11-20"]),
    (("statement", {"month": "2026-11", "team": "robotics"}), ["statement", "--month", "2026-11", "--team", "robotics"]),
    (("statement", {"month": "2026-11"}), ["statement", "--month", "2026-11"]),
]


@pytest.mark.parametrize(("call", "command"), SAME_QUESTION)
def test_a_tool_answers_as_the_command_line(config_path, call, command):
    [result] = ask(config_path, "root", [call])
    assert answer(result) == command_json(config_path, *command)


def test_costs_are_the_hand_worked_figures(config_path):
    [robotics] = ask(config_path, "carol", [("costs", {"team": "robotics", "by": "namespace", **NOVEMBER})])
    found = answer(robotics)
    # November 1 to 20: team-robotics 12.00 + 1.50; alice 12.00 + 24.00 + 1.20; bob's robotics half 5.90
    assert round(found["total_cost"], 2) == 56.60
    assert {row["namespace"]: round(row["cost"], 2) for row in found["rows"]} == {
        "team-robotics": 13.50, "alice": 37.20, "bob": 5.90}
    assert found["budget"] == 100


def test_budget_is_the_reports_budget_and_forecast(config_path):
    [result] = ask(config_path, "carol", [("budget", {"team": "robotics", "as_of": "2026-11-20"})])
    found = answer(result)
    report = command_json(config_path, "report", "--team", "robotics", "--to", "2026-11-20")
    assert {key: found[key] for key in ("budget", "month_to_date", "forecast", "budget_month")} == {
        key: report[key] for key in ("budget", "month_to_date", "forecast", "budget_month")}
    # by hand: 12.00 + 0 + 12.00 + 32.60 to the 20th; the forecast adds the mean of the last billed days
    # (Oct 25 240.00, Nov 1 12.00, Nov 10 0, Nov 19 12.00, Nov 20 32.60: 296.60 / 5 = 59.32) for the 26 days not billed
    assert round(found["month_to_date"], 2) == 56.60 and round(found["used"], 4) == 0.566
    assert round(found["forecast"], 2) == round(56.60 + 59.32 * 26, 2) and found["days_left"] == 26


def test_changes_name_what_moved_and_whether_hours_or_prices(config_path):
    [result] = ask(config_path, "carol", [("changes", {"team": "robotics", **BEFORE_AFTER})])
    found = answer(result)
    before = command_json(config_path, "report", "--team", "robotics", "--by", "namespace", "--from", "2026-11-19",
                          "--to", "2026-11-19")
    after = command_json(config_path, "report", "--team", "robotics", "--by", "namespace", "--from", "2026-11-20",
                         "--to", "2026-11-20")
    assert (found["before"]["total_cost"], found["after"]["total_cost"]) == (before["total_cost"], after["total_cost"])
    by_namespace = {row["namespace"]: (row["cost_before"], row["cost_after"]) for row in found["by_namespace"]}
    assert by_namespace == {namespace: ({r["namespace"]: r["cost"] for r in before["rows"]}.get(namespace, 0.0),
                                        {r["namespace"]: r["cost"] for r in after["rows"]}.get(namespace, 0.0))
                            for namespace in by_namespace}
    # by hand: the 19th 12.00 (alice's 5 GPU-h at 2.40), the 20th 32.60; alice +13.20 leads
    assert round(found["change"], 2) == 20.60
    assert [row["namespace"] for row in found["by_namespace"]] == ["alice", "bob", "team-robotics"]
    gpu = next(row for row in found["by_resource"] if row["resource"] == "gpu")
    # 10 GPU-h of alice's at 2.40 and bob's 2 at 2.95: more hours and a dearer mix, 2.40 -> 29.90 / 12
    assert (gpu["hours_before"], gpu["hours_after"]) == (5.0, 12.0)
    assert round(gpu["cost_per_hour_before"], 4) == 2.4 and round(gpu["cost_per_hour_after"], 4) == round(29.9 / 12, 4)


def test_waste_is_what_alice_held_idle(config_path):
    [team, own] = ask(config_path, "root", [("waste", {"team": "robotics", **NOVEMBER}),
                                            ("waste", {"person": "alice", **NOVEMBER})])
    # tests/helpers/serve.py stores 3.5 idle GPU-hours of alice's on 2026-11-20, no CPU or storage measure
    unmeasured = {"unused_cpu_core_hours": None, "unused_storage_gib_hours": None}
    assert answer(team)["rows"] == [{"owner": "alice", "idle_gpu_hours": 3.5, **unmeasured}]
    assert answer(own)["rows"] == [{"namespace": "alice", "idle_gpu_hours": 3.5, **unmeasured}]


def test_a_figure_source_is_the_days_rows_prices_and_run(config_path):
    [result] = ask(config_path, "alice", [("figure_source", {"day": "2026-11-20", "person": "alice"})])
    found = answer(result)
    report = command_json(config_path, "report", "--person", "alice", "--from", "2026-11-20", "--to", "2026-11-20")
    assert {key: found[key] for key in report} == report
    # alice's 10 GPU-h at 2.40 and 100 core-h at 0.012 on jaguar
    assert [(row["resource"], row["quantity"], row["unit_price"], row["cost"]) for row in found["rows"]] == [
        ("cpu", 100.0, 0.012, 1.2), ("gpu", 10.0, 2.4, 24.0)]
    assert set(found["prices"]) == {cluster["name"] for cluster in _clusters(config_path)}
    assert found["run"]["rows"] == 7 and found["run"]["completed_at"].startswith("20")
    assert any("Rule 8" in rule for rule in found["rules"])


def _clusters(config_path: Path) -> list[dict]:
    return yaml.safe_load(config_path.read_text())["clusters"]


def test_a_proxy_header_from_an_untrusted_address_is_refused_before_any_tool(config_path):
    """The HTTP application's sign-in (serve's web.trusted_proxies) seen from 10.1.2.3, which is no proxy."""
    config = load_config(config_path)
    app = http_app(config, open_ledger(config.database))

    async def post() -> httpx2.Response:
        transport = httpx2.ASGITransport(app=app, client=(UNTRUSTED, 4000))
        async with httpx2.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
            return await http.post(PATH, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                                   headers={"X-Forwarded-User": "root"})

    answer = anyio.run(post)
    assert (answer.status_code, answer.json()) == (401, {
        "error": f"the X-Forwarded-User header is trusted only from web.trusted_proxies, not from {UNTRUSTED}"})


def test_as_goes_with_stdio_only(config_path):
    """Over HTTP each request says who is asking: an --as there would be ignored, so it is refused."""
    result = CliRunner().invoke(main, ["mcp", "--http", "--as", "root", "--config", str(config_path)])
    assert result.exit_code == 2 and "--as is for stdio: over --http each request says who is asking" in result.output


def signed_in_as(app: SignIn, requests: list[tuple[str, dict[str, str]]]) -> list[tuple[int, str]]:
    """(status, body) of each request (peer address, headers) to `app`, which wraps an application that answers
    with the uid the sign-in put in the scope."""

    async def asked() -> list[tuple[int, str]]:
        answers = []
        for peer, headers in requests:
            transport = httpx2.ASGITransport(app=app, client=(peer, 4000))
            async with httpx2.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
                answer = await http.post(PATH, headers=headers)
            answers.append((answer.status_code, answer.text))
        return answers

    return anyio.run(asked)


async def uid_app(scope, receive, send) -> None:
    """A stand-in for the MCP application: answers with whom the sign-in named."""
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": scope["state"][UID_KEY].encode()})


def basic(uid: str, password: str, forwarded_for: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{uid}:{password}".encode()).decode(),
            "X-Forwarded-For": forwarded_for}


def test_behind_a_trusted_proxy_the_lockout_is_the_clients_address_not_the_proxys(config_path, monkeypatch):
    """As serve's login (tests/integration/test_web.py): keyed on the proxy's own address, a few failed sign-ins
    behind an Ingress would lock everyone out. The directory is a stand-in: any uid with the password "right"."""

    def authenticate(directory, uid: str, password: str) -> str:
        if password == "down":
            raise DirectoryError("ldaps://ldap.example.org: connection refused")
        if password != "right":
            raise WrongPassword("wrong user name or password")
        return uid

    monkeypatch.setattr("billing.web.security.authenticate", authenticate)
    monkeypatch.setenv("BILLING_SESSION_KEY", "k" * 32)
    config = load_config(config_path).model_copy(update={"web": WebConfig.model_validate(
        {"admins": ["root"], "auth": "ldap", "session_key_env": "BILLING_SESSION_KEY", "login_attempts": 3})})
    app = SignIn(uid_app, config, Guard(config.web))
    proxy = "127.0.0.1"  # a trusted proxy, forwarding for its clients
    answers = signed_in_as(app, [
        *[(proxy, basic(uid, "wrong", "198.51.100.7")) for uid in ("x1", "x2", "x3")],  # one client guesses
        (proxy, basic("bob", "right", "203.0.113.9")),  # another client behind the same proxy
        (proxy, basic("bob", "right", "198.51.100.7")),  # the guessing client, now locked out
        (proxy, {"X-Forwarded-For": "203.0.113.9"}),  # no credentials at all
        *[(proxy, basic("dave", "down", "203.0.113.5")) for _ in range(3)],  # the directory cannot say: not counted
        (proxy, basic("dave", "right", "203.0.113.5")),
    ])
    assert [status for status, _ in answers] == [401, 401, 401, 200, 429, 401, 503, 503, 503, 200]
    assert answers[6][1] == '{"error": "the directory cannot check passwords at the moment; try again later"}'
    assert answers[0][1] == '{"error": "wrong user name or password"}' and answers[3][1] == "bob"
    assert answers[5][1] == '{"error": "sign in first: send your user name and password (HTTP Basic)"}'


def test_a_ledger_that_fails_is_a_tool_error_and_the_next_call_is_answered(config_path, monkeypatch):
    """docs/faults.md: the ledger's sentence (naming web.database or database) reaches the assistant; the server
    keeps answering."""
    report = answers.report
    failures = iter([LedgerError("database sqlite:///ledger.db: reading the ledger failed; the server is down")])

    def failing_once(*args, **kwargs):
        for failure in failures:
            raise failure
        return report(*args, **kwargs)

    monkeypatch.setattr(answers, "report", failing_once)
    failed, answered = ask(config_path, "alice", [("costs", NOVEMBER), ("costs", NOVEMBER)])
    assert (failed.is_error, failed.content[0].text) == (
        True, "database sqlite:///ledger.db: reading the ledger failed; the server is down")
    assert round(answer(answered)["total_cost"], 2) == 37.20  # 12.00 + 24.00 + 1.20 (tests/web/test_app.py)


@pytest.mark.parametrize("method, headers, status, said", [
    ("DELETE", {"X-Forwarded-User": "alice"}, 405, "billing mcp answers POST only: it is stateless, with no event "
                                                   "stream to open and no session to end (DELETE)"),
    ("POST", {"X-Forwarded-User": "alice", "Origin": "null"}, 403, "billing does not answer pages of the origin "
                                                                     "'null'; allow it in web.allowed_origins"),
    ("POST", {"X-Forwarded-User": "alice", "Origin": "http://localhost:6274"}, 200, "alice"),  # a local page
    ("POST", {"X-Forwarded-User": "j\u00f6rg"}, 200, "j\u00f6rg"),  # sent as UTF-8
])
def test_before_the_sign_in_the_method_host_and_origin_are_checked(config_path, method, headers, status, said):
    config = load_config(config_path)
    app = SignIn(uid_app, config, Guard(config.web))

    async def asked() -> httpx2.Response:
        transport = httpx2.ASGITransport(app=app, client=("127.0.0.1", 4000))
        async with httpx2.AsyncClient(transport=transport, base_url="http://127.0.0.1:8090") as http:
            return await http.request(method, PATH, headers={k: v.encode() for k, v in headers.items()})

    answer = anyio.run(asked)
    assert answer.status_code == status
    assert (answer.text if status == 200 else answer.json()["error"]) == said
    assert answer.headers.get("Allow") == ("POST" if status == 405 else None)
