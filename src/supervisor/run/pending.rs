//! While its backend may hold a run pending (a cluster's job not scheduled yet): looking at it now
//! and then until it runs, and the first run's deadline held until then.

use std::time::{Duration, Instant, SystemTime};

use super::Supervisor;
use crate::supervisor::backend::Look;
use crate::task::unix_ms;

/// How often the backend is asked whether a pending run runs yet: at first, then half as often
/// each time, down to `LOOK_LAST` (each look may be a query to a cluster's controller, whom a
/// thousand pending tasks must not flood). Output from the agent is looked at sooner.
const LOOK_FIRST: Duration = Duration::from_secs(1);
const LOOK_LAST: Duration = Duration::from_secs(30);

/// A run its backend may hold pending.
pub(super) struct Pending {
    /// When it is looked at next.
    pub(super) at: Instant,
    /// How long after the last look that is.
    every: Duration,
    /// The last look found it waiting (or none has found otherwise yet).
    pub(super) waits: bool,
}

impl Supervisor {
    /// After each start of the agent: if its backend may hold the run pending, it is looked at
    /// until it runs, and a first run's deadline waits meanwhile (a later one's is the task's,
    /// already counting).
    pub(super) fn run_started(&mut self) {
        let asked = Instant::now();
        let (backend, mut run) = self.parts();
        let Some(look) = backend.started(&mut run) else { return };
        self.pending = Some(Pending { at: asked + LOOK_FIRST, every: LOOK_FIRST, waits: true });
        if self.rec.retries == 0 && self.deadline.is_some() {
            (self.deadline, self.deadline_held) = (None, true);
        }
        self.saw(look);
    }

    /// Ask the backend whether the run runs yet. No answer changes nothing but the time of the
    /// next look. `output`: the agent wrote some, so it runs.
    pub(super) fn look_again(&mut self, output: bool) {
        let Some(p) = self.pending.as_mut() else { return };
        // Less often each time, but often enough for a deadline that waits for the start.
        let held = Duration::from_millis(self.spec.deadline_ms.unwrap_or(0) / 4).max(LOOK_FIRST);
        let next = (p.every * 2).min(if self.deadline_held { held.min(LOOK_LAST) } else { LOOK_LAST });
        (p.at, p.every) = (Instant::now() + next, next);
        let (backend, mut run) = self.parts();
        let look = backend.look(&mut run, output);
        self.saw(look);
    }

    /// What a look found: still waiting, or running from then on (and once the backend knows
    /// the run, looked at no more).
    fn saw(&mut self, look: Look) {
        match look {
            Look::Pending => {
                if let Some(p) = self.pending.as_mut() {
                    p.waits = true;
                }
            }
            Look::Running { since_s, settled } => {
                self.release_deadline(since_s);
                match self.pending.as_mut() {
                    Some(_) if settled => self.pending = None,
                    Some(p) => p.waits = false,
                    None => {}
                }
            }
        }
    }

    /// The deadline held while the backend held the run counts from when it started it
    /// (`started_s`, seconds since the epoch; unknown: now).
    pub(super) fn release_deadline(&mut self, started_s: Option<u64>) {
        if !std::mem::take(&mut self.deadline_held) {
            return;
        }
        let ran = started_s.map_or(0, |s| (unix_ms(SystemTime::now()) / 1000).saturating_sub(s));
        let left = Duration::from_millis(self.spec.deadline_ms.unwrap_or(0)).saturating_sub(Duration::from_secs(ran));
        self.deadline = Some(Instant::now() + left);
    }
}
