//! Builds the browser UI (`web/`) with npm and esbuild and embeds it: the generated
//! `web_assets.rs` lists every built file with its bytes, so the `drover` binary serves
//! the UI with nothing else installed.
//!
//! `DROVER_WEB_DIST=DIR` embeds an already built directory instead (no npm).

use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let web = manifest.join("../../web").canonicalize().expect("the web/ folder next to crates/");
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("OUT_DIR"));
    println!("cargo:rerun-if-env-changed=DROVER_WEB_DIST");
    let dist = match std::env::var_os("DROVER_WEB_DIST") {
        Some(dir) => PathBuf::from(dir),
        None => {
            for p in
                ["src", "build.mjs", "index.html", "manifest.webmanifest", "icon.svg", "package.json", "package-lock.json", "tsconfig.json"]
            {
                println!("cargo:rerun-if-changed={}", web.join(p).display());
            }
            let dist = out.join("web");
            build(&web, &dist);
            dist
        }
    };
    embed(&dist, &out.join("web_assets.rs"));
}

fn npm() -> Command {
    let mut c = Command::new("npm");
    c.env("npm_config_audit", "false").env("npm_config_fund", "false").env("npm_config_update_notifier", "false");
    c
}

fn build(web: &Path, dist: &Path) {
    let lock = web.join("package-lock.json");
    let stamp = web.join("node_modules/.package-lock.json");
    let stale = match (std::fs::metadata(&lock).and_then(|m| m.modified()), std::fs::metadata(&stamp).and_then(|m| m.modified())) {
        (Ok(l), Ok(s)) => l > s,
        _ => true,
    };
    if stale {
        run(npm().arg("ci").current_dir(web), "npm ci (installs the UI's packages from package-lock.json)");
    }
    let _ = std::fs::remove_dir_all(dist);
    run(Command::new("node").arg("build.mjs").arg("--outdir").arg(dist).current_dir(web), "node build.mjs (bundles the UI)");
}

fn run(cmd: &mut Command, what: &str) {
    match cmd.status() {
        Ok(s) if s.success() => {}
        Ok(s) => panic!("{what} failed ({s}); Node.js 20+ and npm are needed to build the web UI"),
        Err(e) => panic!("{what} could not run ({e}); install Node.js 20+ and npm, which build the web UI"),
    }
}

fn embed(dist: &Path, target: &Path) {
    let mut files = Vec::new();
    collect(dist, dist, &mut files);
    files.sort();
    let mut src = String::from("/// The built UI: (path, bytes).\npub static ASSETS: &[(&str, &[u8])] = &[\n");
    for (rel, abs) in files {
        src.push_str(&format!("    ({rel:?}, include_bytes!({:?})),\n", abs.display().to_string()));
    }
    src.push_str("];\n");
    std::fs::write(target, src).expect("write web_assets.rs");
}

fn collect(root: &Path, dir: &Path, files: &mut Vec<(String, PathBuf)>) {
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()));
    for e in entries.flatten() {
        let path = e.path();
        if path.is_dir() {
            collect(root, &path, files);
        } else {
            let rel = path.strip_prefix(root).expect("under root").to_string_lossy().replace('\\', "/");
            files.push((format!("/{rel}"), path));
        }
    }
}
