//! `drover notify`: a member's notification choices (events, quiet hours, cool-down),
//! the browsers registered for them, and a test push.

use anyhow::Result;
use drover_api::{NotificationChoices, PushSubscriptionView, PushTestResult};
use drover_core::notify::{parse_cooldown, parse_events, Window};

use super::print_json;
use crate::args::{NotifyCmd, NotifySetArgs};
use crate::client::Client;
use crate::table;

/// Runs `drover notify …`.
pub async fn notify(cmd: NotifyCmd, json: bool) -> Result<()> {
    let client = Client::from_env()?;
    match cmd {
        NotifyCmd::Show => show(&client, json).await,
        NotifyCmd::Set(args) => set(&client, args, json).await,
        NotifyCmd::Test => {
            let r: PushTestResult = client.post("/api/v1/push/test", &serde_json::json!({})).await?;
            if json {
                return print_json(&r);
            }
            println!("sent a test notification to {} browser(s)", r.queued);
            Ok(())
        }
    }
}

fn print_choices(c: &NotificationChoices) {
    let events = if c.events.is_empty() { "nothing".to_string() } else { c.events.join(", ") };
    println!("events:      {events}");
    println!("quiet hours: {} ({})", c.quiet.as_deref().unwrap_or("none"), c.zone);
    println!("cool-down:   {}s per run", c.cooldown_secs);
}

async fn show(client: &Client, json: bool) -> Result<()> {
    let c: NotificationChoices = client.get("/api/v1/me/notifications").await?;
    let subs: Vec<PushSubscriptionView> = client.get("/api/v1/push/subscriptions").await?;
    if json {
        return print_json(&serde_json::json!({ "choices": c, "browsers": subs }));
    }
    print_choices(&c);
    println!();
    if subs.is_empty() {
        println!("no browser is registered: open the web app's Settings and enable notifications there");
        return Ok(());
    }
    let rows: Vec<Vec<String>> = subs.iter().map(|s| vec![s.id.clone(), s.endpoint.clone(), s.created_at.clone()]).collect();
    table::print(&["BROWSER", "ENDPOINT", "SINCE"], &rows);
    Ok(())
}

async fn set(client: &Client, args: NotifySetArgs, json: bool) -> Result<()> {
    let mut c: NotificationChoices = client.get("/api/v1/me/notifications").await?;
    if let Some(events) = args.events {
        let list = if events.trim() == "none" { Vec::new() } else { parse_events(&events)? };
        c.events = list.iter().map(|k| k.as_str().to_string()).collect();
    }
    if let Some(quiet) = args.quiet {
        c.quiet = match quiet.trim() {
            "off" | "none" | "" => None,
            q => Some(Window::parse(q)?.to_string()),
        };
    }
    if let Some(tz) = args.tz {
        c.zone = tz.trim().to_string();
    }
    if let Some(cooldown) = args.cooldown {
        c.cooldown_secs = parse_cooldown(&cooldown)?.as_secs();
    }
    let c: NotificationChoices = client.put("/api/v1/me/notifications", &c).await?;
    if json {
        return print_json(&c);
    }
    print_choices(&c);
    Ok(())
}
