//! Which device takes a stage that waits for a slot: eligible devices are connected, have
//! the task's repository and a free slot; among them the one with the most free slots
//! (then the name) wins. Waiting stages are served first queued, first started.

/// A device as the scheduler sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate<D> {
    /// How the caller names the device (the scheduler hands it back as its choice).
    pub id: D,
    /// Its name (the tie-break).
    pub name: String,
    /// Whether its daemon is connected.
    pub connected: bool,
    /// Whether it has been silent for the Device-silent window (connected or not): it
    /// takes no new runs until it reports in.
    pub silent: bool,
    /// Whether it has the task's repository.
    pub has_repo: bool,
    /// Sessions it may run at once.
    pub slots: u32,
    /// Sessions live on it now (including ones placed this round).
    pub live: u32,
    /// Whether it runs what it is given: false for a device that cannot sandbox and was
    /// not started `--unsandboxed` (it would refuse the run).
    pub runs: bool,
}

impl<D> Candidate<D> {
    fn free(&self) -> u32 {
        self.slots.saturating_sub(self.live)
    }
}

/// Picks the device for one waiting stage; None while nothing eligible has a slot.
pub fn pick<D: Copy>(candidates: &[Candidate<D>]) -> Option<D> {
    candidates
        .iter()
        .filter(|c| c.connected && !c.silent && c.has_repo && c.runs && c.free() > 0)
        .max_by(|a, b| a.free().cmp(&b.free()).then_with(|| b.name.cmp(&a.name)))
        .map(|c| c.id)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(id: u32, connected: bool, has_repo: bool, slots: u32, live: u32) -> Candidate<u32> {
        Candidate { id, name: format!("d{id}"), connected, silent: false, has_repo, slots, live, runs: true }
    }

    #[test]
    fn only_eligible_devices_with_a_free_slot() {
        assert_eq!(pick::<u32>(&[]), None);
        assert_eq!(pick(&[c(1, false, true, 4, 0)]), None, "not connected");
        assert_eq!(pick(&[c(1, true, false, 4, 0)]), None, "no repo");
        assert_eq!(pick(&[Candidate { silent: true, ..c(1, true, true, 4, 0) }]), None, "silent though connected");
        assert_eq!(pick(&[Candidate { runs: false, ..c(1, true, true, 4, 0) }]), None, "refuses runs");
        assert_eq!(pick(&[Candidate { runs: false, ..c(1, true, true, 8, 0) }, c(2, true, true, 1, 0)]), Some(2), "the one that runs them");
        assert_eq!(pick(&[c(1, true, true, 2, 2)]), None, "full");
        assert_eq!(pick(&[c(1, true, true, 2, 3)]), None, "over-full after a slot change");
        assert_eq!(pick(&[c(1, true, true, 2, 1)]), Some(1));
    }

    #[test]
    fn most_free_slots_then_name() {
        assert_eq!(pick(&[c(1, true, true, 4, 3), c(2, true, true, 4, 1)]), Some(2));
        assert_eq!(pick(&[c(2, true, true, 4, 1), c(1, true, true, 4, 1)]), Some(1), "equal: first by name");
    }
}
