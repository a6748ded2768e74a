//! `drover login`, `drover password`, `drover token …` and `drover member …`: signing
//! in, passwords, personal API tokens, and the workspace's members and roles.

use std::io::{BufRead, IsTerminal, Write};

use anyhow::{bail, Context, Result};
use drover_api::{CreateInvite, CreateToken, IssuedToken, Login, MemberView, SetPassword, SetRole, TokenView};

use super::print_json;
use crate::args::{LoginArgs, MemberCmd, TokenCmd};
use crate::client::{seg, Client};
use crate::home::{self, ClientConfig};
use crate::table;

/// Reads one secret line: prompted without echo on a terminal, else from standard input.
fn read_secret(prompt: &str, from_stdin: bool) -> Result<String> {
    let stdin = std::io::stdin();
    let tty = !from_stdin && stdin.is_terminal();
    if !tty && !from_stdin {
        bail!("no terminal to ask for the password on: pass --password-stdin and pipe it in");
    }
    let saved = if tty {
        eprint!("{prompt}");
        std::io::stderr().flush().ok();
        let saved = nix::sys::termios::tcgetattr(&stdin).context("reading the terminal's settings")?;
        let mut quiet = saved.clone();
        quiet.local_flags.remove(nix::sys::termios::LocalFlags::ECHO);
        nix::sys::termios::tcsetattr(&stdin, nix::sys::termios::SetArg::TCSANOW, &quiet).context("turning echo off")?;
        Some(saved)
    } else {
        None
    };
    let mut line = String::new();
    let read = stdin.lock().read_line(&mut line);
    if let Some(saved) = saved {
        let _ = nix::sys::termios::tcsetattr(&stdin, nix::sys::termios::SetArg::TCSANOW, &saved);
        eprintln!();
    }
    read.context("reading the password")?;
    let secret = line.trim_end_matches(['\n', '\r']).to_string();
    if secret.is_empty() {
        bail!("no password given");
    }
    Ok(secret)
}

/// `drover login`: trades a name and password for a personal token, saved (0600) in
/// `$DROVER_HOME/client.json` so later commands use it.
pub async fn login(args: LoginArgs, json: bool) -> Result<()> {
    let url = args.url.or_else(Client::configured_url).unwrap_or_else(|| "http://127.0.0.1:7070".into());
    let client = Client::anonymous(&url)?;
    let password = read_secret("Password: ", args.password_stdin)?;
    let label = args.label.unwrap_or_else(|| format!("drover login on {}", crate::up::hostname()));
    let issued: IssuedToken = client.post("/api/v1/login/token", &Login { name: args.name, password, label: Some(label) }).await?;
    let home = home::home()?;
    std::fs::create_dir_all(&home).with_context(|| format!("creating {}", home.display()))?;
    let path = home.join("client.json");
    home::write_private_json(&path, &ClientConfig { url: client.url.clone(), token: issued.token.clone() })?;
    if json {
        return print_json(&serde_json::json!({ "member": issued.member, "token": issued.info, "saved_to": path }));
    }
    println!("signed in to {} as {} ({})", client.url, issued.member.name, issued.member.role);
    println!("  token {} saved to {}   (`drover token revoke {}` ends it)", issued.info.id, path.display(), issued.info.id);
    Ok(())
}

/// `drover password`: sets or changes the caller's password.
pub async fn password(args: crate::args::PasswordArgs, json: bool) -> Result<()> {
    let client = Client::from_env()?;
    let stdin_piped = !std::io::stdin().is_terminal();
    let me: drover_api::MemberView = {
        let me: drover_api::MeView = client.get("/api/v1/me").await?;
        let members: Vec<MemberView> = client.get("/api/v1/members").await?;
        members.into_iter().find(|m| m.name == me.name).context("you are not in the member list")?
    };
    let current = if me.has_password { Some(read_secret("Current password: ", stdin_piped)?) } else { None };
    let password = read_secret("New password: ", stdin_piped)?;
    if !stdin_piped && read_secret("New password again: ", false)? != password {
        bail!("the two passwords differ; nothing changed");
    }
    client.put_ok("/api/v1/me/password", &SetPassword { current, password, revoke_tokens: args.revoke_tokens }).await?;
    if json {
        return print_json(&serde_json::json!({ "member": me.name, "password_set": true, "tokens_revoked": args.revoke_tokens }));
    }
    println!("password set for {}", me.name);
    if args.revoke_tokens {
        println!("  every other API token of yours is revoked; this one stays");
    }
    Ok(())
}

fn print_tokens(list: &[TokenView]) {
    let rows: Vec<Vec<String>> = list
        .iter()
        .map(|t| {
            let state = match &t.revoked_at {
                Some(at) => format!("revoked {}", table::ago(Some(at))),
                None => "active".into(),
            };
            vec![t.id.to_string(), t.label.clone(), table::ago(Some(&t.created_at)), table::ago(t.last_used_at.as_deref()), state]
        })
        .collect();
    table::print(&["TOKEN", "LABEL", "ISSUED", "LAST USED", "STATE"], &rows);
}

/// Runs a token command.
pub async fn token(cmd: TokenCmd, json: bool) -> Result<()> {
    let client = Client::from_env()?;
    match cmd {
        TokenCmd::List { member } => {
            let path = match &member {
                Some(name) => format!("/api/v1/members/{}/tokens", seg(name)),
                None => "/api/v1/tokens".into(),
            };
            let list: Vec<TokenView> = client.get(&path).await?;
            if json {
                return print_json(&list);
            }
            print_tokens(&list);
        }
        TokenCmd::Create { label } => {
            let issued: IssuedToken = client.post("/api/v1/tokens", &CreateToken { label }).await?;
            if json {
                return print_json(&issued);
            }
            println!("{}", issued.token);
            eprintln!(
                "(token {} for {}; shown once: `drover token revoke {}` ends it)",
                issued.info.id, issued.member.name, issued.info.id
            );
        }
        TokenCmd::Revoke { id } => {
            let t: TokenView = client.post(&format!("/api/v1/tokens/{}/revoke", seg(&id)), &serde_json::json!({})).await?;
            if json {
                return print_json(&t);
            }
            println!("token {} ({}) revoked", t.id, table::sanitize(&t.label));
        }
    }
    Ok(())
}

/// Runs a member command.
pub async fn member(cmd: MemberCmd, json: bool) -> Result<()> {
    let client = Client::from_env()?;
    match cmd {
        MemberCmd::List => {
            let list: Vec<MemberView> = client.get("/api/v1/members").await?;
            if json {
                return print_json(&list);
            }
            let rows: Vec<Vec<String>> = list
                .iter()
                .map(|m| {
                    vec![m.name.clone(), m.role.clone(), table::ago(Some(&m.created_at)), if m.has_password { "yes" } else { "no" }.into()]
                })
                .collect();
            table::print(&["MEMBER", "ROLE", "JOINED", "PASSWORD"], &rows);
        }
        MemberCmd::Invite { role, hours } => {
            let v: drover_api::InviteView = client.post("/api/v1/invites", &CreateInvite { role: Some(role), hours: Some(hours) }).await?;
            let url = format!("{}{}", client.url, v.path);
            if json {
                return print_json(
                    &serde_json::json!({ "id": v.id, "role": v.role, "url": url, "code": v.code, "expires_at": v.expires_at }),
                );
            }
            println!("{url}");
            eprintln!("(invitation as {}, works once until {}: the invitee opens it, picks a name and a password)", v.role, v.expires_at);
        }
        MemberCmd::Invites => {
            let list: Vec<drover_api::PendingInviteView> = client.get("/api/v1/invites").await?;
            if json {
                return print_json(&list);
            }
            let rows: Vec<Vec<String>> = list
                .iter()
                .map(|i| {
                    vec![i.id.to_string(), i.role.clone(), i.created_by.clone(), table::ago(Some(&i.created_at)), i.expires_at.clone()]
                })
                .collect();
            table::print(&["INVITE", "ROLE", "BY", "SENT", "EXPIRES"], &rows);
        }
        MemberCmd::Uninvite { id } => {
            client.post_ok(&format!("/api/v1/invites/{}/revoke", seg(&id)), &serde_json::json!({})).await?;
            if !json {
                println!("invitation {id} withdrawn");
            } else {
                print_json(&serde_json::json!({ "id": id, "withdrawn": true }))?;
            }
        }
        MemberCmd::Role { name, role } => {
            let m: MemberView = client.put(&format!("/api/v1/members/{}/role", seg(&name)), &SetRole { role }).await?;
            if json {
                return print_json(&m);
            }
            println!("{} is now {}", m.name, m.role);
        }
        MemberCmd::Remove { name } => {
            let m: MemberView = client.delete_json(&format!("/api/v1/members/{}", seg(&name))).await?;
            if json {
                return print_json(&m);
            }
            println!("{} removed: their tokens and sign-ins no longer work; their sessions and history stay", m.name);
        }
    }
    Ok(())
}
