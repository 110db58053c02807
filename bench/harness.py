"""Shared pieces of the benchmarks: the server subprocess, HTTP clients, agents, processes, stats.

Everything here speaks HTTP to a `codefleet serve` subprocess on 127.0.0.1 and
nothing else: no import of the engine or the store. The server runs from a
fresh temporary directory (its own database and working tree) and is stopped,
and the directory removed, when the benchmark ends.

Two HTTP clients share one small surface (`call(method, path, body)`):
`httpx` (the project's client library) and `raw`, a minimal keep-alive
HTTP/1.1 client over asyncio streams. On a 2-core machine the load generator
competes with the server for CPU, and httpx costs several times more CPU per
request than the server's own work; `raw` exists so that the figures say
something about the server rather than about the client. Both are plain HTTP
on loopback, and every benchmark reports the client-side CPU it spent.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import multiprocessing as mp
import os
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

import httpx

__all__ = [
    "Agent",
    "BenchError",
    "CpuSampler",
    "Fleet",
    "Http",
    "Server",
    "add_common_args",
    "build_graph",
    "event_time",
    "fetch_events",
    "machine",
    "make_http",
    "percentiles",
    "pid_cpu_split",
    "process_cpu",
    "system_busy_seconds",
    "wait_http",
    "wait_quiet",
]

CLK_TCK = os.sysconf("SC_CLK_TCK")
HOST = "127.0.0.1"


class BenchError(RuntimeError):
    """The server answered something a zero-work agent did not expect."""


# -- the server under test ----------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def pid_cpu_seconds(pid: int) -> float:
    """user + system CPU seconds of one process, from /proc/<pid>/stat."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def pid_cpu_split(pid: int) -> tuple[float, float]:
    """(own, reaped children's) user + system CPU seconds of one process, from /proc/<pid>/stat:
    the children's share is the processes it started and waited for (a server's git)."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    own = int(fields[11]) + int(fields[12])
    return own / CLK_TCK, (int(fields[13]) + int(fields[14])) / CLK_TCK


def system_busy_seconds() -> float:
    """CPU seconds the whole machine has spent busy (all cores), from /proc/stat."""
    with open("/proc/stat") as stat:
        fields = [int(x) for x in stat.readline().split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    return (sum(fields[:8]) - idle) / CLK_TCK


def wait_quiet(max_wait: float, threshold: float = 0.15, window: float = 1.0) -> float:
    """Wait up to `max_wait` s for a `window` in which the machine is busy < `threshold` cores.

    Other sessions may share this machine; returns the background load last seen (cores).
    """
    deadline = time.monotonic() + max_wait
    while True:
        before = system_busy_seconds()
        time.sleep(window)
        load = (system_busy_seconds() - before) / window
        if load < threshold or time.monotonic() >= deadline:
            return load


def process_cpu() -> float:
    """CPU seconds this process has used so far (user + system)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def wait_http(url: str, proc: subprocess.Popen[bytes] | None = None, timeout: float = 30) -> None:
    """Until `url` answers 200; fails early if `proc` exits."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise BenchError(f"server exited at start-up (code {proc.returncode})")
        with contextlib.suppress(httpx.TransportError):
            if httpx.get(url, timeout=1.0).status_code == 200:
                return
        time.sleep(0.05)
    raise BenchError(f"{url} not answering after {timeout} s")


@dataclass
class Server:
    """`codefleet serve` on a free loopback port, over a fresh database and tree."""

    tick_interval: float = 0.5
    poll_interval: float = 1.0
    stale_after: float = 300.0
    token: str | None = None
    profile: str | None = None  # None, "py-spy", "py-spy-native" or "cprofile"
    profile_out: Path | None = None
    keep: bool = False
    server_bin: Path | None = None  # a `codefleet` executable; default: this environment's
    serve_args: tuple[str, ...] = ()  # more `serve` options (e.g. `--lease-wait 60`)
    seed: Callable[[Path], object] | None = None  # fills the tree before the server starts
    port: int = 0
    pid: int = 0
    tmp: Path = field(default_factory=Path)
    _proc: subprocess.Popen[bytes] | None = None
    _spy: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}

    def command(self) -> list[str]:
        exe = self.executable()
        cmd = [str(exe), "serve", "--port", str(self.port)]
        cmd += ["--db", str(self.tmp / "bench.db"), "--workdir", str(self.tmp / "tree")]
        cmd += ["--run-dir", str(self.tmp / "runs"), "--tick-interval", str(self.tick_interval)]
        cmd += ["--poll-interval", str(self.poll_interval), "--stale-after", str(self.stale_after)]
        if self.token:
            cmd += ["--token", self.token]
        cmd += self.serve_args
        if self.profile == "cprofile":
            python = exe.parent / "python"
            cmd = [str(python), "-m", "cProfile", "-o", str(self._profile_path()), *cmd]
        return cmd

    def executable(self) -> Path:
        return self.server_bin or Path(sys.executable).parent / "codefleet"

    def describe(self) -> dict[str, Any]:
        """Which code is under test: the executable, and the git commit of its checkout."""
        exe = self.executable()
        commit = subprocess.run(
            ["git", "-C", str(exe.parent.parent.parent), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(exe.parent.parent.parent), "status", "--porcelain", "src"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout.strip()
        return {"server_bin": str(exe), "commit": commit or None, "src_modified": bool(dirty)}

    def _profile_path(self) -> Path:
        suffix = ".prof" if self.profile == "cprofile" else ".collapsed"
        return self.profile_out or Path(f"bench-profile{suffix}").resolve()

    def start(self) -> Server:
        self.tmp = Path(tempfile.mkdtemp(prefix="codefleet-bench-"))
        (self.tmp / "tree").mkdir()
        if self.seed is not None:
            self.seed(self.tmp / "tree")
        self.port = free_port()
        env = {k: v for k, v in os.environ.items() if not k.startswith("CODEFLEET_")}
        log = (self.tmp / "server.log").open("wb")
        self._proc = subprocess.Popen(
            self.command(), cwd=self.tmp, env=env, stdout=log, stderr=subprocess.STDOUT
        )
        self.pid = self._proc.pid
        self._wait_ready()
        return self

    def _wait_ready(self) -> None:
        try:
            wait_http(f"{self.url}/health", self._proc)
        except BenchError as err:
            raise BenchError(f"{err}\n{self.log_tail()}") from None

    def log_tail(self, chars: int = 3000) -> str:
        path = self.tmp / "server.log"
        return path.read_text(errors="replace")[-chars:] if path.exists() else ""

    def cpu_seconds(self) -> float:
        return pid_cpu_seconds(self.pid)

    def start_profiler(self) -> None:
        """Attach py-spy to the running server (for the measured phase only)."""
        if self.profile not in ("py-spy", "py-spy-native"):
            return
        spy = shutil.which("py-spy")
        if spy is None:
            raise BenchError("py-spy not found: run with `uv run --with py-spy python -m ...`")
        out = self._profile_path()
        cmd = [spy, "record", "--pid", str(self.pid), "--rate", "250"]
        cmd += ["--format", "raw", "--output", str(out)]
        # --native needs to pause the process to unwind C frames; plain sampling does not.
        cmd.append("--native" if self.profile == "py-spy-native" else "--nonblocking")
        log = out.with_suffix(".log").open("wb")
        self._spy = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
        time.sleep(0.5)  # let it attach before the load starts

    def stop_profiler(self) -> Path | None:
        if self._spy is not None:
            self._spy.send_signal(signal.SIGINT)
            self._spy.wait(timeout=60)
            self._spy = None
            return self._profile_path()
        return self._profile_path() if self.profile == "cprofile" else None

    def stop(self) -> None:
        self.stop_profiler()
        if self._proc is not None and self._proc.poll() is None:
            self._proc.send_signal(signal.SIGINT)  # graceful: lets cProfile write its file
            try:
                self._proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        if not self.keep:
            shutil.rmtree(self.tmp, ignore_errors=True)

    def __enter__(self) -> Server:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()


class CpuSampler:
    """Samples the server's CPU seconds every `period` s on a background thread."""

    def __init__(self, server: Server, period: float = 0.1) -> None:
        self.server = server
        self.period = period
        self.samples: list[tuple[float, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.samples.append((time.monotonic(), self.server.cpu_seconds()))
            self._stop.wait(self.period)

    def __enter__(self) -> CpuSampler:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()
        self.samples.append((time.monotonic(), self.server.cpu_seconds()))

    def at(self, when: float) -> float:
        """Server CPU seconds at monotonic time `when`, linearly interpolated."""
        points = self.samples
        if not points or when <= points[0][0]:
            return points[0][1] if points else 0.0
        for (t0, c0), (t1, c1) in itertools.pairwise(points):
            if t0 <= when <= t1:
                return c0 + (c1 - c0) * (when - t0) / (t1 - t0 or 1.0)
        return points[-1][1]


# -- HTTP clients ---------------------------------------------------------------------------


class Http(Protocol):
    async def call(
        self, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None
    ) -> tuple[int, Any]: ...

    async def aclose(self) -> None: ...


class HttpxHttp:
    """httpx.AsyncClient, one per process, shared by that process's agents."""

    def __init__(self, client: httpx.AsyncClient) -> None:
        self._client = client

    async def call(
        self, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None
    ) -> tuple[int, Any]:
        response = await self._client.request(method, path, json=body, headers=headers)
        return response.status_code, response.json() if response.content else None

    async def aclose(self) -> None:
        """The shared client is closed by its owner."""


class RawHttp:
    """One keep-alive HTTP/1.1 connection per agent; bodies are JSON with Content-Length."""

    def __init__(self, port: int, base_headers: dict[str, str]) -> None:
        self.port = port
        self._fixed = f"Host: {HOST}:{port}\r\n" + "".join(
            f"{k}: {v}\r\n" for k, v in base_headers.items()
        )
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None

    async def call(
        self, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None
    ) -> tuple[int, Any]:
        data = b"" if body is None else json.dumps(body, separators=(",", ":")).encode()
        head = f"{method} {path} HTTP/1.1\r\n{self._fixed}Content-Length: {len(data)}\r\n"
        if body is not None:
            head += "Content-Type: application/json\r\n"
        for key, value in (headers or {}).items():
            head += f"{key}: {value}\r\n"
        request = head.encode() + b"\r\n" + data
        reused = self._writer is not None
        try:
            return await self._exchange(request)
        except (asyncio.IncompleteReadError, ConnectionResetError) as err:
            partial = getattr(err, "partial", b"")
            if not reused or partial:
                raise
            # The server closed an idle keep-alive connection before reading this request
            # (nothing of it was answered): open a fresh one and send it again, once.
            await self.aclose()
            return await self._exchange(request)

    async def _exchange(self, request: bytes) -> tuple[int, Any]:
        if self._writer is None:
            self._reader, self._writer = await asyncio.open_connection(HOST, self.port)
        assert self._reader is not None and self._writer is not None
        self._writer.write(request)
        status, length, close = await self._read_head(self._reader)
        payload = await self._reader.readexactly(length) if length else b""
        if close:
            await self.aclose()
        return status, json.loads(payload) if payload else None

    @staticmethod
    async def _read_head(reader: asyncio.StreamReader) -> tuple[int, int, bool]:
        head = await reader.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ", 2)[1])
        length, close = 0, False
        for line in lines[1:]:
            name, _, value = line.partition(":")
            name = name.lower()
            if name == "content-length":
                length = int(value)
            elif name == "transfer-encoding":
                raise BenchError("chunked responses are not supported by the raw client")
            elif name == "connection" and value.strip().lower() == "close":
                close = True
        return status, length, close

    async def aclose(self) -> None:
        if self._writer is not None:
            self._writer.close()
            with contextlib.suppress(OSError):
                await self._writer.wait_closed()
        self._reader = self._writer = None


def make_http(kind: str, port: int, token: str | None, pool: list[Any]) -> Http:
    """A client for one agent; `pool` holds the process's one shared httpx client."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    if kind == "raw":
        return RawHttp(port, headers)
    if not pool:
        limits = httpx.Limits(max_connections=1000, max_keepalive_connections=1000)
        pool.append(
            httpx.AsyncClient(
                base_url=f"http://{HOST}:{port}", headers=headers, timeout=60.0, limits=limits
            )
        )
    return HttpxHttp(pool[0])


# -- a zero-work agent ----------------------------------------------------------------------


@dataclass
class Agent:
    http: Http
    name: str
    id: str = ""
    epoch: int = 0

    def _epoch(self) -> dict[str, str]:
        return {"X-Agent-Epoch": str(self.epoch)}

    async def _ok(self, method: str, path: str, body: Any = None, epoch: bool = True) -> Any:
        status, data = await self.http.call(method, path, body, self._epoch() if epoch else None)
        if status >= 300:
            raise BenchError(f"{self.name}: {method} {path} -> {status} {data}")
        return data

    async def register(self) -> None:
        _, health = await self.http.call("GET", "/health")  # the server's tree (setup only)
        body = {"name": self.name, "workdir": health["workdir"], "pid": os.getpid()}
        answer = await self._ok("POST", "/agents/register", body, epoch=False)
        self.id, self.epoch = answer["agent_id"], answer["epoch"]

    async def assignment(self, wait: float) -> dict[str, Any] | None:
        status, data = await self.http.call(
            "GET", f"/agents/{self.id}/assignment?wait={wait}", None, self._epoch()
        )
        if status == 204:
            return None
        if status != 200:
            raise BenchError(f"{self.name}: assignment -> {status} {data}")
        task: dict[str, Any] = data["task"]
        return task

    async def next_task(self, wait: float, patience: float = 60.0) -> dict[str, Any]:
        deadline = time.monotonic() + patience
        while time.monotonic() < deadline:
            task = await self.assignment(wait)
            if task is not None:
                return task
        raise BenchError(f"{self.name}: no assignment within {patience} s")

    async def start(self, task_id: str) -> None:
        await self._ok("POST", f"/tasks/{task_id}/start", {"agent_id": self.id})

    async def complete(self, task_id: str, attempt: int) -> dict[str, Any]:
        body = {"agent_id": self.id, "attempt": attempt, "ok": True, "summary": "zero work"}
        answer: dict[str, Any] = await self._ok("POST", f"/tasks/{task_id}/complete", body)
        return answer

    async def acquire(self, task_id: str, paths: list[str], tool: str = "Write") -> dict[str, Any]:
        body = {"agent_id": self.id, "task_id": task_id, "paths": paths, "tool": tool}
        answer: dict[str, Any] = await self._ok("POST", "/leases/acquire", body)
        return answer


# -- load-generator processes ---------------------------------------------------------------

WorkerFn = Callable[[dict[str, Any], list[int], Callable[[], Awaitable[None]]], Awaitable[Any]]


def _worker_entry(
    target: WorkerFn,
    params: dict[str, Any],
    indices: list[int],
    ready: Any,
    go: Any,
    results: Any,
) -> None:
    at_go = [0.0]

    async def wait_go() -> None:
        ready.put(os.getpid())
        await asyncio.get_running_loop().run_in_executor(None, go.wait)
        at_go[0] = process_cpu()

    try:
        found = asyncio.run(target(params, indices, wait_go))
        results.put({"ok": True, "result": found, "cpu_s": process_cpu() - at_go[0]})
    except BaseException as err:  # a loop boundary: report the failure to the parent
        results.put({"ok": False, "error": f"{type(err).__name__}: {err}", "cpu_s": 0.0})


class Fleet:
    """Load-generator processes; agents are dealt round-robin over `procs` processes.

    Each worker sets up its agents, calls the `wait_go` it is given (which
    reports ready and blocks until `go()`), runs, and returns a picklable
    result together with the CPU seconds its process used.
    """

    def __init__(self, target: WorkerFn, params: dict[str, Any], agents: int, procs: int):
        procs = max(1, min(procs, agents))
        self.ctx = mp.get_context("spawn")
        self.ready = self.ctx.Queue()
        self.results_q = self.ctx.Queue()
        self.go_event = self.ctx.Event()
        self.params = params
        slices = [list(range(agents))[p::procs] for p in range(procs)]
        self.procs = [
            self.ctx.Process(
                target=_worker_entry,
                args=(target, params, s, self.ready, self.go_event, self.results_q),
                daemon=True,
            )
            for s in slices
        ]

    def start(self, timeout: float = 120.0) -> None:
        for proc in self.procs:
            proc.start()
        for _ in self.procs:
            self.ready.get(timeout=timeout)

    def go(self) -> float:
        started = time.monotonic()
        self.go_event.set()
        return started

    def results(self, timeout: float = 600.0) -> tuple[list[Any], float]:
        """Each worker's result, and the CPU seconds all workers used after `go()`."""
        found, cpu = [], 0.0
        for _ in self.procs:
            message = self.results_q.get(timeout=timeout)
            cpu += message["cpu_s"]
            if not message["ok"]:
                raise BenchError(f"load generator failed: {message['error']}")
            found.append(message["result"])
        for proc in self.procs:
            proc.join(timeout=10)
        return found, cpu

    def stop(self) -> None:
        for proc in self.procs:
            if proc.is_alive():
                proc.terminate()
                proc.join(timeout=5)


# -- reading the record ---------------------------------------------------------------------


def fetch_events(server: Server, since: int = 0) -> list[dict[str, Any]]:
    """Every event after `since`, paged through `GET /events`."""
    found: list[dict[str, Any]] = []
    with httpx.Client(base_url=server.url, headers=server.headers(), timeout=60.0) as http:
        while True:
            page = http.get("/events", params={"since": since, "limit": 10_000}).json()["events"]
            if not page:
                return found
            found.extend(page)
            since = page[-1]["id"]


def event_time(event: dict[str, Any]) -> float:
    """Epoch seconds of an event's `at` (millisecond resolution)."""
    return datetime.fromisoformat(event["at"].replace("Z", "+00:00")).timestamp()


# -- graphs and numbers ---------------------------------------------------------------------


def build_graph(
    total: int, chain: int = 8, fan: int = 20, prefix: str = "T"
) -> list[dict[str, Any]]:
    """Chains of `chain` tasks alternating with fan-outs (a root, `fan` leaves, a join).

    Each task declares one file of its own, so scopes never collide and the
    scheduler's disjointness check runs on every candidate without refusing any.
    """
    tasks: list[dict[str, Any]] = []

    def add(depends_on: Sequence[str]) -> str:
        task_id = f"{prefix}{len(tasks):05d}"
        tasks.append(
            {
                "id": task_id,
                "title": f"bench task {task_id}",
                "description": "do it",
                "file_scope": [f"src/{prefix.lower()}{len(tasks):05d}.py"],
                "depends_on": list(depends_on),
            }
        )
        return task_id

    group = 0
    while len(tasks) < total:
        left = total - len(tasks)
        if group % 2 == 0 or left < 3:
            prev: list[str] = []
            for _ in range(min(chain, left)):
                prev = [add(prev)]
        else:
            root = add([])
            leaves = [add([root]) for _ in range(min(fan, left - 2))]
            add(leaves)
        group += 1
    return tasks


def percentiles(values: Sequence[float], points: Sequence[int] = (50, 95, 99)) -> dict[str, float]:
    """Nearest-rank percentiles plus count and max; empty input gives NaN."""
    ordered = sorted(values)
    out: dict[str, float] = {"n": float(len(ordered))}
    for p in points:
        if not ordered:
            out[f"p{p}"] = float("nan")
            continue
        rank = max(1, -(-p * len(ordered) // 100))
        out[f"p{p}"] = ordered[rank - 1]
    out["max"] = ordered[-1] if ordered else float("nan")
    return out


def fmt_ms(stats: dict[str, float]) -> str:
    return " ".join(f"{k}={v * 1000:.2f}ms" for k, v in stats.items() if k != "n") + (
        f" (n={int(stats['n'])})"
    )


def machine() -> dict[str, Any]:
    cpu = "unknown"
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as info:
        cpu = next((ln.split(":", 1)[1].strip() for ln in info if ln.startswith("model name")), cpu)
    return {
        "nproc": os.cpu_count(),
        "cpu": cpu,
        "python": sys.version.split()[0],
        "platform": sys.platform,
    }


def add_common_args(parser: Any) -> None:
    parser.add_argument("--client", choices=["httpx", "raw"], default="httpx")
    parser.add_argument("--procs", type=int, default=1, help="load-generator processes")
    parser.add_argument("--tick-interval", type=float, default=0.5)
    parser.add_argument("--token", default=None, help="run the server with a bearer token")
    parser.add_argument("--profile", choices=["py-spy", "py-spy-native", "cprofile"], default=None)
    parser.add_argument("--profile-out", type=Path, default=None)
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    parser.add_argument("--keep", action="store_true", help="keep the server's temp directory")
    parser.add_argument(
        "--server-bin",
        type=Path,
        default=None,
        help="the `codefleet` executable to serve with (e.g. a frozen checkout's .venv/bin)",
    )
    parser.add_argument(
        "--quiet-wait",
        type=float,
        default=0.0,
        help="before each run, wait up to this many s for the machine to be idle",
    )


def server_from(args: Any) -> Server:
    return Server(
        tick_interval=args.tick_interval,
        token=args.token,
        profile=args.profile,
        profile_out=args.profile_out.resolve() if args.profile_out else None,
        keep=args.keep,
        server_bin=args.server_bin.resolve() if args.server_bin else None,
    )


def write_json(path: Path | None, figures: dict[str, Any]) -> None:
    if path is not None:
        path.write_text(json.dumps(figures, indent=2, default=str) + "\n")


@contextlib.contextmanager
def running(fleet: Fleet) -> Iterator[Fleet]:
    try:
        fleet.start()
        yield fleet
    finally:
        fleet.stop()
