"""Commands after a run: `commit`, `land`, `report`, `stats`, `runs`."""
