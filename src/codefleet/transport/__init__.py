"""The transport: how requests reach the engine fast, kept apart from what they mean.

- `routes`: the runner routes, each declared once; the FastAPI routes and the
  fast path's table are both generated from that one table;
- `fastpath`: the fast path that answers the hot routes in front of FastAPI,
  behind `server.front.Front`'s one small interface (`Shortcut`);
- `uvicorn_internals`: the one module that reaches into uvicorn (the
  connection guard, the one-write response cycle, the serve loop), with the
  pinned version beside it;
- `http1`: the minimal standard-library HTTP/1.1 client codec shared by the
  pre-write lane (`api.lane`) and the person's hook (`hook.command`).

Importing this package imports nothing: the hook imports `http1` alone.
"""
