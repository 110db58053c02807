"""A recording asyncio transport: what a protocol wrote, write by write, with no socket."""

from __future__ import annotations

import asyncio
from typing import Any, Final

__all__ = ["RecordingTransport"]

ADDRESSES: Final = {"sockname": ("127.0.0.1", 8000), "peername": ("127.0.0.1", 50000)}


class RecordingTransport(asyncio.Transport):
    """Keeps every `write` as bytes in `writes`; a write after `close` is a bug it reports."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[bytes] = []
        self.closed = False

    def write(self, data: bytes | bytearray | memoryview) -> None:
        assert not self.closed, "a write after close"
        self.writes.append(bytes(data))

    def close(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ADDRESSES.get(name, default)

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass
