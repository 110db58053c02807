// The routes of a small notes service: each route names the handler that answers it.
import { findNote, listNotes } from "./notes";
import { json, Reply } from "./reply";

export type Params = Record<string, string>;
export type Handler = (params: Params) => Reply;

export function getNotes(): Reply {
  return json(200, listNotes());
}

export function getNote(params: Params): Reply {
  const note = findNote(params.id);
  return note ? json(200, note) : json(404, { error: `no note ${params.id}` });
}

// Each route: a method, a path pattern (`:name` matches one segment) and its handler.
export const ROUTES: ReadonlyArray<readonly [string, string, Handler]> = [
  ["GET", "/notes", getNotes],
  ["GET", "/notes/:id", getNote],
];

export function dispatch(method: string, path: string): Reply {
  for (const [verb, pattern, handler] of ROUTES) {
    const params = match(pattern, path);
    if (verb === method && params !== null) {
      return handler(params);
    }
  }
  return json(404, { error: `no route for ${method} ${path}` });
}

function match(pattern: string, path: string): Params | null {
  const want = pattern.split("/");
  const got = path.split("/");
  if (want.length !== got.length) {
    return null;
  }
  const params: Params = {};
  for (let i = 0; i < want.length; i++) {
    if (want[i].startsWith(":")) {
      params[want[i].slice(1)] = got[i];
    } else if (want[i] !== got[i]) {
      return null;
    }
  }
  return params;
}
