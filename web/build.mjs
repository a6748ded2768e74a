// Bundles the UI into --outdir (default dist/): index.html, app.js, app.css, the service
// worker sw.js, the live terminal's socket worker socket.js, and the web app manifest
// with its icon.
import * as esbuild from "esbuild";
import { copyFileSync, mkdirSync } from "node:fs";
import { join } from "node:path";

const i = process.argv.indexOf("--outdir");
const outdir = i > 0 ? process.argv[i + 1] : "dist";
mkdirSync(outdir, { recursive: true });

const result = await esbuild.build({
  entryPoints: { app: "src/main.tsx" },
  bundle: true,
  minify: true,
  sourcemap: false,
  target: ["es2022"],
  format: "esm",
  jsx: "automatic",
  jsxImportSource: "preact",
  outdir,
  logLevel: "warning",
  loader: { ".css": "css" },
});
// The workers, each a classic script of its own: the service worker, served at /sw.js
// (scope: the site), and the terminal's socket worker at /socket.js.
const worker = await esbuild.build({
  entryPoints: { sw: "src/sw.ts", socket: "src/socket-worker.ts" },
  bundle: true,
  minify: true,
  sourcemap: false,
  target: ["es2022"],
  format: "iife",
  outdir,
  logLevel: "warning",
});
const warnings = result.warnings.length + worker.warnings.length;
if (warnings > 0) {
  console.error(`esbuild: ${warnings} warning(s)`);
  process.exit(1);
}
for (const f of ["index.html", "manifest.webmanifest", "icon.svg"]) copyFileSync(f, join(outdir, f));
