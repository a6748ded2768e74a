//! Dispatch of the parsed command line.

mod audit;
mod backup;
mod database;
mod device;
mod doctor;
mod inbox;
mod install;
mod manuals;
mod member;
mod notify;
mod pages;
mod session;
mod session_show;
mod skill;
mod spend;
mod task;
mod webhook;

use std::process::ExitCode;

use anyhow::Result;

use crate::args::{Cli, Command};

/// Runs the command; the exit code is what the process returns.
pub async fn run(cli: Cli) -> Result<ExitCode> {
    crate::client::set_trust(drover_tls::trust::Trust::new(cli.ca_cert.as_deref()));
    match cli.command {
        Command::Up(args) => {
            crate::init_logging("warn,drover_device=info");
            crate::up::up(args).await?;
        }
        Command::Server(args) => {
            crate::init_logging("warn");
            crate::up::server(args).await?;
        }
        Command::Migrate(args) => database::migrate(args, cli.json).await?,
        Command::Export(args) => database::export(args, cli.json).await?,
        Command::Import(args) => database::import(args, cli.json).await?,
        Command::Backup(args) => backup::backup(args, cli.json).await?,
        Command::Doctor(args) => return doctor::doctor(args, cli.json).await,
        Command::Device(cmd) => match cmd.command {
            Some(crate::args::DeviceSub::Install(args)) => install::install(args, cli.ca_cert, cli.json)?,
            Some(sub) => device::run(sub, cli.json).await?,
            None => {
                crate::init_logging("warn,drover_device=info");
                crate::up::device(cmd.run).await?;
            }
        },
        Command::Session(cmd) => return session::run(cmd, cli.json).await,
        Command::Task(cmd) => task::task(cmd, cli.json).await?,
        Command::Agent(cmd) => task::agent(cmd, cli.json).await?,
        Command::Repo(cmd) => task::repo(cmd, cli.json).await?,
        Command::Workflow(cmd) => task::workflow_cmd(cmd, cli.json).await?,
        Command::Webhook(cmd) => webhook::webhook(cmd, cli.json).await?,
        Command::Audit(cmd) => audit::audit(cmd).await?,
        Command::Login(args) => member::login(args, cli.json).await?,
        Command::Spend(args) => spend::spend(args, cli.json).await?,
        Command::Prices(cmd) => spend::prices(cmd, cli.json).await?,
        Command::Skill(cmd) => skill::skill(cmd, cli.json).await?,
        Command::Password(args) => member::password(args, cli.json).await?,
        Command::Token(cmd) => member::token(cmd, cli.json).await?,
        Command::Member(cmd) => member::member(cmd, cli.json).await?,
        Command::Sandbox(cmd) => task::sandbox(cmd, cli.json).await?,
        Command::Inbox(args) => inbox::inbox(args, cli.json).await?,
        Command::Notify(cmd) => notify::notify(cmd, cli.json).await?,
        Command::Approve(args) => inbox::approve(args, cli.json).await?,
        Command::Deny(args) => inbox::deny(args, cli.json).await?,
        Command::Hook(cmd) => inbox::hook(cmd).await,
        Command::Mcp => crate::mcp::serve().await?,
        Command::Completions(args) => manuals::completions(args)?,
        Command::Man(args) => manuals::man(args, cli.json)?,
        Command::Config(crate::args::ConfigCmd::Show { args }) => crate::config::show(&args, cli.json, cli.config.as_deref())?,
        Command::Ui => {
            let client = crate::client::Client::from_env()?;
            let link: drover_api::LoginLink = client.post("/api/v1/login-links", &serde_json::json!({})).await?;
            let url = format!("{}{}", client.url.trim_end_matches('/'), link.path);
            if cli.json {
                print_json(&serde_json::json!({ "url": url, "expires_at": link.expires_at }))?;
            } else {
                println!("{url}");
                eprintln!("(one-time sign-in link; it works once, until {})", link.expires_at);
            }
        }
        Command::ShimLauncher => unreachable!("handled before the runtime starts"),
    }
    Ok(ExitCode::SUCCESS)
}

/// Prints `value` as pretty JSON.
pub fn print_json<T: serde::Serialize>(value: &T) -> Result<()> {
    println!("{}", serde_json::to_string_pretty(value)?);
    Ok(())
}

/// Prints `value` as JSON with `--json`, else for a person as `text` does.
pub fn print_as<T: serde::Serialize>(json: bool, value: &T, text: impl FnOnce(&T)) -> Result<()> {
    if json {
        return print_json(value);
    }
    text(value);
    Ok(())
}
