"""The engine's calls: the runner's, the hook's and the operator's, and the tick.

Each piece is handed the tables it writes through (`callparts.CallParts`), never the engine.
"""
