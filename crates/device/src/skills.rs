//! Installing a workspace's skills into a run's sandbox, where its harness looks for
//! them (`<sandbox>/.claude/skills/drover-<name>/` for Claude Code; the prefix keeps a
//! repository's own skills untouched). Each skill's folder holds a `.gitignore` of `*`,
//! so the sandbox's git never sees (or commits) it. Paths were checked by the server and
//! are checked again here; the sandbox is the agent's to shape, so no folder on the way
//! may be a symbolic link (that could point the install, and its clean-up, elsewhere).

use std::path::Path;

use drover_protocol::device::{SkillBundle, SkillReport};

fn report(name: &str, outcome: &str, detail: String) -> SkillReport {
    SkillReport { name: name.to_string(), outcome: outcome.into(), detail }
}

/// Creates each folder of `rel` under `base` (real folders only: a symbolic link on the
/// way is refused); returns the last.
fn real_dirs(base: &Path, rel: &str) -> std::io::Result<std::path::PathBuf> {
    let mut at = base.to_path_buf();
    for part in rel.split('/').filter(|p| !p.is_empty()) {
        at.push(part);
        match std::fs::symlink_metadata(&at) {
            Ok(m) if m.file_type().is_symlink() => {
                return Err(std::io::Error::new(std::io::ErrorKind::InvalidInput, format!("{} is a symbolic link", at.display())))
            }
            Ok(m) if m.is_dir() => {}
            Ok(_) => return Err(std::io::Error::new(std::io::ErrorKind::InvalidInput, format!("{} is not a folder", at.display()))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => std::fs::create_dir(&at)?,
            Err(e) => return Err(e),
        }
    }
    Ok(at)
}

fn install_one(sandbox: &Path, folder: &str, s: &SkillBundle) -> std::io::Result<String> {
    let sizes: Vec<(&str, usize)> = s.files.iter().map(|(p, c)| (p.as_str(), c.len())).collect();
    drover_core::skill::check(&s.name, &sizes).map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e.to_string()))?;
    let sandbox = sandbox.canonicalize()?;
    let skills = real_dirs(&sandbox, folder)?;
    let name = format!("drover-{}", s.name);
    let dir = skills.join(&name);
    // The folder itself: a link is removed (not followed), a folder replaced.
    match std::fs::symlink_metadata(&dir) {
        Ok(m) if m.file_type().is_symlink() || !m.is_dir() => std::fs::remove_file(&dir)?,
        Ok(_) => std::fs::remove_dir_all(&dir)?,
        Err(_) => {}
    }
    std::fs::create_dir(&dir)?;
    std::fs::write(dir.join(".gitignore"), "*\n")?;
    for (path, content) in &s.files {
        if path == ".gitignore" {
            continue; // the skill's folder stays out of git
        }
        let file = dir.join(path);
        if let Some(parent) = file.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(file, content)?;
    }
    Ok(format!("{folder}/{name}"))
}

/// Installs `skills` into the sandbox at `sandbox`; one report each.
pub fn install(sandbox: &Path, skills: &[SkillBundle]) -> Vec<SkillReport> {
    skills
        .iter()
        .map(|s| match &s.folder {
            None => report(&s.name, "unsupported", "the run's harness has no skills folder".into()),
            Some(folder) => match install_one(sandbox, folder, s) {
                Ok(at) => report(&s.name, "installed", at),
                Err(e) => report(&s.name, "failed", e.to_string()),
            },
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bundle(name: &str, folder: Option<&str>, files: &[(&str, &str)]) -> SkillBundle {
        SkillBundle {
            name: name.into(),
            folder: folder.map(str::to_string),
            files: files.iter().map(|(p, c)| (p.to_string(), c.to_string())).collect(),
        }
    }

    #[test]
    fn skills_land_where_the_harness_looks_and_git_ignores_them() {
        let sandbox = tempfile::tempdir().unwrap();
        let skills = [
            bundle("review", Some(".claude/skills"), &[("SKILL.md", "---\nname: review\n---\nCheck the diff."), ("refs/style.md", "tabs")]),
            bundle("codex-only", None, &[("SKILL.md", "x")]),
            bundle("escape", Some(".claude/skills"), &[("SKILL.md", "x"), ("../../evil", "x")]),
        ];
        let r = install(sandbox.path(), &skills);
        assert_eq!(r.iter().map(|r| r.outcome.as_str()).collect::<Vec<_>>(), ["installed", "unsupported", "failed"]);
        let dir = sandbox.path().join(".claude/skills/drover-review");
        assert_eq!(std::fs::read_to_string(dir.join("refs/style.md")).unwrap(), "tabs");
        assert_eq!(std::fs::read_to_string(dir.join(".gitignore")).unwrap(), "*\n");
        assert!(!sandbox.path().parent().unwrap().join("evil").exists());
        // Installing again replaces the folder (a file dropped from the skill goes).
        install(sandbox.path(), &[bundle("review", Some(".claude/skills"), &[("SKILL.md", "v2")])]);
        assert!(!dir.join("refs/style.md").exists());
    }

    #[test]
    fn a_symlinked_folder_on_the_way_is_refused_and_nothing_outside_is_touched() {
        let root = tempfile::tempdir().unwrap();
        let (sandbox, outside) = (root.path().join("sandbox"), root.path().join("outside"));
        std::fs::create_dir_all(outside.join("skills/drover-review")).unwrap();
        std::fs::write(outside.join("skills/drover-review/precious.txt"), "keep me").unwrap();
        std::fs::create_dir(&sandbox).unwrap();
        std::os::unix::fs::symlink(&outside, sandbox.join(".claude")).unwrap();
        let r = install(&sandbox, &[bundle("review", Some(".claude/skills"), &[("SKILL.md", "x")])]);
        assert_eq!(r[0].outcome, "failed", "{r:?}");
        assert!(r[0].detail.contains("symbolic link"));
        assert_eq!(std::fs::read_to_string(outside.join("skills/drover-review/precious.txt")).unwrap(), "keep me");
        assert!(!outside.join("skills/drover-review/SKILL.md").exists());
    }
}
