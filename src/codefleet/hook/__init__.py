"""A person's own Claude Code session in the lock: the command hook (standard library only)."""
