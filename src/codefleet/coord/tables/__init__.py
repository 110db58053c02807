"""The tables the engine writes through: one part per table, each with its in-memory mirror.

Each part reads and writes its rows through the store inside the engine's transition;
none holds the engine or calls another layer above it.
"""
