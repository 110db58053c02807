"""The HTTP surface over the engine: routes, guards, the event stream, the web page."""
