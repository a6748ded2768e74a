// Bundles the UI into --outdir (default dist/): index.html, app.js, app.css.
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
if (result.warnings.length > 0) {
  console.error(`esbuild: ${result.warnings.length} warning(s)`);
  process.exit(1);
}
copyFileSync("index.html", join(outdir, "index.html"));
