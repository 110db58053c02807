"""The one HTTP client of the wire API, used by the runner, the CLI and the dashboards.

Base URL, timeouts, paths, the `X-Agent-Epoch` header, the bearer token and
the decoding of the error envelope live here and nowhere else. A refusal in
the envelope comes back as the matching `codefleet.errors` class
(`StaleEpoch`, `NotOwner`, `NotFound`, ...); a server that cannot be reached
or times out raises `ServerUnavailable`, which callers on the write path must
treat as a denial (fail closed). An https server whose certificate this host
does not trust raises `UntrustedServer` instead: no retry can fix it.
"""

from __future__ import annotations

import json
import ssl
import sys
from collections.abc import AsyncIterator, Container, Iterable, Mapping, Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from codefleet.api.landingrecords import CheckRun, LandingStep
from codefleet.api.lane import Lane, LaneError, LaneRefused
from codefleet.attempt import AssignedTask, AttemptReport
from codefleet.errors import ERRORS_BY_CODE, DomainError

if TYPE_CHECKING:
    import httpx

__all__ = ["ApiError", "FleetClient", "ServerUnavailable", "UntrustedServer", "handed_task"]

DEFAULT_TIMEOUT_S = 10.0
STREAM_READ_TIMEOUT_S = 40.0  # the server pings every 15 s: silence this long is a dead link


class ServerUnavailable(Exception):
    """The coordination server could not be reached or did not answer in time."""


class UntrustedServer(Exception):
    """TLS to the server failed for good (its certificate is not trusted here, or it does
    not speak TLS); the message says what to do."""


# What OpenSSL says when the other end answers a TLS hello with something else (plain HTTP).
NOT_TLS_REASONS = frozenset(
    {"WRONG_VERSION_NUMBER", "RECORD_LAYER_FAILURE", "PACKET_LENGTH_TOO_LONG"}
)


def _untrusted(err: BaseException, url: str) -> UntrustedServer | None:
    """`err` (a transport failure) as `UntrustedServer` when TLS itself failed: a certificate
    not trusted here, or a server that does not speak TLS at all. No retry fixes either."""
    cause: BaseException | None = err
    while cause is not None and not isinstance(cause, ssl.SSLError):
        cause = cause.__cause__ or cause.__context__
    if isinstance(cause, ssl.SSLCertVerificationError):
        return UntrustedServer(
            f"the certificate of {url} is not trusted here ({cause.verify_message}): point "
            "SSL_CERT_FILE at the certificate (or its CA) in PEM"
        )
    if isinstance(cause, ssl.SSLError) and cause.reason in NOT_TLS_REASONS:
        plain = url.replace("https://", "http://", 1)
        return UntrustedServer(
            f"{url} does not speak TLS ({cause.reason}): if the server serves plain http, "
            f"use {plain}; else check the port"
        )
    return None


class ApiError(DomainError):
    """An error envelope whose code has no dedicated class."""

    def __init__(self, status: int, code: str, message: str, detail: dict[str, Any]) -> None:
        super().__init__(message, detail)
        self.status_code = status
        self.error_code = code

    def __str__(self) -> str:
        return f"HTTP {self.status_code} {self.error_code}: {self.message}"


def handed_task(answer: Mapping[str, Any]) -> AssignedTask | None:
    """The next assignment a `complete` answer carries (`next`), or None (an older server)."""
    handed = answer.get("next")
    return AssignedTask.from_wire(handed) if handed else None


def _httpx() -> ModuleType:
    """httpx, imported on first use: only an https server, an injected transport or their
    event stream use it (every call to a plain http server rides the lane, decision 0176)."""
    if "httpx" not in sys.modules:
        # `import httpx` also imports its command-line client (`httpx._main`: click, Rich's
        # syntax highlighting, pygments; ~200 ms here) whenever those happen to be installed.
        # A None entry makes that import fail, and httpx falls back to its stub `main`.
        sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]
    import httpx

    return httpx


def query_string(params: Mapping[str, Any]) -> str:
    """`params` as httpx encodes a query (`httpx.QueryParams`): a list or tuple value is one
    pair per item, True/False are `true`/`false`, None is empty."""
    pairs = [
        (str(key), _query_value(item))
        for key, value in params.items()
        for item in (value if isinstance(value, list | tuple) else (value,))
    ]
    return urlencode(pairs)


def _query_value(value: Any) -> str:
    if value is True or value is False:
        return "true" if value else "false"
    return "" if value is None else str(value)


def _raise_for(response: httpx.Response) -> None:
    if response.status_code >= 400:  # a streamed answer below 400 is not read here
        _raise_for_status(response.status_code, response.content)


def _raise_for_status(status: int, content: bytes) -> None:
    if status < 400:
        return
    try:
        error = json.loads(content)["error"]
        code, message, detail = error["code"], error["message"], error.get("detail") or {}
    except (ValueError, KeyError, TypeError):
        code, message, detail = "http_error", content[:500].decode("utf-8", "replace"), {}
    if status == 503:  # the server cannot serve this now; the call may be retried
        raise ServerUnavailable(f"{code}: {message}")
    cls = ERRORS_BY_CODE.get(code)
    if cls is not None:
        raise cls(message, detail)
    raise ApiError(status, code, message, detail)


def _needs_tls(base_url: str) -> bool:
    """Verify certificates for an https server; an http one never opens TLS.

    httpx builds the verifying SSL context (certifi's bundle) when the client is
    made, whether or not a request will use it: 20 to 160 ms of CPU per client
    on the project's machine, paid by every CLI command, runner and dashboard.
    """
    return not base_url.lower().startswith("http://")


class FleetClient:
    def __init__(
        self,
        base_url: str,
        *,
        token: str | None = None,
        timeout: float = DEFAULT_TIMEOUT_S,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        if token is not None and (not token.strip() or token != token.strip()):
            raise ValueError("the token is empty or has surrounding whitespace; give the real one")
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.token = token  # for git, which fetches the landed line with it (`fleet.clone`)
        self.base_url = base_url.rstrip("/")
        self._httpx_options: dict[str, Any] = {
            "base_url": self.base_url,
            "headers": headers,
            "timeout": timeout,
            "transport": transport,
            "verify": _needs_tls(self.base_url),
        }
        self._httpx: httpx.AsyncClient | None = None  # made on first use (`_http`)
        # The keep-alive lane (see `lane`) every call to a plain http server rides.
        plain = transport is None and not _needs_tls(self.base_url)
        self._lane = Lane(self.base_url, headers, timeout) if plain else None

    @property
    def _http(self) -> httpx.AsyncClient:
        """httpx, made on first use (about 1 ms): a plain http server's calls never use it."""
        if self._httpx is None:
            self._httpx = _httpx().AsyncClient(**self._httpx_options)
        return self._httpx

    async def __aenter__(self) -> FleetClient:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        if self._lane is not None:
            await self._lane.aclose()
        if self._httpx is not None:
            await self._httpx.aclose()

    async def _call(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        epoch: int | None = None,
        params: Mapping[str, Any] | None = None,
        timeout: float | None = None,
    ) -> httpx.Response:
        headers = {"X-Agent-Epoch": str(epoch)} if epoch is not None else None
        extra: dict[str, Any] = {} if timeout is None else {"timeout": timeout}
        httpx = _httpx()
        try:
            response = await self._http.request(
                method, path, json=body, headers=headers, params=params, **extra
            )
        except (httpx.TransportError, httpx.TimeoutException) as err:
            untrusted = _untrusted(err, self.base_url)
            if untrusted is not None:
                raise untrusted from err
            raise ServerUnavailable(f"{method} {path}: {type(err).__name__}: {err}") from err
        _raise_for(response)
        return response

    async def _json(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, Any] | None = None,
        epoch: int | None = None,
        timeout: float | None = None,
        body: Any = None,
    ) -> Any:
        """A call's JSON answer (None when empty). Every call to a plain http server rides the
        lane, where httpx costs ten times its client CPU; only a GET may be sent twice
        (decisions 0172, 0176)."""
        if self._lane is not None:
            target = f"{path}?{query_string(params)}" if params else path
            return await self._lane_json(method, target, body, epoch, timeout, method == "GET")
        response = await self._call(
            method, path, body=body, epoch=epoch, params=params, timeout=timeout
        )
        return response.json() if response.content else None

    # -- runner-facing ------------------------------------------------------------------

    async def register(
        self,
        name: str,
        workdir: str,
        pid: int | None,
        *,
        host: str | None = None,
        replace: bool = False,
        agent: str | None = None,
        tree_id: str | None = None,
        probe: str | None = None,
        workspace: str | None = None,
    ) -> dict[str, Any]:
        """Register (or re-register) `name`; `NameInUse` / `WrongTree` are refusals to obey."""
        body: dict[str, Any] = {"name": name, "workdir": workdir, "pid": pid}
        if workspace is not None:
            body["workspace"] = workspace
        if tree_id is not None:
            body["tree_id"] = tree_id
        if probe is not None:
            body["probe"] = probe
        if agent is not None:
            body["agent"] = agent
        if host is not None:
            body["host"] = host
        if replace:
            body["replace"] = True
        result: dict[str, Any] = await self._json("POST", "/agents/register", body=body)
        return result

    async def heartbeat(
        self,
        agent_id: str,
        epoch: int,
        delivered: tuple[str, int] | None = None,
        head: str | None = None,
    ) -> dict[str, Any]:
        """Alive; `delivered` (task, seq): the session has the operator's messages up to seq;
        `head`: the landed commit this runner's clone is level with."""
        body: dict[str, Any] = (
            {} if delivered is None else {"task_id": delivered[0], "delivered": delivered[1]}
        )
        if head is not None:
            body["head"] = head
        result: dict[str, Any] = await self._json(
            "POST", f"/agents/{agent_id}/heartbeat", body=body, epoch=epoch
        )
        return result

    async def leave(
        self, agent_id: str, epoch: int, timeout: float | None = None, interrupted: bool = False
    ) -> None:
        """Leave the fleet; `interrupted`: the operator stopped us (the attempt is not charged)."""
        params = {"reason": "interrupted"} if interrupted else None
        await self._json(
            "DELETE", f"/agents/{agent_id}", epoch=epoch, timeout=timeout, params=params
        )

    async def assignment(self, agent_id: str, epoch: int, wait: float = 0) -> AssignedTask | None:
        """The assigned task, waiting up to `wait` s for one; None when there is none."""
        answer = await self._json(
            "GET",
            f"/agents/{agent_id}/assignment",
            epoch=epoch,
            params={"wait": wait},
            timeout=wait + DEFAULT_TIMEOUT_S,
        )
        return None if answer is None else AssignedTask.from_wire(answer["task"])

    async def start(self, task_id: str, agent_id: str, epoch: int) -> dict[str, Any]:
        result: dict[str, Any] = await self._json(
            "POST", f"/tasks/{task_id}/start", body={"agent_id": agent_id}, epoch=epoch
        )
        return result

    async def acquire(
        self,
        agent_id: str,
        epoch: int,
        task_id: str,
        paths: list[str],
        tool: str,
        wait: float = 0.0,
        seen: Mapping[str, str | None] | None = None,
    ) -> dict[str, Any]:
        """The lease answer; with `wait` > 0 it may park that long (`seen`: what the session saw)."""
        body: dict[str, Any] = {"agent_id": agent_id, "task_id": task_id, "paths": paths}
        body["tool"] = tool
        timeout = None
        if wait > 0:
            body |= {"wait": wait, "seen": dict(seen or {})}
            timeout = wait + DEFAULT_TIMEOUT_S
        if self._lane is None:
            result: dict[str, Any] = await self._json(
                "POST", "/leases/acquire", body=body, epoch=epoch, timeout=timeout
            )
            return result
        return dict(await self._lane_json("POST", "/leases/acquire", body, epoch, timeout))

    async def acquire_resource(
        self, agent_id: str, epoch: int, task_id: str, name: str
    ) -> dict[str, Any]:
        """The named resource for the caller's attempt: the lease answer (`allow` / `deny`)."""
        body = {"agent_id": agent_id, "task_id": task_id, "name": name}
        result: dict[str, Any] = await self._json(
            "POST", "/resources/acquire", body=body, epoch=epoch
        )
        return result

    async def next_number(
        self, agent_id: str, epoch: int, task_id: str, sequence: str
    ) -> dict[str, Any]:
        """`{value}` (taken for good), or `{value: null, refused, known}` for an unknown name."""
        body = {"agent_id": agent_id, "task_id": task_id, "sequence": sequence}
        result: dict[str, Any] = await self._json("POST", "/sequences/next", body=body, epoch=epoch)
        return result

    async def _lane_json(
        self,
        method: str,
        path: str,
        body: Any,
        epoch: int | None,
        timeout: float | None = None,
        resend: bool = True,
    ) -> Any:
        """`_json` over the lane: the same errors, the same decoding; `resend` as `Lane.request`."""
        assert self._lane is not None
        try:
            headers = None if epoch is None else {"X-Agent-Epoch": str(epoch)}
            status, content = await self._lane.request(
                method, path, body, headers, timeout, resend=resend
            )
        except LaneError as err:
            raise ServerUnavailable(f"{method} {path}: {err}") from err
        _raise_for_status(status, content)
        return json.loads(content) if content else None

    async def record_change(
        self,
        agent_id: str,
        epoch: int,
        task_id: str,
        path: str,
        tool: str,
        sha256: str | None = None,
    ) -> None:
        body = {"agent_id": agent_id, "task_id": task_id, "path": path, "tool": tool}
        if sha256 is not None:
            body["sha256"] = sha256
        await self._json("POST", "/changes", body=body, epoch=epoch)

    async def reads(
        self,
        task_id: str,
        agent_id: str,
        epoch: int,
        attempt: int,
        reads: list[dict[str, Any]],
        watch: list[dict[str, Any]],
        *,
        stale: list[dict[str, Any]] | None = None,
        reconciled: dict[str, Any] | None = None,
    ) -> dict[str, list[dict[str, Any]]]:
        """Record an attempt's reads (and what its validation found, and the reconcile turns).

        The answer: per watched path, the other tasks' writes since its read.
        """
        body: dict[str, Any] = {
            "agent_id": agent_id,
            "attempt": attempt,
            "reads": reads,
            "watch": watch,
            "stale": stale or [],
            "reconciled": reconciled,
        }
        answer = await self._json("POST", f"/tasks/{task_id}/reads", body=body, epoch=epoch)
        changes: dict[str, list[dict[str, Any]]] = answer["changes"]
        return changes

    async def complete(
        self, task_id: str, agent_id: str, epoch: int, report: AttemptReport
    ) -> dict[str, Any]:
        body = {"agent_id": agent_id, **report.to_wire()}
        result: dict[str, Any] = await self._json(
            "POST", f"/tasks/{task_id}/complete", body=body, epoch=epoch
        )
        return result

    async def deliver(
        self,
        task_id: str,
        agent_id: str,
        epoch: int,
        attempt: int,
        files: Sequence[Mapping[str, Any]],
    ) -> dict[str, Any]:
        """Hand the server a clone's files (`DeliveryBody`'s rows) before reporting success."""
        body = {"agent_id": agent_id, "attempt": attempt, "files": list(files)}
        result: dict[str, Any] = await self._json(
            "POST", f"/tasks/{task_id}/delivery", body=body, epoch=epoch
        )
        return result

    async def check_event(
        self, task_id: str, agent_id: str, epoch: int, report: Mapping[str, Any]
    ) -> dict[str, Any]:
        """Record a `check_started` / `check_finished` event for the owner's attempt."""
        body = {"agent_id": agent_id, **report}
        result: dict[str, Any] = await self._json(
            "POST", f"/tasks/{task_id}/checks", body=body, epoch=epoch
        )
        return result

    async def command_event(
        self, task_id: str, agent_id: str, epoch: int, report: Mapping[str, Any]
    ) -> dict[str, Any]:
        """Record a `command_started` / `command_finished` event for the owner's attempt."""
        body = {"agent_id": agent_id, **report}
        result: dict[str, Any] = await self._json(
            "POST", f"/tasks/{task_id}/commands", body=body, epoch=epoch
        )
        return result

    async def foreign_preimages(self, task_id: str) -> dict[str, Any]:
        """Pre-images (base64) of every path leased by a task other than `task_id`."""
        result: dict[str, Any] = await self._json("GET", f"/tasks/{task_id}/foreign-preimages")
        return result

    # -- the landing worker's ---------------------------------------------------------------

    async def landing_claim(
        self, worker: str, timeout_s: float, wait: float = 0.0
    ) -> LandingStep | None:
        """The landing step to run now (or None after `wait` seconds): `fleet.landingworker`."""
        body = {"worker": worker, "timeout_s": timeout_s, "wait": wait}
        answer = await self._json("POST", "/landing/claim", body=body, timeout=wait + 10.0)
        step = answer.get("step")
        return None if step is None else LandingStep.from_wire(step)

    async def landing_preimages(self, step_id: int) -> dict[str, Any]:
        """What a landing step's view puts back: every leased file not held by its batch."""
        result: dict[str, Any] = await self._json("GET", f"/landing/steps/{step_id}/preimages")
        return result

    async def landing_started(self, step_id: int, check: str) -> None:
        await self._json("POST", f"/landing/steps/{step_id}/started", body={"check": check})

    async def landing_beat(self, step_id: int) -> None:
        """The worker running step `step_id` is alive; `NotOwner` once the step is over."""
        await self._json("POST", f"/landing/steps/{step_id}/beat")

    async def landing_result(self, step_id: int, results: Sequence[CheckRun]) -> dict[str, Any]:
        """A step's check runs, in the order they ran."""
        body = {"results": [r.to_wire() for r in results]}
        result: dict[str, Any] = await self._json(
            "POST", f"/landing/steps/{step_id}/result", body=body
        )
        return result

    async def landing(self) -> dict[str, Any]:
        """The landing queue, the steps in progress and any halt (`GET /landing`)."""
        result: dict[str, Any] = await self._json("GET", "/landing")
        return result

    async def landed(self) -> dict[str, Any]:
        """Where the server's landed line is (`GET /landed`): its first commit, its tip, why
        there is none."""
        result: dict[str, Any] = await self._json("GET", "/landed")
        return result

    async def landing_resume(self) -> dict[str, Any]:
        """Lift a landing halt: the next round checks the landed tree again."""
        result: dict[str, Any] = await self._json("POST", "/landing/resume")
        return result

    async def set_integration(self, check: str | None) -> dict[str, Any]:
        """The check every landing must pass (None: none); answers the landing state."""
        result: dict[str, Any] = await self._json(
            "POST", "/landing/integration", body={"check": check}
        )
        return result

    # -- operator-facing ------------------------------------------------------------------

    async def create_tasks(
        self, tasks: list[dict[str, Any]], checks: Mapping[str, str] | None = None
    ) -> list[str]:
        """Post a graph atomically; a loaded graph (`graphfile.GraphTasks`) brings its checks."""
        return (await self.load_tasks(tasks, checks))["created"]

    async def load_tasks(
        self,
        tasks: list[dict[str, Any]],
        checks: Mapping[str, str] | None = None,
        redefine: Iterable[str] = (),
        source: str | None = None,
    ) -> dict[str, list[str]]:
        """`create_tasks`, where the stored tasks named in `redefine` that have not started
        take the batch's definitions (one that has started refuses the batch); returns the
        ids `created` and `redefined`. `source`: the graph file's key in the tree (the
        server protects it from agents)."""
        checks = checks if checks is not None else getattr(tasks, "checks", None)
        body: dict[str, Any] = {"tasks": list(tasks)}
        if checks:
            held = getattr(tasks, "check_resources", {})  # `{run, resources, reuse}` for those
            fresh: frozenset[str] = getattr(tasks, "check_fresh", frozenset())
            body["checks"] = {n: _check_body(c, held.get(n), n in fresh) for n, c in checks.items()}
        sequences = getattr(tasks, "sequences", None)
        if sequences:
            body["sequences"] = dict(sequences)
        integration = getattr(tasks, "integration", None)
        if integration:
            body["integration"] = integration
        redefine = list(redefine)
        if redefine:
            body["redefine"] = redefine
        if source is not None:
            body["source"] = source
        result = await self._json("POST", "/tasks", body=body, timeout=120.0)
        return {"created": list(result["created"]), "redefined": list(result.get("redefined", []))}

    async def checks(self) -> dict[str, str]:
        """The named checks: `{name: command}`."""
        return (await self.check_specs())[0]

    async def check_specs(self) -> tuple[dict[str, str], dict[str, list[str]]]:
        """The named checks' commands, and the resources of those that name some."""
        commands, resources, _ = await self.check_options()
        return commands, resources

    async def check_options(
        self,
    ) -> tuple[dict[str, str], dict[str, list[str]], frozenset[str]]:
        """`check_specs`, and the checks whose passing result is never reused (`reuse: false`)."""
        rows = (await self._json("GET", "/checks"))["checks"]
        commands = {str(r["name"]): str(r["command"]) for r in rows}
        resources = {str(r["name"]): list(r["resources"]) for r in rows if r.get("resources")}
        fresh = frozenset(str(r["name"]) for r in rows if r.get("reuse") is False)
        return commands, resources, fresh

    async def define_checks(
        self, checks: Mapping[str, str], source: str | None = None
    ) -> dict[str, Any]:
        """Define the checks; `source`: the file in the tree they come from (protected)."""
        body: dict[str, Any] = {"checks": dict(checks)}
        if source is not None:
            body["source"] = source
        result: dict[str, Any] = await self._json("POST", "/checks", body=body)
        return result

    async def check_written_by(self, source: str) -> str | None:
        """The task whose write left the checks' file `source` (a key) as it is, if one did."""
        answer = await self._json("GET", "/checks", params={"source": source})
        return None if answer.get("written_by") is None else str(answer["written_by"])

    async def tasks(
        self, status: str | None = None, limit: int = 100_000, offset: int = 0
    ) -> list[dict[str, Any]]:
        params: dict[str, Any] = {"limit": limit, "offset": offset}
        if status:
            params["status"] = status
        result = await self._json("GET", "/tasks", params=params)
        return list(result["tasks"])

    async def task(self, task_id: str) -> dict[str, Any]:
        result: dict[str, Any] = await self._json("GET", f"/tasks/{task_id}")
        return result

    async def patch(self, task_id: str) -> dict[str, Any]:
        """The task's recorded change: `files` (path, diff, added, removed, binary) and totals."""
        result: dict[str, Any] = await self._json(
            "GET", f"/tasks/{task_id}/patch", params={"format": "json"}
        )
        return result

    async def cancel(self, task_id: str) -> dict[str, Any]:
        result: dict[str, Any] = await self._json("POST", f"/tasks/{task_id}/cancel")
        return result

    async def say(self, task_id: str, text: str) -> dict[str, Any]:
        """Send the operator's message to a task (`codefleet say`)."""
        body = {"text": text}
        result: dict[str, Any] = await self._json("POST", f"/tasks/{task_id}/messages", body=body)
        return result

    async def ask(self, task_id: str, agent_id: str, epoch: int, text: str) -> dict[str, Any]:
        """The owner's session asks the operator (`ask_operator`); the question's record."""
        body = {"agent_id": agent_id, "text": text}
        result: dict[str, Any] = await self._json(
            "POST", f"/tasks/{task_id}/questions", body=body, epoch=epoch
        )
        return result

    async def answer(
        self, task_id: str, text: str, question_id: str | None = None
    ) -> dict[str, Any]:
        """Answer the task's oldest open question (or the one named): `codefleet answer`."""
        body: dict[str, Any] = {"text": text}
        if question_id is not None:
            body["question_id"] = question_id
        result: dict[str, Any] = await self._json("POST", f"/tasks/{task_id}/answers", body=body)
        return result

    async def questions(self) -> list[dict[str, Any]]:
        """The questions nobody has answered yet, oldest first."""
        result: list[dict[str, Any]] = (await self._json("GET", "/questions"))["questions"]
        return result

    async def retry(self, task_id: str) -> dict[str, Any]:
        result: dict[str, Any] = await self._json("POST", f"/tasks/{task_id}/retry")
        return result

    async def release_person(self, session_id: str | None, every: bool) -> dict[str, Any]:
        """Free a person's session's leases (`codefleet release`)."""
        body: dict[str, Any] = {"all": True} if every else {"session_id": session_id}
        result: dict[str, Any] = await self._json("POST", "/interactive/release", body=body)
        return result

    async def hold(self, session_id: str, user: str, names: list[str]) -> dict[str, Any]:
        """A person takes named resources (`codefleet hold`): the lease answer."""
        body = {"session_id": session_id, "user": user, "names": names}
        result: dict[str, Any] = await self._json("POST", "/interactive/hold", body=body)
        return result

    async def unhold(self, names: list[str]) -> dict[str, Any]:
        """Release resources people hold (`codefleet release NAME`): `{released, refused}`."""
        result: dict[str, Any] = await self._json(
            "POST", "/interactive/unhold", body={"names": names}
        )
        return result

    async def agents(self) -> list[dict[str, Any]]:
        return list((await self._json("GET", "/agents"))["agents"])

    async def leases(self) -> list[dict[str, Any]]:
        return list((await self._json("GET", "/leases"))["leases"])

    async def graph(self, runners: int | None = None) -> dict[str, Any]:
        """`graph check`'s analysis of the stored graph (`GET /graph`)."""
        params = {} if runners is None else {"runners": runners}
        return dict(await self._json("GET", "/graph", params=params))

    async def resources(self) -> dict[str, Any]:
        """`GET /resources`: holders (with waiters) and sequences (with their last value)."""
        result: dict[str, Any] = await self._json("GET", "/resources")
        return result

    async def conflicts(self, resolved: bool | None = None) -> list[dict[str, Any]]:
        params = {} if resolved is None else {"resolved": str(resolved).lower()}
        return list((await self._json("GET", "/conflicts", params=params))["conflicts"])

    async def events(
        self, since: int = 0, limit: int = 10_000, type_: str | None = None, wait: float = 0.0
    ) -> list[dict[str, Any]]:
        """Events after `since` (of `type_`); with `wait` > 0 the server holds the answer
        until one is logged, at most `wait` s (then none)."""
        params: dict[str, Any] = {"since": since, "limit": limit}
        if type_:
            params["type"] = type_
        if wait > 0:
            params["wait"] = wait
        timeout = wait + DEFAULT_TIMEOUT_S if wait > 0 else None
        return list((await self._json("GET", "/events", params=params, timeout=timeout))["events"])

    async def all_events(self, since: int = 0) -> list[dict[str, Any]]:
        """Every event after `since`, paging through `/events`."""
        found: list[dict[str, Any]] = []
        while page := await self.events(since):
            found.extend(page)
            since = page[-1]["id"]
        return found

    async def state(self) -> dict[str, Any]:
        result: dict[str, Any] = await self._json("GET", "/state")
        return result

    async def health(self) -> dict[str, Any]:
        result: dict[str, Any] = await self._json("GET", "/health", timeout=2.0)
        return result

    async def reset(self) -> None:
        await self._json("POST", "/reset")

    async def resume(self) -> dict[str, Any]:
        """Lift the fleet's usage-limit pause now (`POST /fleet/resume`)."""
        result: dict[str, Any] = await self._json("POST", "/fleet/resume")
        return result

    async def set_budget(self, max_cost_usd: float | None, hard: bool = False) -> dict[str, Any]:
        """Set the fleet's budget in USD (None: no cap); answers the budget as it now stands."""
        body = {"max_cost_usd": max_cost_usd, "hard": hard}
        result: dict[str, Any] = await self._json("POST", "/fleet/budget", body=body)
        return result

    async def fleet_started(self, **payload: Any) -> None:
        await self._json("POST", "/fleet/started", body=payload)

    async def fleet_finished(self, **payload: Any) -> None:
        await self._json("POST", "/fleet/finished", body=payload)

    async def record_commits(self, branch: str, commits: list[tuple[str, str]]) -> None:
        """Record the commits made for succeeded tasks (`task_committed` events)."""
        body = {"branch": branch, "commits": [{"task_id": t, "commit": c} for t, c in commits]}
        await self._json("POST", "/commits", body=body)

    async def stream(
        self, since: int = 0, types: Container[str] | None = None
    ) -> AsyncIterator[dict[str, Any]]:
        """Events after `since`, replayed then live, parsed from the SSE stream; with `types`,
        only the events of those types (the others are never parsed)."""
        if self._lane is None:
            async for event in self._httpx_stream(since):
                if types is None or event["type"] in types:
                    yield event
            return
        try:
            async for kind, data in self._lane.frames(
                f"/events/stream?since={int(since)}", None, STREAM_READ_TIMEOUT_S
            ):
                if types is None or kind in types:
                    yield json.loads(data)
        except LaneRefused as err:
            _raise_for_status(err.status, err.body)
        except LaneError as err:
            raise ServerUnavailable(f"event stream: {err}") from err

    async def _httpx_stream(self, since: int) -> AsyncIterator[dict[str, Any]]:
        """`stream` through httpx: an https server, an injected transport."""
        httpx = _httpx()
        try:
            async with self._http.stream(
                "GET",
                "/events/stream",
                params={"since": since},
                timeout=httpx.Timeout(DEFAULT_TIMEOUT_S, read=STREAM_READ_TIMEOUT_S),
            ) as response:
                if response.status_code >= 400:
                    await response.aread()  # the error envelope is in the body: read it first
                _raise_for(response)
                data: list[str] = []
                async for line in response.aiter_lines():
                    if line.startswith("data:"):
                        data.append(line[5:].strip())
                    elif not line and data:
                        yield json.loads("\n".join(data))
                        data = []
        except (httpx.TransportError, httpx.TimeoutException) as err:
            raise ServerUnavailable(f"event stream: {type(err).__name__}: {err}") from err


def _check_body(command: str, resources: list[str] | None, fresh: bool) -> str | dict[str, Any]:
    """A graph's check on the wire: the plain command, or `{run, resources, reuse}`."""
    if not resources and not fresh:
        return command
    body: dict[str, Any] = {"run": command, "resources": list(resources or [])}
    if fresh:
        body["reuse"] = False
    return body
