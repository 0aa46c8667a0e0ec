"""How long does `billing` take to start: --version, --help, and a report of the demo ledger?

    python -m bench.cli_start [--runs 10] [--before CHECKOUT]

Bills the demo's three days (recorded answers, no servers) in a scratch
directory, then runs each command as a whole process (`python -m billing`,
the interpreter's start included) --runs times, taking turns, and prints the
median, fastest and slowest wall time, the median CPU time (user and system:
a machine loaded by others stretches it less than the wall time) and the
median time the process spent importing (`-X importtime`, run apart).
Each command runs once untimed first. Bytecode is cached as an installed
billing has it (pip compiles on install), even where PYTHONDONTWRITEBYTECODE
is set, below the scratch directory, so the checkout stays clean.

With --before, each command also runs with the billing package of another
checkout (e.g. `git worktree add --detach /tmp/before <commit>`), in turn
with this one's.

The targets, on an idle machine: --version and --help under 0.3 s,
the report under 1 s (docs/performance.md "Starting the command").
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.collect_bench import ROOT, Child, run_measured

DEMO_DAYS = ["--from", "2026-11-16", "--to", "2026-11-18"]
# a line of -X importtime's report, "import time: self | cumulative | name", of an import no other import made
TOP_LEVEL_IMPORT = re.compile(r"^import time:\s+\d+ \|\s+(\d+) \| \S")


def commands(config: Path) -> dict[str, list[str]]:
    return {
        "billing --version": ["--version"],
        "billing --help": ["--help"],
        "billing report (demo ledger)": ["report", "--config", str(config), "--team", "robotics", *DEMO_DAYS],
    }


def import_seconds(args: list[str], tree: Path) -> float:
    """What `python -m billing *args` spent importing."""
    result = subprocess.run([sys.executable, "-X", "importtime", "-m", "billing", *args], cwd=tree,
                            capture_output=True, text=True, check=True)
    return seconds_importing(result.stderr)


def seconds_importing(importtime: str) -> float:
    """The sum of the cumulative times of the imports no other import made, from -X importtime's report."""
    return sum(int(match[1]) for match in map(TOP_LEVEL_IMPORT.match, importtime.splitlines()) if match) / 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10, help="runs of each command (default 10)")
    parser.add_argument("--before", type=Path, help="a checkout whose billing package to time as well")
    options = parser.parse_args()
    trees = {"": ROOT, **({" (before)": options.before.resolve()} if options.before else {})}
    with tempfile.TemporaryDirectory(prefix="cli-start-") as scratch:
        work = Path(scratch)
        os.environ.pop("PYTHONDONTWRITEBYTECODE", None)  # for the children, which inherit this environment
        os.environ["PYTHONPYCACHEPREFIX"] = str(work / "bytecode")
        os.symlink(ROOT / "fixtures", work / "fixtures")  # the demo's paths are relative to its config file
        config = work / "fixtures" / "demo" / "billing.yaml"
        billed = run_measured("billing", ["backfill", "--config", str(config), *DEMO_DAYS], work / "backfill.log")
        print(f"demo ledger billed in {billed.wall:.1f} s; load average {os.getloadavg()[0]:.1f} "
              f"on {os.cpu_count()} cores", flush=True)
        timed = {name + which: (args, tree) for name, args in commands(config).items() for which, tree in trees.items()}
        runs: dict[str, list[Child]] = {name: [] for name in timed}
        imports: dict[str, list[float]] = {name: [] for name in timed}
        for args, tree in timed.values():  # once untimed: bytecode written, files in the page cache
            run_measured("billing", args, work / "command.log", tree)
        for _ in range(options.runs):  # taking turns, so that a burst of load falls on all of them alike
            for name, (args, tree) in timed.items():
                runs[name].append(run_measured("billing", args, work / "command.log", tree))
                imports[name].append(import_seconds(args, tree))
        print(f"{'command':<39} {'median':>7} {'fastest':>8} {'slowest':>8} {'CPU':>7} {'imports':>8}   "
              f"({options.runs} runs; load average {os.getloadavg()[0]:.1f} at the end)")
        for name, children in runs.items():
            walls = [child.wall for child in children]
            print(f"{name:<39} {statistics.median(walls):6.3f}s {min(walls):7.3f}s {max(walls):7.3f}s "
                  f"{statistics.median(child.cpu for child in children):6.3f}s "
                  f"{statistics.median(imports[name]):7.3f}s", flush=True)


if __name__ == "__main__":
    main()
