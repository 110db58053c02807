"""Test doubles shipped with CodeFleet.

`fakemodel` is a scripted fake of the Anthropic Messages API on loopback. The real-CLI
test tier and `codefleet demo --offline` point the real Claude Code CLI at it, so the
hook, the veto and the ledger are exercised end to end with no key and no network.
"""
