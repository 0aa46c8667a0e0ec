"""`billing mcp` against the official MCP test tools: the conformance suite's server scenarios
(`@modelcontextprotocol/conformance`) and the inspector's command line (`@modelcontextprotocol/inspector --cli`,
with `--strict`), at the versions of tests/mcp_tools/package-lock.json, on the Node.js 22 that the npm package
`node` there provides (`npm install --prefix tests/mcp_tools`, which .ci/run does).

The conformance suite and the inspector over HTTP reach a real `billing mcp --http` process behind a real nginx
that signs every request in as root (the authenticating proxy's `X-Forwarded-User`, passing the client's Host and
Origin on); the inspector also starts `billing mcp --as carol` on stdio itself. The ledger is
tests/helpers/report_ledger.py with the directory of tests/helpers/serve.py. The suite's scenarios that ask for
what billing does not offer (prompts, resources, logging, completions, sampling, elicitation, the test tools of its
reference server) are listed in NOT_APPLICABLE and docs/mcp.md with why, and checked to fail for that reason only.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from fixtures.servers import ManagedProcess, MissingProgram, accepts_connections, free_port, start_nginx
from tests.helpers.serve import REPOSITORY, serve_config
from tests.integration.test_mcp_process import command_json

BIN = REPOSITORY / "tests" / "mcp_tools" / "node_modules" / ".bin"
ROBOTICS = ["team=robotics", "first_day=2026-11-01", "last_day=2026-11-20"]
REPORT = ["report", "--team", "robotics", "--by", "namespace", "--from", "2026-11-01", "--to", "2026-11-20"]
TOOLS = ["costs", "changes", "waste", "budget", "statement", "figure_source"]

APPLICABLE = ["server-initialize", "ping", "tools-list", "server-sse-polling", "server-sse-multiple-streams",
              "dns-rebinding-protection"]
METHOD_NOT_FOUND = "MCP error -32601: Method not found"  # what billing answers a method it does not offer
NO_SUCH_TOOL = "MCP error -32602: no tool named 'test_"  # and a tool of the reference server
NOT_APPLICABLE = {  # scenario -> the error that shows it asks for what billing does not offer
    **{scenario: METHOD_NOT_FOUND for scenario in (
        "logging-set-level", "tools-call-with-logging", "completion-complete", "prompts-list", "prompts-get-simple",
        "prompts-get-with-args", "prompts-get-embedded-resource", "prompts-get-with-image", "resources-list",
        "resources-read-text", "resources-read-binary", "resources-templates-read", "resources-subscribe",
        "resources-unsubscribe")},
    **{scenario: NO_SUCH_TOOL for scenario in (
        "tools-call-simple-text", "tools-call-image", "tools-call-audio", "tools-call-embedded-resource",
        "tools-call-mixed-content", "tools-call-error", "tools-call-with-progress", "tools-call-sampling",
        "tools-call-elicitation", "elicitation-sep1034-defaults", "elicitation-sep1330-enums")},
    "json-schema-2020-12": "Tool 'json_schema_2020_12_tool' not found",
}


@pytest.fixture(scope="module")
def node(tmp_path_factory) -> dict[str, str]:
    """The environment the tools run in: tests/mcp_tools' Node.js first on PATH, a home of their own."""
    for program in ("node", "conformance", "inspector"):
        if not (BIN / program).exists():
            raise MissingProgram(f"{program!r} of tests/mcp_tools is not installed "
                                 "(npm install --prefix tests/mcp_tools)")
    home = tmp_path_factory.mktemp("node-home")
    return {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", "HOME": str(home),
            "MCP_CATALOG_PATH": str(home / "catalog.json"), "PYTHONPATH": str(REPOSITORY)}


@pytest.fixture(scope="module")
def config(tmp_path_factory) -> Path:
    return serve_config(tmp_path_factory.mktemp("mcp-tools"))


@pytest.fixture(scope="module")
def url(tmp_path_factory, config) -> str:
    """/mcp of a `billing mcp --http` process behind nginx, which signs every request in as root."""
    work = tmp_path_factory.mktemp("mcp-behind-nginx")
    port, front = free_port(), free_port()
    mcp = ManagedProcess([sys.executable, "-m", "billing", "--log-format", "json", "mcp", "--http", "--port", port,
                          "--config", config], work / "mcp.log", cwd=REPOSITORY)
    try:
        mcp.wait_until(accepts_connections(port), "billing mcp --http", timeout=30)
        nginx = start_nginx(work, f"""
            server {{
                listen 127.0.0.1:{front};
                location /mcp {{
                    proxy_pass http://127.0.0.1:{port};
                    proxy_set_header Host $http_host;
                    proxy_set_header X-Forwarded-User root;
                    proxy_set_header X-Forwarded-For $remote_addr;
                    proxy_http_version 1.1;
                    proxy_buffering off;
                }}
            }}""", [front])
        yield f"http://127.0.0.1:{front}/mcp"
        nginx.stop()
    finally:
        mcp.stop()


def run(node: dict[str, str], *args: str | Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(arg) for arg in args], env=node, capture_output=True, text=True, timeout=120,
                          cwd=REPOSITORY)


@pytest.fixture(scope="module")
def scenarios(node, url, tmp_path_factory) -> dict[str, list[dict]]:
    """Every server scenario of the suite run once: scenario -> its checks."""
    results = tmp_path_factory.mktemp("conformance")
    run(node, BIN / "conformance", "server", "--url", url, "--suite", "all", "-o", results)
    found = {re.sub(r"^server-|-\d{4}-\d\d-\d\dT.*$", "", folder.name): json.loads((folder / "checks.json").read_text())
             for folder in results.iterdir()}
    assert found, f"the conformance suite wrote no results below {results}"
    return found


def failures(checks: list[dict]) -> list[str]:
    return [f"{check['id']}: {check.get('errorMessage')}" for check in checks if check["status"] == "FAILURE"]


def test_every_scenario_applies_or_is_said_why_not(scenarios):
    """A scenario a later suite adds is seen here first; docs/mcp.md names each that does not apply."""
    assert sorted(scenarios) == sorted([*APPLICABLE, *NOT_APPLICABLE])
    docs = (REPOSITORY / "docs" / "mcp.md").read_text()
    assert [scenario for scenario in NOT_APPLICABLE if f"`{scenario}`" not in docs] == []


@pytest.mark.parametrize("scenario", APPLICABLE)
def test_a_scenario_that_applies_passes(scenarios, scenario):
    assert failures(scenarios[scenario]) == []


@pytest.mark.parametrize("scenario", sorted(NOT_APPLICABLE))
def test_a_scenario_that_does_not_apply_fails_only_for_asking_what_billing_does_not_offer(scenarios, scenario):
    found = failures(scenarios[scenario])
    assert found and all(NOT_APPLICABLE[scenario] in failure for failure in found), found


def inspector(node: dict[str, str], target: str | tuple[str, Path], *options: str, status: int = 0) -> dict:
    """What the inspector's command line prints (JSON) for `options`, asking the server at URL `target`, or
    `billing mcp --as UID` on stdio for `target` (UID, config) with the configuration in BILLING_CONFIG (the
    inspector reads a --config of its own); fails the test on another exit `status` than expected (5: the tool
    answered with an error) or a warning on stderr."""
    if isinstance(target, str):  # the URL first: a --tool-arg takes every word after it
        args = [target, *options]
    else:
        uid, config = target
        args = [*options, "--cwd", str(REPOSITORY), "-e", f"BILLING_CONFIG={config}", "-e", f"PYTHONPATH={REPOSITORY}",
                sys.executable, "-m", "billing", "mcp", "--as", uid]
    answered = run(node, BIN / "inspector", "--cli", *args)
    assert answered.returncode == status, answered.stdout + answered.stderr
    assert "Warning" not in answered.stderr, answered.stderr
    return json.loads(answered.stdout)


@pytest.mark.parametrize("transport", ["http", "stdio"])
def test_the_inspectors_strict_check_finds_every_tool_schema_portable(node, url, config, transport):
    listed = inspector(node, url if transport == "http" else ("carol", config), "--method", "tools/list", "--strict")
    assert [tool["name"] for tool in listed["tools"]] == TOOLS
    assert all(tool["outputSchema"]["type"] == "object" and tool["inputSchema"]["additionalProperties"] is False
               for tool in listed["tools"])


@pytest.mark.parametrize("transport", ["http", "stdio"])
def test_the_inspector_gets_the_reports_figures_as_structured_content(node, url, config, transport):
    """root through nginx, carol (robotics' lead) on stdio."""
    result = inspector(node, url if transport == "http" else ("carol", config), "--method", "tools/call",
                       "--tool-name", "costs", *[flag for pair in ROBOTICS for flag in ("--tool-arg", pair)])
    assert result.get("isError") is not True, result
    assert result["structuredContent"] == json.loads(result["content"][0]["text"]) == command_json(config, *REPORT)


def test_the_inspector_reads_a_wrong_argument_as_one_sentence(node, url):
    result = inspector(node, url, "--method", "tools/call", "--tool-name", "costs", "--tool-arg", "team=robotics",
                       "--tool-arg", "colour=blue", status=5)
    assert (result["isError"], result["content"][0]["text"]) == (
        True, "costs takes no argument 'colour': it takes team, person, first_day, last_day or by")
