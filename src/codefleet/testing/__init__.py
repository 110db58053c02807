"""Test doubles shipped with CodeFleet.

`fakemodel` is a scripted fake of the Anthropic Messages API on loopback. The real-CLI
test tier and `codefleet demo --offline` point the real Claude Code CLI at it, so the
hook, the veto and the ledger are exercised end to end with no key and no network.

`fakecodex` is the same scripts served as the OpenAI Responses API, for the real Codex
CLI (the Codex runner's offline tier and `codefleet demo --offline --mixed`).

`fakegemini` is the same scripts served as the Gemini API (`streamGenerateContent`), for
the real Gemini CLI in the agents tier (tests/agents).
"""
