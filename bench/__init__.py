"""Hand-run benchmarks of the CodeFleet server (not collected by pytest, not run in CI).

Run from the repository root, e.g. `uv run python -m bench.leases`; see
`docs/performance.md` (and the pages it links) for the commands and the figures.
"""
