"""Scripted stand-ins for the vendors' model APIs, served on 127.0.0.1 for the offline mode.

Anthropic Messages (Claude Code), OpenAI Responses (Codex, Copilot on GPT), Gemini
(`streamGenerateContent`): each replays a script of turns, with no key and no cost.
Product code reaches them only through the offline seams (`session.offline`,
`planning.plansession`).
"""
