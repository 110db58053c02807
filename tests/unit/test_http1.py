"""The HTTP/1.1 codec the lane and the hook share (`api.http1`), on the bytes themselves."""

from __future__ import annotations

import pytest

from codefleet.api.http1 import Head, Origin, dechunk, header_lines, parse_head, request_bytes


@pytest.mark.parametrize(
    ("url", "origin"),
    [
        ("http://127.0.0.1:8099", Origin("http", "127.0.0.1:8099", "127.0.0.1", 8099, "")),
        ("http://[::1]:8099/", Origin("http", "[::1]:8099", "::1", 8099, "")),
        ("https://fleet.example/api/", Origin("https", "fleet.example", "fleet.example", 443, "/api")),
        ("http://host/a/b", Origin("http", "host", "host", 80, "/a/b")),
    ],
)  # fmt: skip
def test_a_server_url_is_split_into_host_port_and_path_prefix(url: str, origin: Origin) -> None:
    assert Origin.of(url) == origin


@pytest.mark.parametrize("url", ["ftp://host", "host:8099", "http://", "http://:80"])
def test_a_url_that_is_not_http_to_a_host_is_refused(url: str) -> None:
    with pytest.raises(ValueError):
        Origin.of(url)


def test_a_request_is_its_line_the_headers_given_its_length_and_its_body() -> None:
    headers = header_lines({"Host": "h:1", "Content-Type": "application/json"})
    assert request_bytes("POST", "/leases/acquire", headers, b"{}") == (
        b"POST /leases/acquire HTTP/1.1\r\nHost: h:1\r\nContent-Type: application/json\r\n"
        b"Content-Length: 2\r\n\r\n{}"
    )


@pytest.mark.parametrize(
    ("head", "parsed"),
    [
        (b"HTTP/1.1 200 OK\r\ncontent-length: 11\r\ncontent-type: application/json", Head(200, 11, True, "")),
        (b"HTTP/1.1 204 No Content\r\nConnection: close", Head(204, None, False, "")),
        (b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 0", Head(200, 0, True, "")),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked", Head(200, None, True, "chunked")),
    ],
)  # fmt: skip
def test_an_answers_head_gives_status_length_keep_alive_and_encoding(
    head: bytes, parsed: Head
) -> None:
    assert parse_head(head) == parsed


def test_a_head_past_its_allowance_is_unreadable() -> None:
    with pytest.raises(ValueError, match="too long"):
        parse_head(b"HTTP/1.1 200 OK\r\nx: " + b"a" * 70_000)


def test_a_chunked_body_is_its_chunks_joined() -> None:
    assert dechunk(b"5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\n\r\n") == b"hello world"
