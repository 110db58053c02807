// What a handler returns: a status and a JSON body.
export interface Reply {
  status: number;
  body: string;
}

export function json(status: number, value: unknown): Reply {
  return { status, body: JSON.stringify(value) };
}
