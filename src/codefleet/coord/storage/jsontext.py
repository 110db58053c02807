"""The JSON text the store writes into its columns: event payloads, scopes, batches.

Compact, and decoded by `json.loads` to the values written. `payload_json` is
`json.dumps` with the store's arguments (one encoder, not one per call;
anything unknown becomes its `str`). `plain_json` is for plain values only
(str, int, lists and dicts of them: a scope, a `task_created` payload) and
uses orjson, about ten times faster; its text may differ (UTF-8 where the
stdlib escapes) but decodes the same.
"""

from __future__ import annotations

import json
from typing import Any

import orjson

__all__ = ["payload_json", "plain_json"]

payload_json = json.JSONEncoder(separators=(",", ":"), default=str).encode


def plain_json(value: Any) -> str:
    """Compact JSON of plain values (str, int, lists, dicts of them): orjson, else stdlib.

    The text may differ from `json.dumps` (UTF-8 instead of escapes) but decodes the
    same; what orjson refuses (a lone surrogate, a non-str key) takes the stdlib path.
    """
    try:
        return orjson.dumps(value).decode()
    except TypeError:
        return payload_json(value)
