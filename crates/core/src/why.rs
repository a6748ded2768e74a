//! "Why isn't my task moving?" (seed 001): one line, from whose turn it is and, for a
//! stage waiting for a slot, the devices that could take it, saying what holds the task
//! and the command that moves it on.

use crate::attention::AttentionKind;
use crate::turn::Turn;

/// A device that could run the task's stage, as the answer needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Place<'a> {
    /// Its name.
    pub name: &'a str,
    /// Runs it has live.
    pub busy: u32,
    /// Runs it may have at once.
    pub slots: u32,
    /// Whether it can take a run now.
    pub reach: Reach,
}

/// Whether a device can take a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reach {
    /// Connected and heard from.
    Connected,
    /// Not connected.
    Offline,
    /// Connected, but silent past the window: it takes no new runs.
    Silent,
}

/// The task's live run, as the answer needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LiveRun<'a> {
    /// Its id, for commands.
    pub id: &'a str,
    /// The device it runs on.
    pub device: &'a str,
    /// Its stale flag's words, when flagged.
    pub flag: Option<&'a str>,
}

/// What the answer is decided from.
#[derive(Debug, Clone, Copy)]
pub struct WhyFacts<'a> {
    /// The task's id, for commands.
    pub task: &'a str,
    /// Whose turn it is.
    pub turn: Turn<'a>,
    /// The devices with the task's repository (only its sandbox's device, once it has one).
    pub places: &'a [Place<'a>],
    /// Tasks in the workspace queued before it.
    pub ahead: usize,
    /// Its live run, if it has one.
    pub run: Option<LiveRun<'a>>,
    /// The open question or blocker, or the item its run waits on, by id.
    pub waiting_id: Option<&'a str>,
}

/// The one line.
pub fn why(f: &WhyFacts) -> String {
    let task = f.task;
    let id = f.waiting_id.unwrap_or("ID");
    let run = f.run.map_or("RUN", |r| r.id);
    match f.turn {
        Turn::Finished => "Nothing holds it: it has finished.".into(),
        Turn::Flagged(why) => format!("Flagged for a person: {why}. Look at it, then `drover task launch {task}` for a fresh run."),
        Turn::Answer(q) => format!("Waiting on a person: the agent asked \"{q}\". Answer with `drover task answer {id} \"…\"`."),
        Turn::Blocked(b) => format!("Blocked: {b}. Resolve it with `drover task unblock {id}` once it is cleared."),
        Turn::Waiting(kind, tool) => waiting(kind, tool, id, run),
        Turn::Person(stage) => {
            format!(
                "Waiting on a person: the `{stage}` stage is kept for people. Hand it off with `drover task advance {task} --note \"…\"`."
            )
        }
        Turn::Ready(stage) => {
            format!("Waiting on a person: the `{stage}` stage starts when someone activates it: `drover task activate {task}`.")
        }
        Turn::Queued => queued(f.places, f.ahead),
        Turn::Starting => match f.run {
            Some(r) => format!("Its run {} is being set up on {}.", r.id, r.device),
            None => "Its run is being set up.".into(),
        },
        Turn::Running => running(f.run),
        Turn::Stalled(stage) => {
            format!("Nothing is moving: the `{stage}` stage has an agent but no run is queued or live. Start one with `drover task launch {task}`.")
        }
    }
}

fn waiting(kind: AttentionKind, tool: Option<&str>, id: &str, run: &str) -> String {
    match kind {
        AttentionKind::Permission => format!(
            "Waiting on a person: its run holds a {} call for approval. `drover approve {id}` or `drover deny {id} --message \"…\"` (see `drover inbox`).",
            tool.unwrap_or("tool")
        ),
        AttentionKind::Idle => {
            format!("Waiting on a person: the agent finished its turn and waits for its next instruction: `drover session input {run} \"…\"`.")
        }
        AttentionKind::ProbablyWaiting => format!(
            "Probably waiting on a person (a guess: its screen has been still and shows a prompt). Look with `drover session attach {run}`."
        ),
    }
}

fn queued(places: &[Place], ahead: usize) -> String {
    let ahead = match ahead {
        0 => String::new(),
        1 => " 1 task is ahead of it.".into(),
        n => format!(" {n} tasks are ahead of it."),
    };
    if places.is_empty() {
        return format!("Waiting for a slot, but no device has its repository: add one with `drover repo add`.{ahead}");
    }
    let usable: Vec<&Place> = places.iter().filter(|p| p.reach == Reach::Connected).collect();
    if usable.is_empty() {
        let away: Vec<String> = places
            .iter()
            .map(|p| match p.reach {
                Reach::Silent => format!("{} is silent", p.name),
                Reach::Offline | Reach::Connected => format!("{} is offline", p.name),
            })
            .collect();
        return format!("Waiting for a device: {}.{ahead}", away.join(", "));
    }
    let load: Vec<String> = usable.iter().map(|p| format!("{} {}/{}", p.name, p.busy, p.slots)).collect();
    if usable.iter().all(|p| p.busy >= p.slots) {
        return format!("Waiting for a slot: every device that has its repository is busy ({}).{ahead}", load.join(", "));
    }
    format!("Queued for a slot: it starts at the scheduler's next round ({} free).{ahead}", load.join(", "))
}

fn running(run: Option<LiveRun>) -> String {
    match run {
        Some(LiveRun { id, device, flag: Some(flag) }) => {
            format!(
                "An agent is working in {id} on {device}, but the run is flagged: {flag}. It is marked lost and restaffed if it stays so."
            )
        }
        Some(LiveRun { id, device, flag: None }) => {
            format!("An agent is working: run {id} on {device}. Watch with `drover session attach {id}`.")
        }
        None => "An agent is working.".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(turn: Turn<'static>) -> WhyFacts<'static> {
        WhyFacts { task: "tsk_1", turn, places: &[], ahead: 0, run: None, waiting_id: Some("att_1") }
    }

    fn place(name: &'static str, busy: u32, slots: u32, reach: Reach) -> Place<'static> {
        Place { name, busy, slots, reach }
    }

    #[test]
    fn a_queued_task_says_which_devices_hold_it_up() {
        let none = WhyFacts { ahead: 2, ..facts(Turn::Queued) };
        assert_eq!(
            why(&none),
            "Waiting for a slot, but no device has its repository: add one with `drover repo add`. 2 tasks are ahead of it."
        );
        let busy = [place("mac", 2, 2, Reach::Connected), place("box", 1, 1, Reach::Connected)];
        let f = WhyFacts { places: &busy, ahead: 1, ..facts(Turn::Queued) };
        assert_eq!(why(&f), "Waiting for a slot: every device that has its repository is busy (mac 2/2, box 1/1). 1 task is ahead of it.");
        let away = [place("mac", 0, 2, Reach::Silent), place("box", 0, 1, Reach::Offline)];
        assert_eq!(why(&WhyFacts { places: &away, ..facts(Turn::Queued) }), "Waiting for a device: mac is silent, box is offline.");
        let free = [place("mac", 1, 2, Reach::Connected), place("box", 0, 1, Reach::Offline)];
        assert!(why(&WhyFacts { places: &free, ..facts(Turn::Queued) })
            .starts_with("Queued for a slot: it starts at the scheduler's next round (mac 1/2 free)"));
    }

    #[test]
    fn a_person_s_turn_names_the_command_that_moves_it() {
        assert!(why(&facts(Turn::Waiting(AttentionKind::Permission, Some("Bash"))))
            .contains("holds a Bash call for approval. `drover approve att_1`"));
        let idle =
            WhyFacts { run: Some(LiveRun { id: "ses_1", device: "mac", flag: None }), ..facts(Turn::Waiting(AttentionKind::Idle, None)) };
        assert!(why(&idle).contains("`drover session input ses_1"));
        assert!(why(&facts(Turn::Waiting(AttentionKind::ProbablyWaiting, None))).starts_with("Probably waiting on a person (a guess"));
        let q = WhyFacts { waiting_id: Some("not_1"), ..facts(Turn::Answer("which db?")) };
        assert_eq!(why(&q), "Waiting on a person: the agent asked \"which db?\". Answer with `drover task answer not_1 \"…\"`.");
        assert!(why(&facts(Turn::Blocked("no creds"))).starts_with("Blocked: no creds."));
        assert!(why(&facts(Turn::Person("review"))).contains("`drover task advance tsk_1"));
        assert!(why(&facts(Turn::Ready("code"))).contains("`drover task activate tsk_1`"));
        assert!(why(&facts(Turn::Flagged("ended 3 times without a hand-off"))).starts_with("Flagged for a person: ended 3 times"));
    }

    #[test]
    fn a_working_or_stalled_task_says_so() {
        let run = LiveRun { id: "ses_1", device: "mac", flag: None };
        assert_eq!(
            why(&WhyFacts { run: Some(run), ..facts(Turn::Running) }),
            "An agent is working: run ses_1 on mac. Watch with `drover session attach ses_1`."
        );
        let flagged = LiveRun { flag: Some("Device silent"), ..run };
        assert!(why(&WhyFacts { run: Some(flagged), ..facts(Turn::Running) }).contains("flagged: Device silent"));
        assert!(why(&facts(Turn::Stalled("code"))).starts_with("Nothing is moving"));
        assert_eq!(why(&facts(Turn::Finished)), "Nothing holds it: it has finished.");
        assert!(why(&WhyFacts { run: Some(run), ..facts(Turn::Starting) }).contains("being set up on mac"));
    }
}
