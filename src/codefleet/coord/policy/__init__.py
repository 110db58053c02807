"""The engine's pure rules: the scheduler, readiness, limits, landing, registration, parked waits.

No I/O and no store: each module turns values into decisions, and the values the engine
answers with (`answers`) and tunes itself by (`engineconfig`) live here too.
"""
