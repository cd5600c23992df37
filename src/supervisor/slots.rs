//! At most so many threads of one kind at once. A sandboxed agent's connections (its calls to
//! the lead, its proxied traffic) are each served by a thread of its supervisor's, outside the
//! task's cgroup: a limit keeps the agent from making it spend without bound.

use std::sync::atomic::{AtomicUsize, Ordering};

/// A stack enough for relaying bytes or answering one call.
const STACK: usize = 256 * 1024;

pub(super) struct Slots {
    live: AtomicUsize,
    max: usize,
}

impl Slots {
    pub const fn new(max: usize) -> Slots {
        Slots { live: AtomicUsize::new(0), max }
    }

    /// Run `work` on a thread of its own named `name`, holding one slot until it returns: false
    /// (and nothing run) when every slot is taken or no thread could be made.
    pub fn spawn(&'static self, name: &str, work: impl FnOnce() + Send + 'static) -> bool {
        if self.live.fetch_add(1, Ordering::SeqCst) >= self.max {
            self.live.fetch_sub(1, Ordering::SeqCst);
            return false;
        }
        let slot = Slot(self);
        let thread = std::thread::Builder::new().name(name.into()).stack_size(STACK);
        // Not made: the closure, and the slot with it, is dropped.
        thread
            .spawn(move || {
                let _slot = slot;
                work()
            })
            .is_ok()
    }
}

/// One slot taken, given back when dropped.
struct Slot(&'static Slots);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.live.fetch_sub(1, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::Slots;

    #[test]
    fn a_full_set_of_slots_runs_nothing_more_until_one_is_given_back() {
        static SLOTS: Slots = Slots::new(1);
        let (go, wait) = std::sync::mpsc::channel::<()>();
        let (done, ended) = std::sync::mpsc::channel::<()>();
        assert!(SLOTS.spawn("test", move || {
            let _ = wait.recv();
            let _ = done.send(());
        }));
        assert!(!SLOTS.spawn("test", || panic!("over the limit")));
        go.send(()).unwrap();
        ended.recv().unwrap();
        // Given back as the thread's closure is dropped, a moment after it signalled.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while SLOTS.live.load(std::sync::atomic::Ordering::SeqCst) > 0 {
            assert!(std::time::Instant::now() < deadline, "the slot was never given back");
            std::thread::yield_now();
        }
        assert!(SLOTS.spawn("test", || {}));
    }
}
