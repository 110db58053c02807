"""The engine's calls: the runner's (and its gate's), the operator's, and the tick.

Each piece is handed the tables it writes through (`callparts.CallParts`), never the engine.
"""
