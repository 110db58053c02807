// The page's only door to the server: JSON reads and the SSE stream, both
// through fetch so that the bearer token travels in a header (EventSource
// cannot send one). The token comes from `?token=` once, then lives in
// sessionStorage and leaves the address bar.

const TOKEN_KEY = "codefleet.token";
const EVENTS_PAGE = 5000; // events per `GET /events` read (the server allows up to 10,000)

export class AuthError extends Error {}

export class HttpError extends Error {
  constructor(status, message) {
    super(message || `HTTP ${status}`);
    this.status = status;
  }
}

function storage() {
  try {
    return window.sessionStorage;
  } catch {
    return null; // storage disabled: the token then lives for this page only
  }
}

/** The token from `?token=` (which is then removed from the URL) or from this tab's storage. */
export function takeToken() {
  const url = new URL(window.location.href);
  const given = url.searchParams.get("token");
  if (given !== null) {
    storage()?.setItem(TOKEN_KEY, given);
    url.searchParams.delete("token");
    window.history.replaceState(null, "", `${url.pathname}${url.search}${url.hash}`);
    return given;
  }
  return storage()?.getItem(TOKEN_KEY) ?? "";
}

export function saveToken(token) {
  storage()?.setItem(TOKEN_KEY, token);
}

/** Split an SSE text buffer into complete frames; returns [events, rest]. */
export function parseFrames(buffer) {
  const events = [];
  const text = buffer.replace(/\r\n?/g, "\n");
  let start = 0;
  for (;;) {
    const end = text.indexOf("\n\n", start);
    if (end < 0) break;
    const data = [];
    for (const line of text.slice(start, end).split("\n")) {
      if (line.startsWith("data:")) data.push(line.slice(line[5] === " " ? 6 : 5));
    }
    if (data.length) events.push(JSON.parse(data.join("\n")));
    start = end + 2;
  }
  return [events, text.slice(start)];
}

export class Api {
  constructor(token) {
    this.token = token;
  }

  headers() {
    return this.token ? { Authorization: `Bearer ${this.token}` } : {};
  }

  async get(path, signal) {
    const response = await fetch(path, { headers: this.headers(), cache: "no-store", signal });
    if (response.status === 401) throw new AuthError("the server wants a token");
    if (!response.ok) throw new HttpError(response.status);
    return response.json();
  }

  /** POST a JSON body (an operator action: the same bearer token as the reads); the answer's JSON. */
  async post(path, body) {
    const response = await fetch(path, {
      method: "POST",
      headers: { ...this.headers(), "Content-Type": "application/json" },
      body: JSON.stringify(body),
      cache: "no-store",
    });
    if (response.status === 401) throw new AuthError("the server wants a token");
    const answer = await response.json().catch(() => ({}));
    if (!response.ok) throw new HttpError(response.status, answer.error?.message);
    return answer;
  }

  /** Every event after `since`, through `GET /events` in pages, in id order. */
  async eventsAfter(since) {
    const events = [];
    for (;;) {
      const { events: page } = await this.get(`/events?since=${since}&limit=${EVENTS_PAGE}`);
      events.push(...page);
      if (page.length < EVENTS_PAGE) return events;
      since = page.at(-1).id;
    }
  }

  /** Read `/events/stream?since=` until it ends; `onOpen()` once connected, `onEvents(batch)` per chunk. */
  async stream(since, { onOpen, onEvents, signal }) {
    const response = await fetch(`/events/stream?since=${since}`, {
      headers: { ...this.headers(), Accept: "text/event-stream" },
      cache: "no-store",
      signal,
    });
    if (response.status === 401) throw new AuthError("the server wants a token");
    if (!response.ok || !response.body) throw new HttpError(response.status);
    onOpen();
    const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      const [events, rest] = parseFrames(buffer + value);
      buffer = rest;
      if (events.length) onEvents(events);
    }
  }
}
