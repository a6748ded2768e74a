//! `drover skill …`: the workspace's skills, folders of instructions installed into each
//! task run's sandbox.

use anyhow::{bail, Result};

use super::print_json;
use crate::client::Client;
use crate::table;

/// The files under `dir` (relative paths, text), for a skill.
fn skill_files(dir: &std::path::Path) -> Result<Vec<drover_api::SkillFile>> {
    use anyhow::Context;
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).with_context(|| format!("reading {}", d.display()))? {
            let e = e?;
            let path = e.path();
            let name = e.file_name();
            if name.to_string_lossy().starts_with('.') {
                continue;
            }
            if e.file_type()?.is_dir() {
                stack.push(path);
                continue;
            }
            let rel = path.strip_prefix(dir).expect("under dir").to_string_lossy().replace('\\', "/");
            let content = std::fs::read_to_string(&path).with_context(|| format!("{} is not a text file", path.display()))?;
            out.push(drover_api::SkillFile { path: rel, content });
            if out.len() > drover_core::skill::MAX_FILES {
                bail!("a skill holds at most {} files", drover_core::skill::MAX_FILES);
            }
        }
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(out)
}

/// Runs `drover skill …`.
pub async fn skill(cmd: crate::args::SkillCmd, json: bool) -> Result<()> {
    use crate::args::SkillCmd;
    use drover_api::{PutSkill, SkillView};
    let client = Client::from_env()?;
    match cmd {
        SkillCmd::List => {
            let list: Vec<SkillView> = client.get("/api/v1/skills").await?;
            if json {
                return print_json(&list);
            }
            let rows: Vec<Vec<String>> = list
                .iter()
                .map(|s| {
                    vec![
                        s.name.clone(),
                        s.files.len().to_string(),
                        s.bytes.to_string(),
                        s.created_by.clone(),
                        table::ago(Some(&s.updated_at)),
                    ]
                })
                .collect();
            table::print(&["SKILL", "FILES", "BYTES", "BY", "CHANGED"], &rows);
        }
        SkillCmd::Add { name, dir } => {
            let files = skill_files(&dir)?;
            client.put_ok(&format!("/api/v1/skills/{}", crate::client::seg(&name)), &PutSkill { files }).await?;
            if json {
                return print_json(&serde_json::json!({ "skill": name, "added": true }));
            }
            println!("skill `{name}` added: task runs started from now on get it");
        }
        SkillCmd::Remove { name } => {
            client.delete(&format!("/api/v1/skills/{}", crate::client::seg(&name))).await?;
            if json {
                return print_json(&serde_json::json!({ "skill": name, "removed": true }));
            }
            println!("skill `{name}` removed");
        }
    }
    Ok(())
}
