//! `drover device list|add|revoke` (`install` is in `install.rs`).

use anyhow::Result;
use drover_api::{AddDevice, DeviceEnrollment, DeviceView};

use super::print_json;
use crate::args::DeviceSub;
use crate::client::Client;
use crate::table;

/// Runs a device management command.
pub async fn run(sub: DeviceSub, json: bool) -> Result<()> {
    let client = Client::from_env()?;
    match sub {
        DeviceSub::List => {
            let devices: Vec<DeviceView> = client.get("/api/v1/devices").await?;
            if json {
                return print_json(&devices);
            }
            let rows: Vec<Vec<String>> = devices
                .iter()
                .map(|d| {
                    vec![
                        d.name.clone(),
                        if d.revoked_at.is_some() {
                            "revoked".into()
                        } else if d.connected {
                            "connected".into()
                        } else {
                            "offline".into()
                        },
                        d.slots.to_string(),
                        d.live_sessions.to_string(),
                        table::ago(d.last_contact_at.as_deref()),
                        d.sandbox.as_ref().map(|o| o.describe()).unwrap_or_else(|| "unknown (an older daemon)".into()),
                    ]
                })
                .collect();
            table::print(&["NAME", "STATUS", "SLOTS", "LIVE", "LAST CONTACT", "SANDBOX"], &rows);
        }
        DeviceSub::Revoke { name } => {
            let d: DeviceView =
                client.post(&format!("/api/v1/devices/{}/revoke", crate::client::seg(&name)), &serde_json::json!({})).await?;
            if json {
                return print_json(&d);
            }
            println!("device `{}` revoked: it is refused from now on; its {} live session(s) will be marked lost", d.name, d.live_sessions);
        }
        DeviceSub::Install(_) => unreachable!("dispatched by commands::run: it needs no server"),
        DeviceSub::Add { name, slots } => {
            let e: DeviceEnrollment = client.post("/api/v1/devices", &AddDevice { name, slots: Some(slots) }).await?;
            if json {
                return print_json(&e);
            }
            println!(
                "Registered device `{}` ({} slots). Its one-time enrollment token (until {}):",
                e.device.name, e.device.slots, e.expires_at
            );
            println!("  {}", e.enrollment_token);
            println!("On that machine run (the daemon trades the token for its own credential on first connect):");
            println!("  drover device --server {} --token {} --name {}", client.url, e.enrollment_token, e.device.name);
        }
    }
    Ok(())
}
