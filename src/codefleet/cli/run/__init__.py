"""Commands that run a fleet or join one: `serve`, `load`, `run`, `runner`, `join`."""
