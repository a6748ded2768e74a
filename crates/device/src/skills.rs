//! Installing a workspace's skills into a run's sandbox, where its harness looks for
//! them (`<sandbox>/.claude/skills/<name>/` for Claude Code). Each skill's folder holds a
//! `.gitignore` of `*`, so the sandbox's git never sees (or commits) it. Paths were
//! checked by the server and are checked again here.

use std::path::Path;

use drover_protocol::device::{SkillBundle, SkillReport};

fn report(name: &str, outcome: &str, detail: String) -> SkillReport {
    SkillReport { name: name.to_string(), outcome: outcome.into(), detail }
}

fn install_one(sandbox: &Path, folder: &str, s: &SkillBundle) -> std::io::Result<String> {
    let sizes: Vec<(&str, usize)> = s.files.iter().map(|(p, c)| (p.as_str(), c.len())).collect();
    drover_core::skill::check(&s.name, &sizes).map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e.to_string()))?;
    let dir = sandbox.join(folder).join(&s.name);
    if dir.exists() {
        std::fs::remove_dir_all(&dir)?;
    }
    std::fs::create_dir_all(&dir)?;
    std::fs::write(dir.join(".gitignore"), "*\n")?;
    for (path, content) in &s.files {
        let file = dir.join(path);
        if let Some(parent) = file.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(file, content)?;
    }
    Ok(format!("{folder}/{}", s.name))
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
        let dir = sandbox.path().join(".claude/skills/review");
        assert_eq!(std::fs::read_to_string(dir.join("refs/style.md")).unwrap(), "tabs");
        assert_eq!(std::fs::read_to_string(dir.join(".gitignore")).unwrap(), "*\n");
        assert!(!sandbox.path().parent().unwrap().join("evil").exists());
        // Installing again replaces the folder (a file dropped from the skill goes).
        install(sandbox.path(), &[bundle("review", Some(".claude/skills"), &[("SKILL.md", "v2")])]);
        assert!(!dir.join("refs/style.md").exists());
    }
}
