//! `drover migrate`, `export` and `import`: maintenance of the database itself, run
//! beside (migrate) or instead of (export, import) the servers.

use std::io::{BufReader, BufWriter};

use anyhow::{bail, Context, Result};
use drover_store::{Database, Store};

use crate::args::{DatabaseArgs, ExportArgs, ImportArgs};
use crate::commands::print_json;
use crate::home;

/// The database named, or the default SQLite file in `$DROVER_HOME`.
pub(super) fn database(args: &DatabaseArgs) -> Result<Database> {
    match &args.database {
        Some(d) => Ok(d.clone()),
        None => Ok(Database::Sqlite(home::home()?.join("drover.db"))),
    }
}

/// Opens (creating and migrating) the database.
async fn open(database: &Database) -> Result<Store> {
    Store::open(database).await.with_context(|| format!("opening the database {}", database.display()))
}

/// `drover migrate`.
pub async fn migrate(args: DatabaseArgs, json: bool) -> Result<()> {
    let database = database(&args)?;
    let store = open(&database).await?;
    let version = store.schema_version().await?;
    store.close().await;
    if json {
        print_json(&serde_json::json!({ "database": database.display(), "schema_version": version }))?;
    } else {
        println!("{} is up to date (schema version {version})", database.display());
    }
    Ok(())
}

/// `drover export`.
pub async fn export(args: ExportArgs, json: bool) -> Result<()> {
    let database = database(&args.db)?;
    if let Database::Sqlite(path) = &database {
        if !path.exists() {
            bail!("there is no database at {} (pass --database, or set DROVER_HOME)", path.display());
        }
    }
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&args.out)
        .with_context(|| format!("creating {} (it must not exist yet)", args.out.display()))?;
    let store = open(&database).await?;
    let mut out = BufWriter::new(file);
    let moved = match store.export(&mut out).await {
        Ok(m) => m,
        Err(e) => {
            // No half-written export is left to be imported by mistake.
            drop(out);
            let _ = std::fs::remove_file(&args.out);
            return Err(e).context("exporting");
        }
    };
    out.into_inner().map_err(|e| e.into_error()).and_then(|f| f.sync_all()).context("writing the export")?;
    store.close().await;
    if json {
        print_json(&serde_json::json!({ "file": args.out, "rows": moved.rows, "output_bytes": moved.output_bytes }))?;
    } else {
        println!("exported {} rows and {} bytes of session output to {}", moved.rows, moved.output_bytes, args.out.display());
    }
    Ok(())
}

/// `drover import`.
pub async fn import(args: ImportArgs, json: bool) -> Result<()> {
    let database = database(&args.db)?;
    std::fs::metadata(&args.file).with_context(|| format!("reading {}", args.file.display()))?;
    let store = open(&database).await?;
    let file = args.file.clone();
    let moved = store.import(|| std::fs::File::open(&file).map(BufReader::new)).await.context("importing")?;
    store.close().await;
    if json {
        print_json(&serde_json::json!({ "database": database.display(), "rows": moved.rows, "output_bytes": moved.output_bytes }))?;
    } else {
        println!("imported {} rows and {} bytes of session output into {}", moved.rows, moved.output_bytes, database.display());
    }
    Ok(())
}
