"""The server's brain: the pure scheduler, the store, the engine and its parts."""
