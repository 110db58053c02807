"""The tools of one attempt beyond file writes: commands, checks, resources, questions, messages."""
