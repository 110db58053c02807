"""Commands before a fleet runs: `init`, `doctor`, `graph check`, `plan`, `demo`."""
