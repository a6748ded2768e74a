//! `drover webhook …`: a workspace's webhook endpoints and their delivery logs.

use anyhow::Result;
use drover_api::{CreateWebhook, DeliveryView, WebhookSecretView, WebhookView};

use super::print_json;
use crate::args::WebhookCmd;
use crate::client::{seg, Client};
use crate::table;

fn print_secret(v: &WebhookSecretView) {
    println!("{}", v.webhook.id);
    println!("  url:    {}", table::sanitize(&v.webhook.url));
    println!("  events: {}", v.webhook.events.join(", "));
    println!("  secret: {}   (shown once: give it to the receiver to verify signatures)", v.secret);
}

/// Runs a webhook command.
pub async fn webhook(cmd: WebhookCmd, json: bool) -> Result<()> {
    let client = Client::from_env()?;
    match cmd {
        WebhookCmd::Add { url, events } => {
            let v: WebhookSecretView = client.post("/api/v1/webhooks", &CreateWebhook { url, events }).await?;
            if json {
                return print_json(&v);
            }
            print_secret(&v);
        }
        WebhookCmd::List => {
            let list: Vec<WebhookView> = client.get("/api/v1/webhooks").await?;
            if json {
                return print_json(&list);
            }
            print_webhooks(&list);
        }
        WebhookCmd::Remove { id } => {
            client.delete(&format!("/api/v1/webhooks/{}", seg(&id))).await?;
            if !json {
                println!("webhook {id} removed");
            }
        }
        WebhookCmd::Rotate { id } => {
            let v: WebhookSecretView = client.post(&format!("/api/v1/webhooks/{}/rotate", seg(&id)), &serde_json::json!({})).await?;
            if json {
                return print_json(&v);
            }
            print_secret(&v);
            println!("  the previous secret keeps signing for 24 hours");
        }
        WebhookCmd::Enable { id } => {
            let v: WebhookView = client.post(&format!("/api/v1/webhooks/{}/enable", seg(&id)), &serde_json::json!({})).await?;
            if json {
                return print_json(&v);
            }
            println!("webhook {} enabled", v.id);
        }
        WebhookCmd::Deliveries { id } => {
            let list: Vec<DeliveryView> = client.get(&format!("/api/v1/webhooks/{}/deliveries", seg(&id))).await?;
            if json {
                return print_json(&list);
            }
            print_deliveries(&list);
        }
        WebhookCmd::Redeliver { id, message } => {
            client
                .post_ok(&format!("/api/v1/webhooks/{}/deliveries/{}/redeliver", seg(&id), seg(&message)), &serde_json::json!({}))
                .await?;
            if !json {
                println!("{message} queued for redelivery");
            }
        }
    }
    Ok(())
}

/// Prints the webhook list with each one's state.
fn print_webhooks(list: &[WebhookView]) {
    let rows: Vec<Vec<String>> = list
        .iter()
        .map(|w| {
            let state = match &w.disabled_reason {
                Some(r) => format!("disabled: {}", table::sanitize(r)),
                None => "enabled".into(),
            };
            vec![w.id.to_string(), table::sanitize(&w.url), w.events.join(","), state, w.signing_secrets.to_string()]
        })
        .collect();
    table::print(&["WEBHOOK", "URL", "EVENTS", "STATE", "SECRETS"], &rows);
}

/// Prints a webhook's deliveries, newest first, with the last attempt's result.
fn print_deliveries(list: &[DeliveryView]) {
    let rows: Vec<Vec<String>> = list
        .iter()
        .map(|d| {
            let last = match (&d.last_status, &d.last_error) {
                (Some(s), _) => s.to_string(),
                (None, Some(e)) => table::sanitize(e),
                (None, None) => "—".into(),
            };
            vec![d.id.to_string(), d.event_type.clone(), d.state.clone(), d.attempts.to_string(), last, table::ago(Some(&d.created_at))]
        })
        .collect();
    table::print(&["MESSAGE", "EVENT", "STATE", "ATTEMPTS", "LAST", "QUEUED"], &rows);
}
