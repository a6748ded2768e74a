//! Skills (seed 001 "Skills"): folders of instructions a workspace enables, installed
//! into each task run's sandbox where its harness looks for them. The rules for what a
//! skill may hold, and where each harness finds one.

use crate::harness::Harness;

/// Most files in one skill.
pub const MAX_FILES: usize = 64;
/// Most bytes in one skill, all files together.
pub const MAX_BYTES: usize = 256 * 1024;
/// The file every skill has: its instructions, with their name and description.
pub const MANIFEST: &str = "SKILL.md";

/// Why a skill is not acceptable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SkillError {
    /// A bad name.
    #[error("skill name `{0}` is not valid: use 1–63 letters, digits, '-', '_' or '.', starting with a letter or digit")]
    Name(String),
    /// Too many files or bytes.
    #[error("a skill holds at most {MAX_FILES} files and {MAX_BYTES} bytes")]
    TooLarge,
    /// A path that is absolute, climbs out, or is not plain.
    #[error("`{0}` is not a plain relative path inside the skill's folder")]
    Path(String),
    /// No SKILL.md.
    #[error("a skill needs a {MANIFEST} at its top (its instructions)")]
    NoManifest,
}

/// Checks a skill's name and its files (`(relative path, size)`).
pub fn check(name: &str, files: &[(&str, usize)]) -> Result<(), SkillError> {
    crate::names::check_device_name(name).map_err(|_| SkillError::Name(name.chars().take(80).collect()))?;
    if files.len() > MAX_FILES || files.iter().map(|(_, n)| n).sum::<usize>() > MAX_BYTES {
        return Err(SkillError::TooLarge);
    }
    for (path, _) in files {
        let plain = !path.is_empty()
            && path.len() <= 200
            && !path.starts_with('/')
            && path.split('/').all(|c| !c.is_empty() && c != "." && c != ".." && !c.chars().any(|ch| ch.is_control() || ch == '\\'));
        if !plain {
            return Err(SkillError::Path(path.chars().take(80).collect()));
        }
    }
    if !files.iter().any(|(p, _)| *p == MANIFEST) {
        return Err(SkillError::NoManifest);
    }
    Ok(())
}

/// Where `harness` looks for skills, relative to its working directory; None when it
/// has no skills folder (the skill then cannot reach its sessions).
pub fn folder(harness: Harness) -> Option<&'static str> {
    match harness {
        Harness::Claude => Some(".claude/skills"),
        Harness::Codex | Harness::Gemini | Harness::Aider | Harness::Opencode | Harness::Goose | Harness::Custom => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn skills_need_a_manifest_plain_paths_and_bounded_size() {
        assert_eq!(check("review-checklist", &[("SKILL.md", 10), ("refs/style.md", 20)]), Ok(()));
        assert_eq!(check("x", &[("notes.md", 1)]), Err(SkillError::NoManifest));
        for bad in ["../escape", "/etc/passwd", "a//b", "./a", "a\\b", "a/\u{7}"] {
            assert!(matches!(check("x", &[("SKILL.md", 1), (bad, 1)]), Err(SkillError::Path(_))), "{bad}");
        }
        assert_eq!(check("x", &[("SKILL.md", MAX_BYTES + 1)]), Err(SkillError::TooLarge));
        assert!(matches!(check("bad name", &[("SKILL.md", 1)]), Err(SkillError::Name(_))));
    }

    #[test]
    fn only_harnesses_with_a_skills_folder_get_skills() {
        assert_eq!(folder(Harness::Claude), Some(".claude/skills"));
        assert_eq!(folder(Harness::Codex), None);
    }
}
