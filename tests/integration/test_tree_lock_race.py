"""Two servers racing for one tree: the tree's own lock refuses one, not only the pre-check.

`serve` first asks whether the tree is served (`treelock.refuse_if_served`), then
takes the tree's `flock` (`TreeLock.acquire`). Every other test starts its second
server after the first is up, so the pre-check alone refuses it and a lock that never
refuses would pass them all (issue 51 item 12). Here two processes both pass the
pre-check, wait at a barrier, then take the lock at once: exactly one wins, and the
other is refused naming the tree, while the winner still holds it.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from codefleet.treelock import server_file

# One contender: the pre-check, then "ready"; on "go", the lock; its outcome; on "exit", out.
CONTENDER = """
import sys
from pathlib import Path
from codefleet.treelock import TreeInUse, TreeLock, refuse_if_served

root = Path(sys.argv[1])
refuse_if_served(root)  # nobody holds the tree yet: both contenders pass
print("ready", flush=True)
sys.stdin.readline()  # the barrier
try:
    lock = TreeLock.acquire(root, sys.argv[2], root / "db.sqlite")
except TreeInUse as err:
    print("refused", " ".join(str(err).split()), flush=True)
else:
    print("won", flush=True)
sys.stdin.readline()  # hold the lock until the test has both answers
"""


def _contender(root: Path, url: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", CONTENDER, str(root), url],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )


def _hear(proc: subprocess.Popen[str]) -> str:
    assert proc.stdout is not None
    return proc.stdout.readline().strip()


def _tell(proc: subprocess.Popen[str], line: str) -> None:
    assert proc.stdin is not None
    proc.stdin.write(line + "\n")
    proc.stdin.flush()


def test_two_servers_past_the_pre_check_race_for_the_tree_and_exactly_one_wins(
    workdir: Path,
) -> None:
    contenders = [_contender(workdir, f"http://127.0.0.1:{port}") for port in (18001, 18002)]
    try:
        assert [_hear(p) for p in contenders] == ["ready", "ready"]
        for proc in contenders:
            _tell(proc, "go")
        answers = [_hear(p) for p in contenders]
        record = server_file(workdir).read_text()
    finally:
        for proc in contenders:
            proc.communicate("exit\n", timeout=30)

    assert sorted(a.split()[0] for a in answers) == ["refused", "won"], answers
    winner = answers.index("won")
    [refusal] = [a for a in answers if a.startswith("refused")]
    assert f"the tree {workdir} already has a CodeFleet server" in refusal
    assert f'"pid": {contenders[winner].pid}' in record  # the record is the winner's alone
    assert all(p.returncode == 0 for p in contenders)
