//! The longest one tool call blocks (`agentctl mcp --max-wait`, default 55 s): below the
//! tool-call timeouts of common clients (60 s in the TypeScript SDK), so no wait outlives the
//! client's patience. A longer wait asked for is clamped, never refused, and an answer whose
//! wait ran out says so.

use std::time::Duration;

use super::params::seconds_or;
use crate::error::Result;
use crate::ops::HYBRID_WAIT;

/// The server's cap on every wait of one call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MaxWait(pub Duration);

/// A wait as it will run, and a note for the answer when it is shorter than asked.
#[derive(Clone, Debug, PartialEq)]
pub struct CappedWait {
    pub wait: Duration,
    pub note: Option<String>,
}

impl CappedWait {
    /// The note for an answer whose wait ran out (`ran_out`), if the cap shortened it. A wait
    /// that ended sooner (the task ended or asked, an event came), or never began (the task
    /// had ended already), was not cut short: its answer has nothing to note.
    pub fn note_if(&self, ran_out: bool) -> Option<String> {
        self.note.clone().filter(|_| ran_out)
    }
}

impl MaxWait {
    /// The wait parameter `what` asks for (`secs`, else `default`), at most the cap. Out of
    /// range (negative, NaN, beyond ten years) is still an error.
    pub fn cap(self, what: &str, secs: Option<f64>, default: Duration) -> Result<CappedWait> {
        let asked = seconds_or(what, secs, default)?;
        if asked <= self.0 {
            return Ok(CappedWait { wait: asked, note: None });
        }
        // A default above the cap (ask's 10 s under a lower cap) is nobody's request.
        let note = secs.map(|s| {
            let max = seconds_text(self.0);
            format!("{what} {s} is above this server's --max-wait of {max}; waited at most {max}")
        });
        Ok(CappedWait { wait: self.0, note })
    }

    /// How long `ask` and `run` wait for a quick result unless told: the hybrid window, or the
    /// cap if that is lower.
    pub fn hybrid(self) -> Duration {
        HYBRID_WAIT.min(self.0)
    }

    /// `text` with `{max_wait}` and `{hybrid_wait}` filled in, for what the server publishes.
    pub fn fill(self, text: &str) -> String {
        text.replace("{max_wait}", &seconds_text(self.0)).replace("{hybrid_wait}", &seconds_text(self.hybrid()))
    }
}

/// A duration as clients give them: `55 s`, `0.5 s`.
pub fn seconds_text(d: Duration) -> String {
    format!("{} s", d.as_secs_f64())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_above_the_cap_are_clamped_with_a_note() {
        let max = MaxWait(Duration::from_secs(55));
        let cap = |secs| max.cap("timeout_secs", secs, max.0).unwrap();
        assert_eq!(cap(None), CappedWait { wait: max.0, note: None });
        assert_eq!(cap(Some(1.5)), CappedWait { wait: Duration::from_millis(1500), note: None });
        assert_eq!(cap(Some(55.0)).note, None);
        let over = cap(Some(300.0));
        assert_eq!(over.wait, max.0);
        assert_eq!(
            over.note_if(true).as_deref(),
            Some("timeout_secs 300 is above this server's --max-wait of 55 s; waited at most 55 s")
        );
        assert_eq!(over.note_if(false), None, "a wait that did not run out was not cut short");
        // Out of range is refused before any capping.
        assert!(max.cap("timeout_secs", Some(1e19), max.0).is_err());
        assert!(max.cap("timeout_secs", Some(-1.0), max.0).is_err());
    }

    #[test]
    fn the_hybrid_window_fits_under_the_cap() {
        assert_eq!(MaxWait(Duration::from_secs(55)).hybrid(), HYBRID_WAIT);
        let low = MaxWait(Duration::from_secs(2));
        assert_eq!(low.hybrid(), Duration::from_secs(2));
        assert_eq!(low.cap("wait_secs", None, low.hybrid()).unwrap().note, None);
        assert_eq!(low.fill("up to {max_wait} ({hybrid_wait})"), "up to 2 s (2 s)");
        assert_eq!(MaxWait(Duration::from_millis(500)).fill("{max_wait}"), "0.5 s");
    }
}
