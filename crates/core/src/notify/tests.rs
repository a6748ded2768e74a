use serde_json::json;

use super::*;

fn item(kind: &str, session: &str, title: &str) -> Item {
    Item { kind: kind.into(), words: format!("{kind} words"), session: Some(session.into()), title: title.into(), attention: None }
}

#[test]
fn events_parse_sorted_without_repeats_and_refuse_unknown_words() {
    assert_eq!(parse_events("question, permission,question").unwrap(), vec![NoticeKind::Permission, NoticeKind::Question]);
    assert_eq!(parse_events("").unwrap(), vec![]);
    let e = parse_events("permission,bogus").unwrap_err();
    assert!(e.to_string().contains("\"bogus\"") && e.to_string().contains("spend_cap"), "{e}");
    for k in NoticeKind::ALL {
        assert_eq!(NoticeKind::parse(k.as_str()), Some(k));
    }
}

#[test]
fn windows_wrap_past_midnight() {
    let night = Window::parse("22:00-07:00").unwrap();
    assert_eq!(night, Window { start: 22 * 60, end: 7 * 60 });
    assert_eq!(night.to_string(), "22:00-07:00");
    assert!(night.contains(22 * 60) && night.contains(23 * 60 + 59) && night.contains(0) && night.contains(6 * 60 + 59));
    assert!(!night.contains(7 * 60) && !night.contains(12 * 60) && !night.contains(21 * 60 + 59));
    let lunch = Window::parse("12:00-13:30").unwrap();
    assert!(lunch.contains(12 * 60) && lunch.contains(13 * 60 + 29) && !lunch.contains(13 * 60 + 30) && !lunch.contains(11 * 60));
}

#[test]
fn windows_that_are_not_refuse_with_the_format() {
    for bad in ["", "22:00", "22:00-22:00", "24:00-07:00", "22:60-07:00", "10-12", "22:00-07:000"] {
        let e = Window::parse(bad).unwrap_err();
        assert!(e.to_string().contains("HH:MM-HH:MM"), "{bad}: {e}");
    }
}

#[test]
fn offsets_parse_in_the_usual_spellings() {
    assert_eq!(parse_offset("UTC"), Some(0));
    assert_eq!(parse_offset("Z"), Some(0));
    assert_eq!(parse_offset("+02:00"), Some(120));
    assert_eq!(parse_offset("UTC-05:30"), Some(-330));
    assert_eq!(parse_offset("-0530"), Some(-330));
    assert_eq!(parse_offset("UTC+2"), Some(120));
    assert_eq!(parse_offset("Europe/Paris"), None);
    assert_eq!(parse_offset(""), None);
    assert_eq!(parse_offset("+15:00"), None);
    assert_eq!(parse_offset("+"), None);
}

#[test]
fn cooldowns_take_units_and_a_ceiling() {
    assert_eq!(parse_cooldown("0").unwrap(), Duration::ZERO);
    assert_eq!(parse_cooldown("90s").unwrap(), Duration::from_secs(90));
    assert_eq!(parse_cooldown("5m").unwrap(), Duration::from_secs(300));
    assert_eq!(parse_cooldown("2h").unwrap(), Duration::from_secs(7200));
    assert_eq!(parse_cooldown("45").unwrap(), Duration::from_secs(45));
    for bad in ["", "m", "5d", "25h", "-1", "99999999999999999999h"] {
        assert!(parse_cooldown(bad).is_err(), "{bad}");
    }
}

#[test]
fn the_decision_checks_choice_then_quiet_then_cool_down() {
    let choices = Choices { quiet: Some(Window::parse("22:00-07:00").unwrap()), ..Choices::default() };
    let noon = 12 * 60;
    assert_eq!(decide(&choices, NoticeKind::Permission, noon, None), Verdict::Notify);
    assert_eq!(decide(&choices, NoticeKind::Idle, noon, None), Verdict::NotChosen, "idle is not chosen by default");
    assert_eq!(decide(&choices, NoticeKind::Permission, 23 * 60, None), Verdict::Quiet);
    assert_eq!(decide(&choices, NoticeKind::Permission, noon, Some(Duration::from_secs(60))), Verdict::CoolingDown);
    assert_eq!(decide(&choices, NoticeKind::Permission, noon, Some(DEFAULT_COOLDOWN)), Verdict::Notify);
    let no_cooldown = Choices { cooldown: Duration::ZERO, ..Choices::default() };
    assert_eq!(decide(&no_cooldown, NoticeKind::Failed, noon, Some(Duration::ZERO)), Verdict::Notify);
}

#[test]
fn events_map_to_notices_with_words_and_never_the_command() {
    let held = json!({ "kind": "permission", "tool": "Bash", "subject": "rm -rf /" });
    let (kind, words) = notice_for(EventKind::AttentionRaised, &held).unwrap();
    assert_eq!((kind, words.as_str()), (NoticeKind::Permission, "needs approval: Bash"));
    assert_eq!(notice_for(EventKind::AttentionRaised, &json!({ "kind": "idle" })).unwrap().0, NoticeKind::Idle);
    assert_eq!(notice_for(EventKind::AttentionRaised, &json!({ "kind": "probably_waiting" })).unwrap().0, NoticeKind::Idle);
    assert_eq!(notice_for(EventKind::QuestionAsked, &json!({ "text": "Which DB?" })).unwrap().1, "asks: Which DB?");
    let ended = |o: &str| notice_for(EventKind::SessionEnded, &json!({ "outcome": o })).map(|n| n.0);
    assert_eq!(ended("completed"), Some(NoticeKind::Finished));
    assert_eq!(ended("released"), Some(NoticeKind::Finished));
    assert_eq!(ended("incomplete"), Some(NoticeKind::Finished));
    assert_eq!(ended("failed"), Some(NoticeKind::Failed));
    assert_eq!(ended("lost"), Some(NoticeKind::Lost));
    assert_eq!(notice_for(EventKind::SessionConnectionLost, &json!({})).unwrap().0, NoticeKind::Lost);
    assert_eq!(notice_for(EventKind::SpendCapReached, &json!({})).unwrap().0, NoticeKind::SpendCap);
    assert_eq!(notice_for(EventKind::SessionStarted, &json!({})), None);
    assert_eq!(notice_for(EventKind::AttentionRaised, &json!({ "kind": "nonsense" })), None);
}

#[test]
fn long_words_are_clipped() {
    let long = "x".repeat(500);
    let words = notice_for(EventKind::QuestionAsked, &json!({ "text": long })).unwrap().1;
    assert_eq!(words.chars().count(), "asks: ".len() + MAX_WORDS + 1);
    assert!(words.ends_with('…'));
}

#[test]
fn one_item_is_pushed_as_itself() {
    let mut one = item("permission", "ses_1", "Fix the login");
    one.attention = Some("att_1".into());
    let p = compose(&[one]);
    assert_eq!((p.title.as_str(), p.body.as_str(), p.url.as_str()), ("Fix the login", "permission words", "/inbox"));
    assert_eq!((p.runs, p.attention.as_deref()), (1, Some("att_1")));
    let ended = compose(&[item("failed", "ses_2", "Bump deps")]);
    assert_eq!((ended.url.as_str(), ended.attention), ("/sessions/ses_2", None));
}

#[test]
fn ten_runs_waiting_make_one_push_that_counts_them() {
    let items: Vec<Item> = (0..10).map(|i| item("permission", &format!("ses_{i}"), &format!("run {i}"))).collect();
    let p = compose(&items);
    assert_eq!(p.title, "10 runs need you");
    assert_eq!((p.url.as_str(), p.runs, p.attention), ("/inbox", 10, None));
    assert_eq!(p.body.lines().count(), MAX_LISTED + 1);
    assert!(p.body.starts_with("run 9: ") && p.body.ends_with("and 7 more"), "{}", p.body);
}

#[test]
fn a_batch_about_one_run_or_with_endings_says_so() {
    let same = compose(&[item("permission", "ses_1", "a"), item("question", "ses_1", "a")]);
    assert_eq!((same.title.as_str(), same.runs), ("1 run needs you", 1));
    let mixed = compose(&[item("permission", "ses_1", "a"), item("failed", "ses_2", "b")]);
    assert_eq!(mixed.title, "2 runs have news");
}
