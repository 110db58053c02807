"""The guards as plain functions: the Host memo answers as a fresh check would, in order.

`HostNames` remembers raw `Host` values it found allowed; every answer after
the memo is filled must equal a fresh check's. `Guards.refusal` checks the
Host, then the token, then the declared length, and lets `/health` and the
static shell pass without the token.
"""

from __future__ import annotations

import json

from codefleet.transport.guards import Guards
from codefleet.transport.hostcheck import REMEMBERED_HOSTS, HostNames

HOSTS = [
    b"127.0.0.1:8099",
    b"localhost",
    b"LocalHost:1",
    b"[::1]:80",
    b"[::1]",
    b"",
    b"attacker-rebound.example",
    b"localhost.attacker.example",
    b"127.0.0.1.nip.io",
    b"localhost:80@evil",
    b"fleet.internal:9",
    b"0.0.0.0",
    b"[::1]x",
    b"\xff",
]


def fresh() -> HostNames:
    return HostNames(["localhost", "fleet.internal"], "127.0.0.1")


def test_the_host_memo_answers_as_a_fresh_check_does() -> None:
    names = fresh()
    for _ in range(3):
        for raw in HOSTS:
            assert names.refusal(raw) == fresh().refusal(raw), raw
    assert names.seen == {raw for raw in HOSTS if fresh().refusal(raw) is None}


def test_the_host_memo_is_bounded() -> None:
    names = HostNames(["localhost"], "127.0.0.1")
    for port in range(REMEMBERED_HOSTS * 3):
        assert names.refusal(b"127.0.0.1:%d" % port) is None
    assert len(names.seen) == REMEMBERED_HOSTS


def test_refusals_come_in_order_host_token_length() -> None:
    hosts = HostNames(["localhost"], "127.0.0.1")
    tokenless, with_token = Guards.of(None, hosts), Guards.of("t0ken", hosts)
    huge = str(tokenless.limit + 1).encode()

    assert tokenless.refusal("POST", "/x", b"evil", b"", huge)[0] == 403  # type: ignore[index]
    assert tokenless.refusal("POST", "/x", b"localhost", b"", huge)[0] == 413  # type: ignore[index]
    assert tokenless.refusal("POST", "/x", b"localhost", b"", b"12") is None
    assert with_token.refusal("POST", "/x", b"evil", b"", huge)[0] == 401  # type: ignore[index]
    assert with_token.refusal("POST", "/x", b"evil", b"Bearer t0ken", huge)[0] == 413  # type: ignore[index]
    assert with_token.refusal("POST", "/x", b"evil", b"Bearer t0ken", b"-1")[0] == 413  # type: ignore[index]
    assert with_token.refusal("GET", "/health", b"evil", b"", None) is None
    assert with_token.refusal("HEAD", "/web/app.js", b"evil", b"", None) is None
    assert with_token.refusal("POST", "/", b"evil", b"", None)[0] == 401  # type: ignore[index]


def test_a_refusal_is_the_error_envelope() -> None:
    refused = Guards.of(None, HostNames([], "127.0.0.1")).refusal("GET", "/", b"evil", b"", None)
    assert refused is not None
    assert json.loads(refused[1])["error"]["code"] == "host_not_allowed"
