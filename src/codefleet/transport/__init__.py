"""The transport: how requests reach the engine fast, kept apart from what they mean.

- `routes`: the runner routes, each declared once; the FastAPI routes and the
  fast path's table are both generated from that one table;
- `fastpath`: the fast path that answers the hot routes in front of FastAPI,
  behind `server.front.Front`'s one small interface (`Shortcut`);
- `uvicorn_internals`: the one module that reaches into uvicorn (the
  connection guard, the one-write response cycle, the serve loop), with the
  pinned version beside it;
- `answerjson`: the JSON of the engine's answers, one function per answer type;
- `guards`, `hostcheck`: what every request meets first (the Host check, the
  bearer token, the body-size limit), used by `server.front`.

The package stands below `server/` and imports nothing of it; the clients'
HTTP/1.1 codec is `api.http1`.
"""
