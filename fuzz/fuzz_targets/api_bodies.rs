//! The HTTP API's request bodies: arbitrary bytes through `serde_json::from_slice` into
//! every request type of `drover_api`, then through the checks the server
//! applies to each (from `drover_core`), as its handlers call them. Nothing may panic,
//! and what the checks accept must hold what they promise.

#![no_main]

use std::time::Duration;

use drover_core::harness::{opening, stage_prompt, Harness, Route, StagePlace};
use drover_core::names::{
    check_device_name, check_member_name, check_password, check_size, check_title, device_name_from_host, MAX_PASSWORD_BYTES,
};
use drover_core::permissions::Role;
use drover_core::task::{check_workflow, merges_by_default, stage_label, MAX_STAGES};
use drover_core::webhook::WebhookEvent;
use drover_core::{branch, input, TaskId};
use drover_api::{
    AcceptInvite, AddDevice, AddRepo, CreateAgent, CreateInvite, CreateTask, CreateToken, CreateWebhook, Login, SendInput, SetPassword,
    SetRole, StartSession, TextBody, WorkflowView,
};
use libfuzzer_sys::fuzz_target;
use serde::de::DeserializeOwned;

fn parse<T: DeserializeOwned>(data: &[u8]) -> Option<T> {
    serde_json::from_slice(data).ok()
}

/// The server's token label rule (`api::members::check_label`).
fn label_ok(label: &str) -> bool {
    !(label.trim().is_empty() || label.chars().count() > 100 || label.chars().any(char::is_control))
}

/// The server's rule for comments, notes and answers (`api::tasks::check_text`).
fn text_ok(text: &str, max: usize) -> bool {
    !text.trim().is_empty() && text.len() <= max && !text.contains('\0')
}

fn name(name: &str) {
    let device = check_device_name(name);
    assert_eq!(device.is_ok(), check_member_name(name).is_ok(), "device and member names follow one rule");
    if device.is_ok() {
        assert!((1..=63).contains(&name.len()) && name.is_ascii());
    }
    // A host name always becomes a valid device name.
    let derived = device_name_from_host(name);
    assert!(check_device_name(&derived).is_ok(), "{name:?} -> {derived:?}");
}

fn title(title: &str) {
    if check_title(title).is_ok() {
        assert!(title.chars().count() <= 200 && !title.chars().any(char::is_control));
    }
    // Branch and worktree names are safe whatever the title holds.
    let id = TaskId::new();
    let slug = branch::slug(title);
    assert!(!slug.is_empty() && slug.len() <= 40 && slug.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-'));
    let b = branch::branch_name(id, title);
    assert!(branch::is_valid_branch(&b), "{title:?} -> {b:?}");
    let dir = branch::worktree_dir(id, title);
    assert!(!dir.contains('/') && !dir.starts_with('.'), "{dir:?}");
}

fn text(text: &str) {
    match input::validate(text) {
        Ok(()) => {
            for paste in [false, true] {
                let bytes = input::encode(text, paste).expect("valid text encodes");
                assert!(bytes.ends_with(input::ENTER));
                assert_eq!(bytes.starts_with(input::PASTE_START), paste);
            }
        }
        Err(_) => assert!(input::encode(text, false).is_err()),
    }
}

fn workflow(stages: &[String]) {
    if check_workflow(stages).is_ok() {
        assert!(!stages.is_empty() && stages.len() <= MAX_STAGES);
    }
    for s in stages {
        let _ = stage_label(s);
        let _ = merges_by_default(s);
    }
}

fuzz_target!(|data: &[u8]| {
    if let Some(b) = parse::<Login>(data) {
        let _ = b.name.len() <= 63 && b.password.len() <= MAX_PASSWORD_BYTES;
        name(&b.name);
        if let Some(label) = &b.label {
            let _ = label_ok(label);
        }
    }
    if let Some(b) = parse::<AcceptInvite>(data) {
        name(&b.name);
        if check_password(&b.password).is_ok() {
            assert!(b.password.len() <= MAX_PASSWORD_BYTES && b.password.chars().count() >= 10);
        }
    }
    if let Some(b) = parse::<SetPassword>(data) {
        let _ = check_password(&b.password);
        let _ = b.current.as_deref().map(check_password);
    }
    if let Some(b) = parse::<CreateToken>(data) {
        let _ = label_ok(&b.label);
    }
    if let Some(b) = parse::<SetRole>(data) {
        if let Some(r) = Role::parse(&b.role) {
            assert_eq!(Role::parse(r.as_str()), Some(r));
        }
    }
    if let Some(b) = parse::<CreateInvite>(data) {
        let _ = Role::parse(b.role.as_deref().unwrap_or("member"));
        let _ = (1..=720).contains(&b.hours.unwrap_or(72));
    }
    if let Some(b) = parse::<StartSession>(data) {
        let _ = b.command.iter().any(|a| a.contains('\0'));
        title(b.title.as_deref().unwrap_or_default());
        if let Ok((cols, rows)) = check_size(b.cols.unwrap_or(120), b.rows.unwrap_or(40)) {
            assert!((2..=1000).contains(&cols) && (1..=500).contains(&rows));
        }
        name(&b.device);
    }
    if let Some(b) = parse::<SendInput>(data) {
        text(&b.text);
        // `ask`'s timeout and stillness, as the handler computes them.
        let timeout = match b.timeout_secs {
            Some(s) if s.is_finite() && s > 0.0 && s <= 3600.0 => Some(Duration::from_secs_f64(s)),
            Some(_) => None,
            None => Some(Duration::from_secs(60)),
        };
        if let Some(timeout) = timeout {
            let _ = b.still_ms.map(Duration::from_millis).unwrap_or(Duration::from_millis(1500)).min(timeout);
        }
    }
    if let Some(b) = parse::<CreateTask>(data) {
        title(&b.title);
        let _ = text_ok(&b.title, 500);
        let kind = b.kind.unwrap_or_else(|| "story".into());
        let _ = (1..=32).contains(&kind.len()) && kind.bytes().all(|c| c.is_ascii_lowercase() || c == b'-');
        name(&b.repo);
        if let Some(stages) = &b.workflow {
            let names: Vec<String> = stages.iter().map(|s| s.stage.clone()).collect();
            workflow(&names);
            for (i, s) in stages.iter().enumerate() {
                let place = StagePlace { is_last: i + 1 == stages.len(), merges: s.merge.unwrap_or_else(|| merges_by_default(&s.stage)) };
                let _ = stage_prompt(&b.title, &b.body, &s.stage, place);
            }
        }
    }
    if let Some(b) = parse::<WorkflowView>(data) {
        let names: Vec<String> = b.stages.iter().map(|s| s.stage.clone()).collect();
        workflow(&names);
    }
    if let Some(b) = parse::<CreateAgent>(data) {
        name(&b.name);
        if let Ok(h) = Harness::parse(&b.harness) {
            assert_eq!(Harness::parse(h.as_str()), Ok(h));
            let route = Route { model: b.model, provider: b.provider, account: b.account, effort: b.effort };
            // The handler caps the template (64 arguments of at most 4096 bytes); keep the
            // fuzzer's inputs small the same way.
            if b.template.len() <= 64 && b.template.iter().all(|a| a.len() <= 4096 && !a.contains('\0')) {
                for lost in [false, true] {
                    let _ = opening(h, "do the thing", &route, &b.template, lost);
                }
            }
        }
    }
    if let Some(b) = parse::<CreateWebhook>(data) {
        for e in &b.events {
            if let Some(k) = WebhookEvent::parse(e) {
                assert_eq!(WebhookEvent::parse(k.as_str()), Some(k));
            }
        }
    }
    if let Some(b) = parse::<AddDevice>(data) {
        name(&b.name);
        let _ = (1..=1000).contains(&b.slots.unwrap_or(4));
    }
    if let Some(b) = parse::<AddRepo>(data) {
        name(&b.name);
        if let Some(base) = &b.base {
            if branch::is_valid_branch(base) {
                assert!(!base.is_empty() && base.len() <= 200 && !base.contains(".."));
            }
        }
    }
    if let Some(b) = parse::<TextBody>(data) {
        let _ = text_ok(&b.text, 16 * 1024);
        text(&b.text);
    }
});
