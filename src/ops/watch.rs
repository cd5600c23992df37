//! Waking waiters when a file or directory changes, with one inotify instance per process: a
//! user may hold only 128 instances, and an MCP server serves hundreds of waits at once.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};

use nix::errno::Errno;
use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify, InotifyEvent, WatchDescriptor};
use tokio::sync::watch;

use crate::error::{Error, IoContext, Result};

/// What every watch reports. One mask for all: a file has one watch per instance, and adding it
/// again replaces its mask.
const MASK: AddWatchFlags = AddWatchFlags::IN_MODIFY.union(AddWatchFlags::IN_CREATE).union(AddWatchFlags::IN_MOVED_TO);

/// The process's instance, made on first use. A failure to make one (the user is out of
/// instances) is not kept: the next watch tries again.
static WATCHER: Mutex<Option<Arc<Watcher>>> = Mutex::new(None);

/// The instance, read by a thread of its own, and who waits on each of its watches.
struct Watcher {
    inotify: Inotify,
    watches: Mutex<HashMap<WatchDescriptor, Watched>>,
}

/// One watch, shared by every waiter on the same file.
struct Watched {
    /// Sent to on each change. A tokio watch channel needs no runtime, so the thread wakes
    /// waiters on any runtime, and each waiter sees whether anything came since it last looked.
    wake: watch::Sender<()>,
    users: usize,
}

/// Changes to a directory or a file, as an async stream of wake-ups.
pub(super) struct Changes {
    watcher: Arc<Watcher>,
    wd: WatchDescriptor,
    woken: watch::Receiver<()>,
}

impl Changes {
    /// Watch `path`. A change made after this returns wakes the next `next()`, so a caller can
    /// watch first, then look, and miss nothing.
    pub(super) fn watch(path: &Path) -> Result<Changes> {
        let what = || format!("cannot watch {}", path.display());
        let watcher = Watcher::shared().ctx(what)?;
        let woken = {
            // Added and subscribed under the lock the thread takes to wake waiters: the first
            // event of a new watch finds its waiter.
            let mut watches = lock(&watcher.watches);
            let wd = watcher.inotify.add_watch(path, MASK).ctx(what)?;
            let watched = watches.entry(wd).or_insert_with(|| Watched { wake: watch::Sender::new(()), users: 0 });
            watched.users += 1;
            (wd, watched.wake.subscribe())
        };
        Ok(Changes { watcher, wd: woken.0, woken: woken.1 })
    }

    /// Wait until something in the directory (or the file) changed; spurious wake-ups are fine.
    pub(super) async fn next(&mut self) -> Result<()> {
        self.woken.changed().await.map_err(|_| Error::Internal("the watch on the home's files ended".into()))
    }
}

/// A change to watch from outside `ops` (the live view): any write to a home's store, or to
/// one task's log.
pub struct Watch(Changes);

impl Watch {
    /// Any write to the home's store (its files, the database's journal among them).
    pub fn home(store: &crate::store::Store) -> Result<Watch> {
        Watch::file(store.home())
    }

    /// Output written to a file (a task's log).
    pub fn file(path: &Path) -> Result<Watch> {
        Changes::watch(path).map(Watch)
    }

    /// Wait for the next change after the last one seen (spurious wake-ups are fine).
    pub async fn changed(&mut self) -> Result<()> {
        self.0.next().await
    }
}

impl Drop for Changes {
    fn drop(&mut self) {
        let mut watches = lock(&self.watcher.watches);
        if let Some(w) = watches.get_mut(&self.wd) {
            w.users -= 1;
            if w.users == 0 {
                watches.remove(&self.wd);
                // Fails (EINVAL) where the kernel removed it already: its file was deleted.
                let _ = self.watcher.inotify.rm_watch(self.wd);
            }
        }
    }
}

impl Watcher {
    /// The process's instance, made (with its thread) if there is none yet.
    fn shared() -> std::io::Result<Arc<Watcher>> {
        let mut slot = lock(&WATCHER);
        if let Some(w) = slot.as_ref() {
            return Ok(Arc::clone(w));
        }
        // Blocking reads: the thread is its only reader and has nothing else to do.
        let inotify = Inotify::init(InitFlags::IN_CLOEXEC)?;
        let watcher = Arc::new(Watcher { inotify, watches: Mutex::new(HashMap::new()) });
        let reader = Arc::clone(&watcher);
        std::thread::Builder::new().name("agentctl-watch".into()).spawn(move || reader.read())?;
        *slot = Some(Arc::clone(&watcher));
        Ok(watcher)
    }

    /// The thread's life: read event batches and wake their watches' waiters.
    fn read(self: Arc<Watcher>) {
        loop {
            match self.inotify.read_events() {
                Ok(events) => self.wake(&events),
                Err(Errno::EINTR) => {}
                Err(e) => {
                    eprintln!("agentctl: warning: cannot read inotify events: {e}");
                    break;
                }
            }
        }
        // Broken: the next watch makes a new instance, and this one's waiters hear of the end
        // (their channels close).
        let mut slot = lock(&WATCHER);
        if slot.as_ref().is_some_and(|w| Arc::ptr_eq(w, &self)) {
            *slot = None;
        }
        drop(slot);
        lock(&self.watches).clear();
    }

    fn wake(&self, events: &[InotifyEvent]) {
        let watches = lock(&self.watches);
        if events.iter().any(|e| e.mask.contains(AddWatchFlags::IN_Q_OVERFLOW)) {
            // Events were lost: any watch may have changed.
            for w in watches.values() {
                w.wake.send_replace(());
            }
            return;
        }
        // Events queued before a watch was removed may name a number the kernel has since given
        // to a new watch: they wake its waiters for nothing, which they accept. For that reason
        // IN_IGNORED (a watch removed, by us or because its file was deleted) wakes like any
        // event but never removes an entry, which may be the new watch's; users remove entries.
        for e in events {
            if let Some(w) = watches.get(&e.wd) {
                w.wake.send_replace(());
            }
        }
    }
}

/// A lock that a panic elsewhere does not make unusable (the map stays consistent: every
/// change to it is one step).
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tokio::time::timeout;

    use super::*;

    const HANG: Duration = Duration::from_secs(10);

    async fn woken(c: &mut Changes) -> bool {
        timeout(HANG, c.next()).await.is_ok_and(|r| r.is_ok())
    }

    fn inotify_instances() -> usize {
        std::fs::read_dir("/proc/self/fd")
            .unwrap()
            .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
            .filter(|l| l.as_os_str() == "anon_inode:inotify")
            .count()
    }

    #[tokio::test]
    async fn two_watchers_of_one_dir_both_wake_on_one_write() {
        let dir = tempfile::tempdir().unwrap();
        let (mut a, mut b) = (Changes::watch(dir.path()).unwrap(), Changes::watch(dir.path()).unwrap());
        // Written after watch() and before next(): not missed.
        std::fs::write(dir.path().join("f"), "x").unwrap();
        assert!(woken(&mut a).await && woken(&mut b).await);
    }

    #[tokio::test]
    async fn dropping_one_watcher_leaves_the_others_working() {
        let dir = tempfile::tempdir().unwrap();
        let (a, mut b) = (Changes::watch(dir.path()).unwrap(), Changes::watch(dir.path()).unwrap());
        drop(a);
        std::fs::write(dir.path().join("f"), "x").unwrap();
        assert!(woken(&mut b).await);
        // The last one gone, the watch is removed; a new one works from the start.
        drop(b);
        let mut c = Changes::watch(dir.path()).unwrap();
        std::fs::write(dir.path().join("f"), "y").unwrap();
        assert!(woken(&mut c).await);
    }

    #[tokio::test]
    async fn a_change_elsewhere_does_not_wake() {
        let (here, there) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let mut a = Changes::watch(here.path()).unwrap();
        let mut b = Changes::watch(there.path()).unwrap();
        std::fs::write(there.path().join("f"), "x").unwrap();
        assert!(woken(&mut b).await);
        assert!(timeout(Duration::from_millis(200), a.next()).await.is_err());
    }

    #[test]
    fn watching_a_missing_path_fails_and_harms_no_one() {
        let dir = tempfile::tempdir().unwrap();
        assert!(Changes::watch(&dir.path().join("missing")).is_err());
        let mut a = Changes::watch(dir.path()).unwrap();
        std::fs::write(dir.path().join("f"), "x").unwrap();
        let rt = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
        assert!(rt.block_on(woken(&mut a)));
    }

    #[test]
    fn hundreds_of_watchers_on_two_runtimes_share_one_instance() {
        let dirs = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
        let multi = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_time().build().unwrap();
        let single = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
        let mut waits = Vec::new();
        for i in 0..300 {
            let mut c = Changes::watch(dirs[i % 2].path()).unwrap();
            waits.push(multi.spawn(async move { woken(&mut c).await }));
        }
        assert_eq!(inotify_instances(), 1);
        // A waiter on another runtime, on the same watch.
        let mut other = Changes::watch(dirs[0].path()).unwrap();
        for d in &dirs {
            std::fs::write(d.path().join("f"), "x").unwrap();
        }
        assert!(single.block_on(woken(&mut other)));
        for w in waits {
            assert!(multi.block_on(w).unwrap());
        }
        assert_eq!(inotify_instances(), 1);
    }
}
