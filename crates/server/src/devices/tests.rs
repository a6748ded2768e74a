//! The route to a device (its link here, or relayed through another replica) and the
//! requests over it, with a fake relay.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::ws::Message;
use drover_core::{DeviceId, SessionId};
use drover_protocol::device::ServerMessage;
use tokio::sync::mpsc;

use super::*;

/// A relay that hands every mail to the test, and posts it or fails as told.
struct FakeRelay {
    mail: mpsc::UnboundedSender<(String, Mail)>,
    accepts: bool,
}

impl Relay for FakeRelay {
    fn post<'a>(&'a self, replica: &'a str, mail: Mail) -> Pin<Box<dyn Future<Output = bool> + Send + 'a>> {
        let _ = self.mail.send((replica.to_string(), mail));
        Box::pin(async move { self.accepts })
    }
}

fn relayed(accepts: bool) -> (Arc<Devices>, mpsc::UnboundedReceiver<(String, Mail)>) {
    let devices = Arc::new(Devices::default());
    let (tx, rx) = mpsc::unbounded_channel();
    devices.relay_through(Arc::new(FakeRelay { mail: tx, accepts }));
    (devices, rx)
}

/// `id` linked to this server; its link's receiving end.
fn link_here(devices: &Devices, id: DeviceId) -> mpsc::Receiver<Message> {
    let (tx, rx) = mpsc::channel(8);
    devices.connect(id, tx);
    rx
}

fn linked_elsewhere(devices: &Devices, id: DeviceId, replica: &str) {
    devices.set_remote([(id, replica.to_string())].into());
}

#[test]
fn a_link_here_comes_first_then_the_replica_its_link_is_on() {
    let (devices, _mail) = relayed(true);
    let id = DeviceId::new();
    assert!(devices.route(id).is_none(), "not connected anywhere");
    linked_elsewhere(&devices, id, "rep_b");
    assert_eq!(devices.route(id).and_then(|r| r.replica().map(str::to_string)).as_deref(), Some("rep_b"));
    assert!(devices.local(id).is_none(), "a local route only for a link here");
    let epoch = {
        let (tx, _rx) = mpsc::channel(1);
        devices.connect(id, tx)
    };
    assert!(matches!(devices.route(id), Some(DeviceRoute::Local(_))), "its link here wins over an older record elsewhere");
    assert_eq!(devices.remote_replica(id), None);
    devices.disconnect(id, epoch);
    assert_eq!(devices.remote_replica(id).as_deref(), Some("rep_b"));
}

#[test]
fn without_a_relay_only_links_here_count() {
    let devices = Devices::default();
    let id = DeviceId::new();
    linked_elsewhere(&devices, id, "rep_b");
    assert!(!devices.is_connected(id), "a single server reaches no other replica");
}

#[tokio::test]
async fn a_message_goes_over_the_link_here_without_mail() {
    let (devices, mut mail) = relayed(true);
    let id = DeviceId::new();
    let mut link = link_here(&devices, id);
    let session = SessionId::new();
    devices.send(id, &ServerMessage::Release { session }).await.unwrap();
    devices.send_input(id, session, b"ls\r".to_vec()).await.unwrap();
    assert!(matches!(link.recv().await, Some(Message::Text(_))));
    assert!(matches!(link.recv().await, Some(Message::Binary(_))));
    assert!(mail.try_recv().is_err(), "nothing relayed");
}

#[tokio::test]
async fn input_for_a_device_elsewhere_is_posted_to_its_replica() {
    let (devices, mut mail) = relayed(true);
    let id = DeviceId::new();
    linked_elsewhere(&devices, id, "rep_b");
    let session = SessionId::new();
    devices.send_input(id, session, b"ls\r".to_vec()).await.unwrap();
    let (to, m) = mail.recv().await.unwrap();
    assert_eq!(to, "rep_b");
    assert!(matches!(m, Mail::Input { device, session: s, data } if device == id && s == session && data == b"ls\r"));
}

#[tokio::test]
async fn a_relayed_send_waits_for_word_from_the_link() {
    let (devices, mut mail) = relayed(true);
    let id = DeviceId::new();
    linked_elsewhere(&devices, id, "rep_b");
    let d = devices.clone();
    let sent = tokio::spawn(async move { d.send(id, &ServerMessage::Release { session: SessionId::new() }).await });
    let (_, m) = mail.recv().await.unwrap();
    let Mail::Send { req, .. } = m else { panic!("a send, not {m:?}") };
    // An answer from another device does not count.
    devices.answered(req, DeviceId::new(), Answered::Sent(true));
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert!(!sent.is_finished());
    devices.answered(req, id, Answered::Sent(true));
    assert!(sent.await.unwrap().is_ok());
}

#[tokio::test]
async fn a_relayed_request_is_answered_by_mail() {
    let (devices, mut mail) = relayed(true);
    let id = DeviceId::new();
    linked_elsewhere(&devices, id, "rep_b");
    let d = devices.clone();
    let session = SessionId::new();
    let asked = tokio::spawn(async move { d.send_text(id, session, "hi".into(), Duration::from_secs(5)).await });
    let (_, m) = mail.recv().await.unwrap();
    let Mail::Text { req, text, timeout, .. } = m else { panic!("text, not {m:?}") };
    assert_eq!((text.as_str(), timeout), ("hi", Duration::from_secs(5)));
    devices.answered(req, id, Answered::Delivery(Some(Delivery::Failed("busy".into()))));
    assert!(matches!(asked.await.unwrap(), Ok(Delivery::Failed(why)) if why == "busy"));
}

#[tokio::test]
async fn a_request_over_the_link_here_is_answered_by_the_device() {
    let (devices, mut mail) = relayed(true);
    let id = DeviceId::new();
    let mut link = link_here(&devices, id);
    let d = devices.clone();
    let asked = tokio::spawn(async move { d.check_repo(id, "/src".into(), None, Duration::from_secs(5)).await });
    let Ok(Some(Message::Text(t))) = tokio::time::timeout(Duration::from_secs(5), link.recv()).await else { panic!("a text frame") };
    let Ok(ServerMessage::CheckRepo { req, path, .. }) = serde_json::from_str::<ServerMessage>(&t) else { panic!("a clone check: {t}") };
    assert_eq!(path, "/src");
    devices.repo_checked(req, id, Some("no such branch".into()));
    assert_eq!(asked.await.unwrap(), Ok(Some("no such branch".into())));
    assert!(mail.try_recv().is_err());
}

#[tokio::test]
async fn mail_handed_on_goes_only_to_a_link_here() {
    let (devices, mut mail) = relayed(true);
    let id = DeviceId::new();
    linked_elsewhere(&devices, id, "rep_b");
    let answer = devices.snapshot_by(devices.local(id), id, SessionId::new(), Duration::from_secs(1), false).await;
    assert!(answer.is_none());
    assert!(mail.try_recv().is_err(), "never relayed further");
}

#[tokio::test]
async fn a_relay_that_cannot_post_means_not_connected() {
    let (devices, _mail) = relayed(false);
    let id = DeviceId::new();
    linked_elsewhere(&devices, id, "rep_b");
    assert!(devices.send_input(id, SessionId::new(), vec![1]).await.is_err());
    let merged = devices.merge(id, worktree(), "m".into(), Duration::from_secs(1)).await;
    assert_eq!(merged.err(), Some(NoAnswer::NotConnected));
}

#[tokio::test]
async fn a_kick_reaches_the_replica_and_drops_a_link_here() {
    let (devices, mut mail) = relayed(true);
    let id = DeviceId::new();
    linked_elsewhere(&devices, id, "rep_b");
    devices.kick(id).await;
    assert!(matches!(mail.recv().await, Some((_, Mail::Kick { device })) if device == id));
    let _link = link_here(&devices, id);
    devices.kick(id).await;
    assert!(!devices.is_local(id));
    assert!(mail.try_recv().is_err(), "a device linked here is kicked here");
}

fn worktree() -> Worktree {
    Worktree { repo_path: "/src".into(), dir: "t".into(), branch: "b".into(), base: None }
}
