"""The fake Gemini API's wire (`offlinemodels.geminiwire`): requests read, replies written, as
Gemini CLI 0.61.0 sends and reads them (tests/agents runs the real CLI against it)."""

from __future__ import annotations

import json
from typing import Any

from codefleet.offlinemodels.geminiwire import (
    GeminiRequest,
    count_turn,
    find_script_id,
    render_error,
    render_stream,
)
from codefleet.offlinemodels.modelscripts import ApiError, Text, ToolUse, Turn, Usage, marker


def second_request() -> dict[str, Any]:
    # measured: the CLI's second request after a write_file its BeforeTool hook blocked
    return {
        "contents": [
            {
                "role": "user",
                "parts": [{"text": "<session_context>…"}, {"text": f"Go. {marker('s1')}"}],
            },
            {
                "role": "model",
                "parts": [
                    {"functionCall": {"name": "write_file", "args": {}}, "thoughtSignature": "x"}
                ],
            },
            {
                "role": "user",
                "parts": [
                    {
                        "functionResponse": {
                            "name": "write_file",
                            "response": {"error": "Tool execution blocked: held"},
                            "id": "write_file_1_0",
                        }
                    }
                ],
            },
        ]
    }


def test_a_request_names_its_script_and_its_turn_by_the_model_entries_it_holds() -> None:
    body = second_request()
    assert (find_script_id(body), count_turn(body)) == ("s1", 1)
    assert count_turn({"contents": body["contents"][:1]}) == 0


def test_a_blocked_call_comes_back_as_an_error_result_with_the_hooks_reason() -> None:
    [result] = GeminiRequest(0, "s1", 1, second_request()).tool_results
    assert (result.tool_use_id, result.content, result.is_error) == (
        "write_file_1_0",
        "Tool execution blocked: held",
        True,
    )


def test_a_reply_is_one_sse_event_with_text_and_function_call_parts() -> None:
    turn = Turn(content=(Text("ok"), ToolUse("replace", {"file_path": "a.py"})), usage=Usage(7, 3))
    raw = render_stream(turn, "gemini-2.5-flash").decode()
    assert raw.startswith("data: ") and raw.endswith("\r\n\r\n")
    response = json.loads(raw[len("data: ") :])
    [candidate] = response["candidates"]
    assert candidate["content"] == {
        "role": "model",
        "parts": [
            {"text": "ok"},
            {"functionCall": {"name": "replace", "args": {"file_path": "a.py"}}},
        ],
    }
    assert candidate["finishReason"] == "STOP"
    assert response["usageMetadata"]["totalTokenCount"] == 10


def test_an_error_is_the_google_api_error_body() -> None:
    body = json.loads(render_error(ApiError(429, "rate_limit_error", "slow down")))
    assert body == {"error": {"code": 429, "message": "slow down", "status": "RESOURCE_EXHAUSTED"}}
