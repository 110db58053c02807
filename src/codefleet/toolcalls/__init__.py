"""What an agent's tool call writes: the paths of a write, a Codex patch read exactly, THE denial.

Standard library only: the hook, the runner's gate and the server all read tool calls here.
"""
