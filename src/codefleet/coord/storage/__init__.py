"""The store, from the bottom up: the file's upkeep, the one connection, the event log, the rows.

Only these modules speak SQL. Nothing here knows the engine.
"""
