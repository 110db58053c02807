"""The wire client's set-up: what making a `FleetClient` costs (httpx only on use), and keeps."""

from __future__ import annotations

import ssl
import subprocess
import sys
from typing import Any

import pytest

from codefleet.api.client import FleetClient


@pytest.fixture
def verify_loads(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Every certificate bundle an SSL context loads while the test runs."""
    loads: list[Any] = []
    original = ssl.SSLContext.load_verify_locations

    def load(self: ssl.SSLContext, *args: Any, **kwargs: Any) -> None:
        loads.append(args or kwargs)
        original(self, *args, **kwargs)

    monkeypatch.setattr(ssl.SSLContext, "load_verify_locations", load)
    return loads


async def test_an_http_server_costs_no_certificate_bundle(verify_loads: list[Any]) -> None:
    async with FleetClient("http://127.0.0.1:8099", token="t") as client:
        assert client._httpx is None  # its calls ride the lane: httpx is made on first use
    assert verify_loads == []


async def test_an_https_server_is_still_verified(verify_loads: list[Any]) -> None:
    async with FleetClient("https://fleet.example.invalid", token="t") as client:
        pool = client._http._transport._pool  # type: ignore[attr-defined]
        assert pool._ssl_context.verify_mode == ssl.CERT_REQUIRED
        assert pool._ssl_context.check_hostname
    assert verify_loads != []


def test_importing_the_client_skips_httpxs_command_line() -> None:
    """`httpx._main` (click, pygments, Rich's syntax) is httpx's CLI, never ours: not loaded
    when the client imports httpx (on first use: an https server, an injected transport)."""
    code = (
        "import sys, codefleet.api.client as client; httpx = client._httpx(); "
        "print(sorted(m for m in ('httpx._main', 'pygments', 'click') if sys.modules.get(m) is not None), "
        "callable(httpx.main))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["[]", "True"]
