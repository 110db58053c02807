// How events read, said once: the table is codefleet/wording.json, served at
// /web/wording.json; codefleet/wording.py renders the same table for the
// terminal. Pure (no DOM): tests/unit/test_wording.py runs it under node and
// checks it against the Python renderer. The template language is described there.

const PLACEHOLDER = /\{([\w.]+)(?:\|(\w+)(?::(\d+))?)?\}/g;

/** The wording table, fetched once. */
export async function loadWording(url = new URL("./wording.json", import.meta.url)) {
  const answer = await fetch(url);
  return answer.ok ? answer.json() : {};
}

/** The words for one event of type `kind`, or null when the table has no entry. */
export function phrase(table, kind, payload) {
  const template = table[kind];
  if (!template) return null;
  return template.map((part) => renderPart(part, payload ?? {})).join("");
}

function renderPart(part, body) {
  if (typeof part === "string") return fill(part, body);
  for (const [condition, text] of part) {
    if (condition.split("&").filter(Boolean).every((c) => holds(c, body))) return fill(text, body);
  }
  return "";
}

function get(body, path) {
  let value = body;
  for (const key of path.split(".")) value = value !== null && typeof value === "object" && !Array.isArray(value) ? value[key] : undefined;
  return value;
}

// None, false, 0, "", [] and {} are falsy here and in wording.py
function truthy(value) {
  if (Array.isArray(value)) return value.length > 0;
  if (value !== null && typeof value === "object") return Object.keys(value).length > 0;
  return Boolean(value);
}

function present(value) {
  return value !== null && value !== undefined;
}

function holds(condition, body) {
  if (condition.startsWith("!")) return !truthy(get(body, condition.slice(1)));
  if (condition.endsWith("?")) return present(get(body, condition.slice(0, -1)));
  const eq = condition.indexOf("=");
  if (eq >= 0) {
    const value = get(body, condition.slice(0, eq));
    return present(value) && text(value) === condition.slice(eq + 1);
  }
  return truthy(get(body, condition));
}

function fill(template, body) {
  return template.replace(PLACEHOLDER, (_, path, filter, n) => {
    const value = get(body, path);
    if (filter) return applyFilter(filter, value, Number(n ?? 0));
    return present(value) ? text(value) : "?";
  });
}

function text(value) {
  if (typeof value === "string" || typeof value === "number" || typeof value === "boolean") return String(value);
  return JSON.stringify(value);
}

function applyFilter(name, value, n) {
  switch (name) {
    case "cost": {
      const usd = Number(value) || 0;
      return `$${usd.toFixed(usd >= 100 ? 2 : 4)}`;
    }
    case "trunc": {
      const chars = [...(present(value) ? text(value) : "")];
      return chars.length <= n ? chars.join("") : `${chars.slice(0, Math.max(1, n - 1)).join("")}…`;
    }
    case "short": return present(value) ? [...text(value)].slice(0, n).join("") : "";
    case "join": return (value ?? []).map(text).join(", ");
    case "counts": return Object.entries(value ?? {}).map(([k, v]) => `${text(v)} ${k}`).join(", ");
    case "clock": return clock(value);
    case "key": return leaseLabel(present(value) ? text(value) : "");
    case "stale": return (value ?? []).map(staleOne).join(", ");
    default: throw new Error(`wording.json names an unknown filter ${name}`);
  }
}

// A resource's lease key (codefleet/resources.py: RESOURCE_PREFIX + name); no file's key starts with "/".
const RESOURCE_PREFIX = "/resource:";

/** A lease key as people read it: a file's path, or `resource db` for the key `/resource:db` (as `watch` says). */
export function leaseLabel(key) {
  const value = String(key ?? "");
  return value.startsWith(RESOURCE_PREFIX) ? `resource ${value.slice(RESOURCE_PREFIX.length)}` : value;
}

// A part's lease key is `path::name` (codefleet/toolcalls/leasekeys.py: PART_SEPARATOR); the first "::" splits.
export const PART_SEPARATOR = "::";

/** `{file, part}` of a lease key, as `toolcalls.leasekeys.split_part_key`: part null for a whole file or a resource. */
export function splitLeaseKey(key) {
  const value = String(key ?? "");
  const at = value.indexOf(PART_SEPARATOR);
  if (value.startsWith(RESOURCE_PREFIX) || at <= 0 || at + PART_SEPARATOR.length >= value.length) return { file: value, part: null };
  return { file: value.slice(0, at), part: value.slice(at + PART_SEPARATOR.length) };
}

// One stale read: "api.py (T3)", or "api.py (deleted by T3)".
function staleOne(item) {
  const who = (item?.changed_by ?? []).map(text).join(", ");
  const gone = item?.now_sha256 === null || item?.now_sha256 === undefined;
  return `${text(item?.path ?? "?")} (${gone ? "deleted by " : ""}${who})`;
}

function clock(stamp) {
  const date = new Date(String(stamp));
  if (Number.isNaN(date.getTime())) return "";
  const pad = (n) => String(n).padStart(2, "0");
  return `${pad(date.getHours())}:${pad(date.getMinutes())}:${pad(date.getSeconds())}`;
}
