"""Real Claude Code sessions: the SDK executor and its pure helpers."""
