// Writes src/messages.gen.json: the schemas (from openapi.json) of the messages the browser
// parses off its live connections, for src/validate.ts to check them against at run time.
import { readFileSync, writeFileSync } from "node:fs";

const MESSAGES = ["StreamUpdate", "StreamChanged", "ViewerEvent"];
const all = JSON.parse(readFileSync("openapi.json", "utf8")).components.schemas;
const picked = {};
const visit = (name) => {
  if (picked[name]) return;
  if (!all[name]) throw new Error(`openapi.json has no schema ${name}`);
  picked[name] = all[name];
  for (const m of JSON.stringify(all[name]).matchAll(/"#\/components\/schemas\/([^"]+)"/g)) visit(m[1]);
};
MESSAGES.forEach(visit);
const sorted = Object.fromEntries(Object.keys(picked).sort().map((k) => [k, picked[k]]));
writeFileSync("src/messages.gen.json", JSON.stringify(sorted, null, 2) + "\n");
