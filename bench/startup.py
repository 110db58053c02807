"""Start-up wall time of `codefleet --help`, `tasks`, `run --help` and `demo --dry-run`, from the shell.

Each case is a command line run as a new process (spawn → exit, output
discarded); the cases are run round-robin (case 1, case 2, …, case 1, …) so
that a noisy, shared machine weighs on all of them alike. `--checkout DIR`
adds the same cases for another checkout's `.venv/bin/codefleet` (a frozen
clone of an earlier commit: before/after in one session). The demo runs in a
fresh `--run-dir` per call so that no run sees another's workspace. `tasks` asks a
port where nothing answers (`CODEFLEET_SERVER_URL`), so it prints its error and exits 1:
what it measures is the start-up up to its one request.

Bytecode: with `PYTHONDONTWRITEBYTECODE` set (as in this project's agent
sessions) and a venv made by `uv sync` (which does not compile), no `.pyc`
exists anywhere and every run compiles every module it imports from source:
about 0.9 s of the demo's CPU and 0.2 s of `--help`'s. A pip install compiles
at install time, and Python caches on first use wherever the variable is not
set, so `--bytecode cached` measures what an installation gives from its
second run: each case runs with its own `PYTHONPYCACHEPREFIX` under a
temporary directory (the checkouts are not written to), filled by the
warm-up. `--bytecode both` measures each case both ways.

    uv run python -m bench.startup --runs 5
    uv run python -m bench.startup --runs 5 --checkout /tmp/cf-base --bytecode both --json out.json
    uv run python -m bench.startup --runs 9 --launcher venv --command help --command tasks \
        --checkout /tmp/cf-head --checkout /tmp/cf-base --bytecode cached
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COMMANDS = {
    "help": ["--help"],
    "demo": ["demo", "--dry-run"],
    "tasks": ["tasks"],
    "run-help": ["run", "--help"],
}
NO_SERVER = "http://127.0.0.1:9"  # `tasks` asks here: nothing answers, it exits 1


@dataclass(frozen=True, slots=True)
class Case:
    label: str
    argv: tuple[str, ...]
    demo: bool
    pycache: Path | None = None  # cached bytecode: PYTHONPYCACHEPREFIX for this case
    asks_server: bool = False  # `tasks`: asks NO_SERVER, so its exit 1 is expected


def cases(
    checkouts: list[Path], launchers: list[str], which: list[str], caches: list[Path | None]
) -> list[Case]:
    """Every (checkout, launcher, command, bytecode) combination, in a fixed order.

    `caches` holds None (bytecode as the environment has it) and/or a directory
    under which each case gets its own bytecode cache.
    """
    out: list[Case] = []
    for checkout in checkouts:
        name = "this" if checkout == ROOT else checkout.name
        for launcher in launchers:
            prefix = (
                ["uv", "run", "--project", str(checkout), "--frozen", "codefleet"]
                if launcher == "uv"
                else [str(checkout / ".venv/bin/codefleet")]
            )
            for command in which:
                launch = "uv run codefleet" if launcher == "uv" else ".venv/bin/codefleet"
                label = f"{name} {launch} {' '.join(COMMANDS[command])}"
                for cache in caches:
                    own = None if cache is None else cache / f"case-{len(out)}"
                    out.append(
                        Case(
                            label + (" [cached bytecode]" if own else ""),
                            (*prefix, *COMMANDS[command]),
                            command == "demo",
                            own,
                            command == "tasks",
                        )
                    )
    return out


def environment(case: Case) -> dict[str, str] | None:
    """The case's environment: this one, or with a bytecode cache Python may write to
    (and, for `tasks`, the address where no server answers)."""
    if case.pycache is None and not case.asks_server:
        return None
    env = dict(os.environ)
    if case.pycache is not None:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(case.pycache)
    if case.asks_server:
        env["CODEFLEET_SERVER_URL"] = NO_SERVER
    return env


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_once(case: Case) -> tuple[float, float]:
    """Wall and CPU seconds (the process and its children) of one spawn → exit.

    A failing command is an error, not a figure.
    """
    with tempfile.TemporaryDirectory(prefix="cf-startup-") as tmp:
        argv = [*case.argv, "--run-dir", tmp] if case.demo else list(case.argv)
        out = Path(tmp, "stdout.txt")
        cpu = _children_cpu()
        start = time.perf_counter()
        with out.open("wb") as stdout:  # a file, as cheap as /dev/null, read only on failure
            done = subprocess.run(
                argv, stdout=stdout, stderr=subprocess.PIPE, cwd=tmp, env=environment(case)
            )
        elapsed = time.perf_counter() - start
        cpu = _children_cpu() - cpu
        if done.returncode != (1 if case.asks_server else 0):
            said = out.read_text(errors="replace")[-3000:] + done.stderr.decode()[-2000:]
            raise SystemExit(f"{case.label} exited {done.returncode}:\n{said}")
    return elapsed, cpu


def summary(runs: list[tuple[float, float]]) -> dict[str, object]:
    walls = [wall for wall, _ in runs]
    return {
        "min": min(walls),
        "median": statistics.median(walls),
        "max": max(walls),
        "cpu_median": statistics.median(cpu for _, cpu in runs),
        "runs": runs,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--checkout", type=Path, action="append", default=[])
    parser.add_argument("--launcher", choices=["venv", "uv"], action="append")
    parser.add_argument("--command", choices=sorted(COMMANDS), action="append")
    parser.add_argument("--bytecode", choices=["as-is", "cached", "both"], default="as-is")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    checkouts = [ROOT, *(c.resolve() for c in args.checkout)]
    with tempfile.TemporaryDirectory(prefix="cf-startup-pyc-") as pyc:
        cached: list[Path | None] = [Path(pyc)] if args.bytecode != "as-is" else []
        caches = ([None] if args.bytecode != "cached" else []) + cached
        todo = cases(
            checkouts, args.launcher or ["venv", "uv"], args.command or ["help", "demo"], caches
        )
        times: dict[str, list[tuple[float, float]]] = {case.label: [] for case in todo}
        for case in todo:  # one unmeasured warm-up each (bytecode caches, page cache)
            run_once(case)
        for _ in range(args.runs):
            for case in todo:
                times[case.label].append(run_once(case))
    if args.bytecode != "cached" and os.environ.get("PYTHONDONTWRITEBYTECODE"):
        print("note: PYTHONDONTWRITEBYTECODE is set: the cases without [cached bytecode] compile")
        print("      every module a checkout's venv has no .pyc for, on every run")
    rows = {label: summary(ts) for label, ts in times.items()}
    width = max(len(label) for label in rows)
    for label, row in rows.items():
        print(
            f"{label:<{width}}  wall min {row['min']:.2f} / median {row['median']:.2f} / "
            f"max {row['max']:.2f} s   cpu median {row['cpu_median']:.2f} s"
        )
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
