"""Planning a task graph before a fleet runs it: `graph check` and `plan`.

`analysis` is the pure measure of a graph (critical path, width, predicted
parallelism through the real scheduler policy, overlapping scopes,
hotspots); `scopes` checks declared paths against the tree; `planner`
drives one read-only Claude session to a graph that passes those checks.
Nothing here imports the engine, the store or the server.
"""
