// Checks what the browser parses off its live connections (the update stream, the terminal
// socket) against the contract's schemas (messages.gen.json, from openapi.json) before use:
// a message that does not match is dropped and logged, never trusted or thrown on.

import schemas from "./messages.gen.json";

/** The subset of JSON Schema the generated document uses. */
interface Schema {
  $ref?: string;
  type?: string | string[];
  properties?: Record<string, Schema>;
  required?: string[];
  enum?: unknown[];
  oneOf?: Schema[];
  anyOf?: Schema[];
  allOf?: Schema[];
  items?: Schema;
  pattern?: string;
  minimum?: number;
}

const SCHEMAS = schemas as unknown as Record<string, Schema>;

function typeOf(v: unknown): string {
  if (v === null) return "null";
  if (Array.isArray(v)) return "array";
  if (typeof v === "number") return Number.isInteger(v) ? "integer" : "number";
  return typeof v;
}

function typeMatches(want: string, got: string): boolean {
  return want === got || (want === "number" && got === "integer");
}

/** Why `v` does not match `s` (at `at`), or null when it does. */
export function mismatch(s: Schema, v: unknown, at = "$"): string | null {
  if (s.$ref) {
    const name = s.$ref.replace("#/components/schemas/", "");
    const target = SCHEMAS[name];
    return target ? mismatch(target, v, at) : `${at}: unknown schema ${name}`;
  }
  if (s.oneOf && !s.oneOf.some((o) => mismatch(o, v, at) === null)) return `${at}: matches none of its variants`;
  if (s.anyOf && !s.anyOf.some((o) => mismatch(o, v, at) === null)) return `${at}: matches none of its variants`;
  for (const o of s.allOf ?? []) {
    const why = mismatch(o, v, at);
    if (why) return why;
  }
  const got = typeOf(v);
  if (s.type !== undefined) {
    const wants = Array.isArray(s.type) ? s.type : [s.type];
    if (!wants.some((w) => typeMatches(w, got))) return `${at}: ${got}, not ${wants.join(" or ")}`;
  }
  if (s.enum && !s.enum.includes(v)) return `${at}: ${JSON.stringify(v)} is not one of ${JSON.stringify(s.enum)}`;
  if (typeof v === "string" && s.pattern && !new RegExp(s.pattern).test(v)) return `${at}: does not match ${s.pattern}`;
  if (typeof v === "number" && s.minimum !== undefined && v < s.minimum) return `${at}: below ${s.minimum}`;
  if (got === "array" && s.items) {
    const items = v as unknown[];
    for (let i = 0; i < items.length; i++) {
      const why = mismatch(s.items, items[i], `${at}[${i}]`);
      if (why) return why;
    }
  }
  if (got === "object" && (s.properties || s.required)) {
    const o = v as Record<string, unknown>;
    for (const k of s.required ?? []) if (!(k in o)) return `${at}.${k}: missing`;
    for (const [k, p] of Object.entries(s.properties ?? {})) {
      if (!(k in o)) continue;
      const why = mismatch(p, o[k], `${at}.${k}`);
      if (why) return why;
    }
  }
  return null;
}

/** The message names validate() knows. */
export type MessageName = "StreamUpdate" | "StreamChanged" | "ViewerEvent";

/** Parses `text` as the message `name`: the value when it matches its schema; otherwise
 *  null, with the reason logged to the console (the page carries on). */
export function parseMessage<T>(name: MessageName, text: string): T | null {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    console.warn(`drover: dropped a ${name} that is not JSON`);
    return null;
  }
  const why = mismatch({ $ref: `#/components/schemas/${name}` }, v);
  if (why) {
    console.warn(`drover: dropped a ${name} that does not match the API contract: ${why}`);
    return null;
  }
  return v as T;
}
