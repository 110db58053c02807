"""The first hour on a real library: a keyless scripted run with a semantic break ends PASS.

Done as a new user would (issue 56): the library of `bench.libsuite` (boltons, from the
package registry, its suite of ~500 tests) in a scratch git repository; `codefleet
serve` in it, and `codefleet run --dry-run --script` with `integration: test` (the
library's suite on the landed tree). Two tasks pass alone and break together:

- A renames `strutils.a10n` to `abbreviate_numeronym`, said as a unified diff next to
  the script (`patch: a-rename.diff`, made as `git diff` makes it);
- B adds a test of `a10n`, written from a file next to the script (`write_from`).

Each carries `rework: true` steps for the case where it lands second (A keeps
`a10n` as an alias; B calls the new name), and no wait has a limit of its own. The run
is played three times on a fresh tree: as the checks' timing decides (`natural`), and
with each order forced (`A-first`, `B-first`: the other task's first session waits for
it to succeed; the rework steps are the same). Each must end PASS the first time with
the suite green. Needs the network (the registry) and uv; prints one line per case:

    uv run python -m bench.firsthour [--cases natural,A-first,B-first] [--keep DIR]
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.libsuite import GIT, SUITE, prepare, uv_env

ROOT = Path(__file__).resolve().parents[1]
CODEFLEET = [str(ROOT / ".venv" / "bin" / "codefleet")]
MODULE = "boltons/strutils.py"
NEW_TEST = "tests/test_numeronym.py"
TEST_OLD = "from boltons import strutils\n\n\ndef test_a10n():\n    assert strutils.a10n('localization') == 'l10n'\n"
TEST_NEW = TEST_OLD.replace("strutils.a10n(", "strutils.abbreviate_numeronym(")
ALIAS = "\n\na10n = abbreviate_numeronym  # tests/test_numeronym.py calls the old name\n"
GRAPH = f"""\
checks:
  test: {SUITE}
integration: test
tasks:
  - id: A
    title: Rename a10n to abbreviate_numeronym
    description: Rename strutils.a10n to abbreviate_numeronym in {MODULE}.
    file_scope: [{MODULE}]
  - id: B
    title: Test a10n
    description: Add {NEW_TEST}, a test of strutils.a10n.
    file_scope: [{NEW_TEST}]
"""
SCRIPT = f"""\
A:
- patch: a-rename.diff
- rework: true          # B landed first and calls a10n: keep the old name
  append: {{path: {MODULE}, text: {json.dumps(ALIAS)}}}
B:
- write_from: {{path: {NEW_TEST}, from: b/test_old.py}}
- rework: true          # A landed first: call the new name
  write_from: {{path: {NEW_TEST}, from: b/test_new.py}}
"""


def scripts(base: Path, tree: Path, case: str) -> Path:
    """The script and the files it names, next to it (outside the tree); its path."""
    where = base / f"script-{case}"
    (where / "b").mkdir(parents=True)
    old = (tree / MODULE).read_text()
    new = re.sub(r"\ba10n\(", "abbreviate_numeronym(", old).replace(
        "'a10n', 'gzip_bytes'", "'abbreviate_numeronym', 'gzip_bytes'"
    )
    diff = difflib.unified_diff(
        old.splitlines(keepends=True), new.splitlines(keepends=True), f"a/{MODULE}", f"b/{MODULE}"
    )
    (where / "a-rename.diff").write_text("".join(diff))
    (where / "b" / "test_old.py").write_text(TEST_OLD)
    (where / "b" / "test_new.py").write_text(TEST_NEW)
    text = SCRIPT
    if case in ("A-first", "B-first"):  # the later one's first session ends once the other landed
        first, later = ("A", "B") if case == "A-first" else ("B", "A")
        text = text.replace(
            f"{later}:\n", f"{later}:\n- wait_succeeded: {first}\n  attempt: 1\n", 1
        )
    (where / "script.yaml").write_text(text)
    return where / "script.yaml"


def serve(tree: Path) -> subprocess.Popen[str]:
    """`codefleet serve` in the tree, on a free port; returned once its record is written."""
    server = subprocess.Popen(
        [*CODEFLEET, "serve", "--port", "0"], cwd=tree, text=True,
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=uv_env(),
    )  # fmt: skip
    record = tree / ".codefleet" / "server.json"
    deadline = time.monotonic() + 60
    while not record.exists():
        if server.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"serve did not start: {server.stderr and server.stderr.read()}")
        time.sleep(0.05)
    return server


def one_case(base: Path, archive: Path, case: str) -> dict[str, Any]:
    """A fresh tree, its server, one scripted run; what it printed and what landed."""
    tree = prepare(base / case, archive)
    (tree / "codefleet.yaml").write_text(GRAPH)
    subprocess.run([*GIT, "add", "codefleet.yaml"], cwd=tree, check=True)
    subprocess.run([*GIT, "commit", "-qm", "graph"], cwd=tree, check=True)
    script = scripts(base, tree, case)
    server = serve(tree)
    started = time.monotonic()
    try:
        ran = subprocess.run(
            [*CODEFLEET, "run", "--dry-run", "--script", str(script), "--runners", "2"],
            cwd=tree, capture_output=True, text=True, env=uv_env() | {"COLUMNS": "120"},
        )  # fmt: skip
        took = time.monotonic() - started
        listed = subprocess.run(
            [*CODEFLEET, "tasks", "--json"], cwd=tree, capture_output=True, text=True,
            check=True, env=uv_env(),
        )  # fmt: skip
        tasks = json.loads(listed.stdout)
    finally:
        server.send_signal(signal.SIGINT)
        server.wait(timeout=60)
    suite = subprocess.run(SUITE, shell=True, cwd=tree, capture_output=True, env=uv_env())
    return {
        "case": case,
        "exit": ran.returncode,
        "verdict": _verdict(ran.stdout),
        "reworked": _reworked(ran.stdout),
        "attempts": {t["id"]: t["attempts"] for t in _rows(tasks)},
        "suite_after": "passed" if suite.returncode == 0 else "FAILED",
        "wall_s": round(took, 1),
        "output": ran.stdout + ran.stderr,
    }


def _rows(tasks: Any) -> list[dict[str, Any]]:
    return list(tasks["tasks"] if isinstance(tasks, dict) else tasks)


def _verdict(out: str) -> str:
    found = re.search(r"\b(PASS|FAIL)\b", out)
    return found.group(1) if found else "?"


def _reworked(out: str) -> str:
    """Which task the run repaired or reworked after its landing check failed."""
    found = re.search(r"(\w+): REPAIR|(\w+): requeued \(integration_failed\)", out)
    return (found.group(1) or found.group(2)) if found else "none"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default="natural,A-first,B-first")
    parser.add_argument("--keep", type=Path, help="work here and keep it (default: a temp dir)")
    args = parser.parse_args()
    base = args.keep or Path(tempfile.mkdtemp(prefix="cf-firsthour-"))
    base.mkdir(parents=True, exist_ok=True)
    from bench.libsuite import fetch

    archive = fetch(base / "sdist")
    failed = False
    for case in args.cases.split(","):
        result = one_case(base, archive, case)
        output = result.pop("output")
        print(json.dumps(result))
        if result["verdict"] != "PASS" or result["exit"] != 0:
            failed = True
            print(output, file=sys.stderr)
    if args.keep is None:
        shutil.rmtree(base, ignore_errors=True)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    os.environ.pop("VIRTUAL_ENV", None)
    main()
