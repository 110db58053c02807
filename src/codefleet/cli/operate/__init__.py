"""Commands a person types while a fleet runs: `tasks`, `cancel`, `retry`, `say`, `watch`, `landing`, limits."""
