//! Getting told (Web Push): the server's VAPID key pair, members' browser subscriptions
//! and notification choices, the notices collecting per member (written in the
//! transaction that records the event, like webhook deliveries), and the push log the
//! sender works through. What to tell whom is decided by `drover_core::notify`.

use std::time::Duration;

use drover_core::notify::{self, Choices, Item, NoticeKind, Verdict, Window};
use drover_core::permissions::{allowed, Action, Caller, Role};
use drover_core::{MemberId, PushMessageId, PushSubscriptionId};
use sqlx::{AnyConnection, Row};

use crate::events::NewEvent;
use crate::{parse_id, parse_time, Result, StoreError};

/// A browser subscription a member registered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PushSubscriptionRow {
    /// Its id.
    pub id: PushSubscriptionId,
    /// The member it tells.
    pub member: MemberId,
    /// The push service's URL for this browser (RFC 8030).
    pub endpoint: String,
    /// The browser's P-256 public key, base64url (RFC 8291 `p256dh`).
    pub p256dh: String,
    /// The browser's authentication secret, base64url (RFC 8291 `auth`).
    pub auth: String,
    /// When it was registered.
    pub created_at: String,
}

/// A member's notification choices as stored: [`Choices`] plus the zone their quiet
/// hours are in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotifyChoices {
    /// The decision's part.
    pub choices: Choices,
    /// An IANA zone name (`Europe/Paris`) or a UTC offset (`+02:00`, `UTC`).
    pub zone: String,
}

impl Default for NotifyChoices {
    fn default() -> Self {
        NotifyChoices { choices: Choices::default(), zone: "UTC".into() }
    }
}

/// A push due now, with the subscription it goes to.
#[derive(Debug, Clone)]
pub struct DuePush {
    /// Its id.
    pub id: PushMessageId,
    /// Where it goes.
    pub subscription: PushSubscriptionRow,
    /// The JSON the service worker reads (encrypted at each attempt).
    pub payload: String,
    /// Attempts so far.
    pub attempts: u32,
}

/// Whether `zone` is a time zone the quiet hours can be in.
pub fn valid_zone(zone: &str) -> bool {
    notify::parse_offset(zone).is_some() || zone.parse::<chrono_tz::Tz>().is_ok()
}

/// The minute of the day at `at` in `zone` (UTC when the zone is unknown).
pub fn local_minute(zone: &str, at: chrono::DateTime<chrono::Utc>) -> u16 {
    use chrono::Timelike;
    let (h, m) = match (notify::parse_offset(zone), zone.parse::<chrono_tz::Tz>()) {
        (Some(off), _) => {
            let t = at + chrono::Duration::minutes(off.into());
            (t.hour(), t.minute())
        }
        (None, Ok(tz)) => {
            let t = at.with_timezone(&tz);
            (t.hour(), t.minute())
        }
        (None, Err(_)) => (at.hour(), at.minute()),
    };
    (h * 60 + m) as u16
}

fn subscription_row(r: &sqlx::any::AnyRow) -> Result<PushSubscriptionRow> {
    Ok(PushSubscriptionRow {
        id: parse_id(r.get("id"))?,
        member: parse_id(r.get("member_id"))?,
        endpoint: r.get("endpoint"),
        p256dh: r.get("p256dh"),
        auth: r.get("auth"),
        created_at: r.get("created_at"),
    })
}

fn corrupt(e: impl std::fmt::Display) -> StoreError {
    StoreError::Corrupt(e.to_string())
}

fn choices_row(r: &sqlx::any::AnyRow) -> Result<NotifyChoices> {
    let events: Vec<String> = serde_json::from_str(&r.get::<String, _>("events")).map_err(corrupt)?;
    let quiet: Option<String> = r.get("quiet");
    Ok(NotifyChoices {
        choices: Choices {
            events: events.iter().filter_map(|e| NoticeKind::parse(e)).collect(),
            quiet: quiet.map(|q| Window::parse(&q)).transpose().map_err(corrupt)?,
            cooldown: Duration::from_secs(r.get::<i64, _>("cooldown_secs").max(0) as u64),
        },
        zone: r.get("zone"),
    })
}

/// Queues the notices event `e` makes for the members of its workspace with a browser
/// subscribed, inside the transaction that records it: each member's choices decide,
/// and a notice joins the member's open batch (or opens one).
pub(crate) async fn fan_out(conn: &mut AnyConnection, e: &NewEvent, at: &str) -> Result<()> {
    let Some((kind, words)) = notify::notice_for(e.kind, &e.detail) else {
        return Ok(());
    };
    let members = sqlx::query(
        "SELECT DISTINCT m.id, m.role FROM push_subscriptions p JOIN members m ON m.id = p.member_id
         WHERE p.workspace_id = $1 AND m.removed_at IS NULL ORDER BY m.id",
    )
    .bind(e.workspace.to_string())
    .fetch_all(&mut *conn)
    .await?;
    if members.is_empty() {
        return Ok(());
    }
    let run = about(conn, e).await?;
    let when = parse_time(at).unwrap_or_else(chrono::Utc::now);
    for m in members {
        let member: String = m.get("id");
        let role = Role::parse(&m.get::<String, _>("role")).unwrap_or(Role::Member);
        let choices = choices_in(conn, &member).await?;
        let since = heard_since(conn, &member, e, when).await?;
        if notify::decide(&choices.choices, kind, local_minute(&choices.zone, when), since) != Verdict::Notify {
            continue;
        }
        let may_decide = kind == NoticeKind::Permission
            && allowed(
                Caller::Member { role, operates_agent: run.operator.as_deref() == Some(member.as_str()), pinned_assignee: false },
                Action::DropIn,
            );
        let attention = e.detail.get("attention").and_then(|a| a.as_str()).filter(|_| may_decide).map(String::from);
        let item = Item {
            kind: kind.as_str().into(),
            words: words.clone(),
            session: e.session.map(|s| s.to_string()),
            title: run.title.clone(),
            attention,
        };
        add_to_batch(conn, &member, item, at).await?;
    }
    Ok(())
}

/// What an event concerns, as a notice names it.
struct About {
    title: String,
    operator: Option<String>,
}

async fn about(conn: &mut AnyConnection, e: &NewEvent) -> Result<About> {
    let r = sqlx::query(
        "SELECT (SELECT b.title FROM sessions s JOIN sandboxes b ON b.id = s.sandbox_id WHERE s.id = $1) AS run_title,
                (SELECT s.operator_id FROM sessions s WHERE s.id = $1) AS operator,
                (SELECT t.title FROM tasks t WHERE t.id = COALESCE($2, (SELECT task_id FROM sessions WHERE id = $1))) AS task_title",
    )
    .bind(e.session.map(|s| s.to_string()))
    .bind(e.task.map(|t| t.to_string()))
    .fetch_one(&mut *conn)
    .await?;
    let title: Option<String> = r.get::<Option<String>, _>("task_title").or(r.get("run_title"));
    Ok(About { title: notify::clip(&title.unwrap_or_default()), operator: r.get("operator") })
}

async fn choices_in(conn: &mut AnyConnection, member: &str) -> Result<NotifyChoices> {
    let r = sqlx::query("SELECT * FROM notification_choices WHERE member_id = $1").bind(member).fetch_optional(&mut *conn).await?;
    r.as_ref().map(choices_row).transpose().map(Option::unwrap_or_default)
}

/// How long ago `member` was told about `e`'s run (None: never, or no run); records
/// now as the last time, since a notice is about to be queued if the decision allows.
async fn heard_since(
    conn: &mut AnyConnection,
    member: &str,
    e: &NewEvent,
    when: chrono::DateTime<chrono::Utc>,
) -> Result<Option<Duration>> {
    let Some(session) = e.session else {
        return Ok(None);
    };
    let r = sqlx::query("SELECT at FROM push_heard WHERE member_id = $1 AND session_id = $2")
        .bind(member)
        .bind(session.to_string())
        .fetch_optional(&mut *conn)
        .await?;
    Ok(r.and_then(|r| parse_time(&r.get::<String, _>("at"))).map(|t| (when - t).to_std().unwrap_or_default()))
}

async fn add_to_batch(conn: &mut AnyConnection, member: &str, item: Item, at: &str) -> Result<()> {
    if let Some(session) = &item.session {
        sqlx::query(
            "INSERT INTO push_heard (member_id, session_id, at) VALUES ($1, $2, $3)
             ON CONFLICT (member_id, session_id) DO UPDATE SET at = excluded.at",
        )
        .bind(member)
        .bind(session)
        .bind(at)
        .execute(&mut *conn)
        .await?;
    }
    let open = sqlx::query("SELECT id, items FROM push_batches WHERE member_id = $1 AND sent_at IS NULL")
        .bind(member)
        .fetch_optional(&mut *conn)
        .await?;
    match open {
        Some(r) => {
            let mut items: Vec<Item> = serde_json::from_str(&r.get::<String, _>("items")).map_err(corrupt)?;
            items.push(item);
            sqlx::query("UPDATE push_batches SET items = $1 WHERE id = $2")
                .bind(serde_json::to_string(&items).expect("serialises"))
                .bind(r.get::<String, _>("id"))
                .execute(&mut *conn)
                .await?;
        }
        None => {
            sqlx::query("INSERT INTO push_batches (id, member_id, items, created_at) VALUES ($1, $2, $3, $4)")
                .bind(PushMessageId::new().to_string())
                .bind(member)
                .bind(serde_json::to_string(&[item]).expect("serialises"))
                .bind(at)
                .execute(&mut *conn)
                .await?;
        }
    }
    Ok(())
}

/// Queues `payload` to each of `member`'s subscriptions; returns how many.
async fn queue(conn: &mut AnyConnection, member: &str, payload: &str, at: &str) -> Result<u64> {
    let subs = sqlx::query("SELECT id FROM push_subscriptions WHERE member_id = $1").bind(member).fetch_all(&mut *conn).await?;
    for s in &subs {
        sqlx::query(
            "INSERT INTO push_deliveries (id, subscription_id, payload, state, attempts, next_attempt_at, created_at)
             VALUES ($1, $2, $3, 'pending', 0, $4, $4)",
        )
        .bind(PushMessageId::new().to_string())
        .bind(s.get::<String, _>("id"))
        .bind(payload)
        .bind(at)
        .execute(&mut *conn)
        .await?;
    }
    Ok(subs.len() as u64)
}

mod methods;
