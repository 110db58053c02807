"""The read model: what every read route says, and why, in one room.

`readapi.Reads` answers the wire's reads (`/tasks`, `/state`, `/agents`,
`/leases`, `/conflicts`, `/health`, the run record); `projection` keeps the
reads that grow with the run encoded; `rows` is every wire row shape and its
derived fields. It is fed only by `coord.engineview.EngineReads`, the engine's
typed read-only interface (no store object crosses it), and derives
`runnable` from the engine's own rule (`coord.policy.readiness`).
"""
