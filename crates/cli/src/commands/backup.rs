//! `drover backup`: a copy of the database taken while the server runs, written under a
//! temporary name and put in place only once it is whole and checked, so a half-written
//! backup is never left where a restore would pick it up. SQLite only: for PostgreSQL it
//! says how to use `pg_dump`, which does the same for a live PostgreSQL database.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use drover_store::Database;

use super::database::database;
use crate::args::BackupArgs;
use crate::commands::print_json;

/// `drover backup --out FILE`.
pub async fn backup(args: BackupArgs, json: bool) -> Result<()> {
    let database = database(&args.db)?;
    let source = match &database {
        Database::Sqlite(path) => path.clone(),
        Database::Postgres(url) => bail!(postgres_guidance(url, &args.out)),
    };
    if !source.is_file() {
        bail!("there is no database at {} (pass --database sqlite:PATH, or set DROVER_HOME to the server's)", source.display());
    }
    let out = &args.out;
    if out.symlink_metadata().is_ok() {
        bail!("{} already exists: name a new file (a backup never writes over one)", out.display());
    }
    let partial = partial_name(out)?;
    let copied = match copy(&source, &partial, out).await {
        Ok(copied) => copied,
        Err(e) => {
            let _ = std::fs::remove_file(&partial);
            return Err(e);
        }
    };
    let size = std::fs::metadata(out).map(|m| m.len()).unwrap_or(0);
    if json {
        return print_json(&serde_json::json!({
            "file": out,
            "database": database.display(),
            "bytes": size,
            "schema_version": copied.schema_version,
        }));
    }
    println!(
        "backed up {} to {} ({}, schema version {}); to restore, stop the server and put it in the database's place",
        database.display(),
        out.display(),
        drover_core::doctor::bytes(size),
        copied.schema_version
    );
    Ok(())
}

/// Where the copy is made before it is put in place: beside `out` (the same file
/// system, so placing it is one link), hidden, and named after this process.
fn partial_name(out: &Path) -> Result<PathBuf> {
    let dir = match out.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    if !dir.is_dir() {
        bail!("cannot write {}: {} is not a directory", out.display(), dir.display());
    }
    let name = out.file_name().with_context(|| format!("{} names no file", out.display()))?;
    Ok(dir.join(format!(".{}.partial-{}", name.to_string_lossy(), std::process::id())))
}

/// Copies `source` into `partial`, makes it durable, and puts it at `out`.
async fn copy(source: &Path, partial: &Path, out: &Path) -> Result<drover_store::Copied> {
    let copied = drover_store::backup_sqlite(source, partial).await.with_context(|| format!("copying {}", source.display()))?;
    std::fs::File::open(partial).and_then(|f| f.sync_all()).with_context(|| format!("writing {}", partial.display()))?;
    place(partial, out)?;
    if let Some(dir) = out.parent().filter(|p| !p.as_os_str().is_empty()) {
        // The new name is durable too.
        let _ = std::fs::File::open(dir).and_then(|d| d.sync_all());
    }
    Ok(copied)
}

/// Gives `partial` the name `out`, never writing over a file that appeared there since
/// the start (a hard link fails if the name is taken; a rename would replace it).
fn place(partial: &Path, out: &Path) -> Result<()> {
    match std::fs::hard_link(partial, out) {
        Ok(()) => std::fs::remove_file(partial).with_context(|| format!("removing {}", partial.display())),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            bail!("{} appeared while the copy was made: it was left as it is and no backup was written", out.display())
        }
        // A file system without hard links: check, then rename.
        Err(_) if out.symlink_metadata().is_err() => std::fs::rename(partial, out).with_context(|| format!("writing {}", out.display())),
        Err(e) => Err(e).with_context(|| format!("writing {}", out.display())),
    }
}

/// What to do instead on PostgreSQL: its own tools, with the address shown without its
/// password (given through `PGPASSWORD` or `~/.pgpass`, never on a command line).
fn postgres_guidance(url: &str, out: &Path) -> String {
    let (shown, restored) = match reqwest::Url::parse(url) {
        Ok(mut u) => {
            let _ = u.set_password(None);
            let shown = u.to_string();
            u.set_path("/drover_restored");
            (shown, u.to_string())
        }
        Err(_) => ("postgres://USER@HOST:PORT/DATABASE".into(), "postgres://USER@HOST:PORT/drover_restored".into()),
    };
    let out = out.display();
    format!(
        "drover backup copies SQLite databases; PostgreSQL's own pg_dump copies a live one consistently (the password through PGPASSWORD or ~/.pgpass, not on the command line):\n  \
         pg_dump --format=custom --file='{out}' '{shown}'\n\
         To restore, stop every drover server, create a new, empty database (createdb drover_restored), then:\n  \
         pg_restore --no-owner --exit-on-error --dbname='{restored}' '{out}'\n\
         and start the servers with --database naming it."
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_postgres_guidance_never_shows_the_password() {
        let text = postgres_guidance("postgres://drover:s3cret@db.example:5432/drover", Path::new("/b/drover.dump"));
        assert!(!text.contains("s3cret"), "{text}");
        assert!(text.contains("pg_dump --format=custom --file='/b/drover.dump' 'postgres://drover@db.example:5432/drover'"), "{text}");
        assert!(text.contains("pg_restore"), "{text}");
    }

    #[test]
    fn the_copy_is_made_beside_its_file_under_a_hidden_name() {
        let dir = tempfile::tempdir().unwrap();
        let partial = partial_name(&dir.path().join("b.db")).unwrap();
        assert_eq!(partial.parent(), Some(dir.path()));
        assert!(partial.file_name().unwrap().to_string_lossy().starts_with(".b.db.partial-"));
        assert!(partial_name(&dir.path().join("no/such/b.db")).is_err());
    }
}
