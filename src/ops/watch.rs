//! Waking waiters when a file or directory changes: with one inotify instance per process, shared
//! by its waiters (a user may hold only 128 instances, and an MCP server serves hundreds of waits
//! at once); where no instance or watch can be had, by one thread per process that looks at the
//! watched paths' metadata (`poll`).

mod poll;

pub(crate) use poll::{EVERY as LOOK_EVERY, Look};

use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use nix::errno::Errno;
use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify, InotifyEvent, WatchDescriptor};
use tokio::sync::watch;

use self::poll::Polled;
use crate::error::{IoContext, Result};

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
pub(super) struct Changes(How);

enum How {
    Notified(Notified),
    Polled(Polled),
    /// No thread to be had to look either: woken every `poll::EVERY`, whether or not anything
    /// changed.
    Ticking,
}

/// A waiter on a watch of the process's instance.
struct Notified {
    watcher: Arc<Watcher>,
    wd: WatchDescriptor,
    woken: watch::Receiver<()>,
    /// Looked at instead, should the instance break.
    path: PathBuf,
}

impl Changes {
    /// Watch `path`. A change made after this returns wakes the next `next()`, so a caller can
    /// watch first, then look, and miss nothing. Without an inotify instance or watch to be had
    /// (the user's limits), the path's metadata is looked at instead: a wait never fails for
    /// want of one. Fails only for a path that cannot be watched (missing, forbidden).
    pub(super) fn watch(path: &Path) -> Result<Changes> {
        match Notified::watch(path) {
            Ok(Some(n)) => Ok(Changes(How::Notified(n))),
            Ok(None) => Changes::polled(path),
            Err(e) => Err(e).ctx(|| format!("cannot watch {}", path.display())),
        }
    }

    /// Watch `path` by looking at its metadata every `poll::EVERY`: what `watch` falls back on.
    fn polled(path: &Path) -> Result<Changes> {
        std::fs::metadata(path).ctx(|| format!("cannot watch {}", path.display()))?;
        Ok(Changes::looked_at(path))
    }

    fn looked_at(path: &Path) -> Changes {
        Changes(Polled::start(path).map_or(How::Ticking, How::Polled))
    }

    /// Wait until something in the directory (or the file) changed; spurious wake-ups are fine.
    pub(super) async fn next(&mut self) {
        match &mut self.0 {
            How::Notified(n) => {
                if n.woken.changed().await.is_err() {
                    // The instance broke (its thread could not read it): looked at from now on,
                    // and woken now, as anything may have changed meanwhile.
                    let path = n.path.clone();
                    *self = Changes::looked_at(&path);
                }
            }
            How::Polled(p) => p.next().await,
            How::Ticking => tokio::time::sleep(poll::EVERY).await,
        }
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
    pub async fn changed(&mut self) {
        self.0.next().await
    }
}

impl Notified {
    /// A watch on `path` in the process's instance; `None` if the user's limits leave none to
    /// be had (no instance, no watch, no thread to read it).
    fn watch(path: &Path) -> io::Result<Option<Notified>> {
        let Ok(watcher) = Watcher::shared() else { return Ok(None) };
        // Added and subscribed under the lock the thread takes to wake waiters: the first
        // event of a new watch finds its waiter.
        let mut watches = lock(&watcher.watches);
        let wd = match watcher.inotify.add_watch(path, MASK) {
            Ok(wd) => wd,
            Err(Errno::ENOSPC | Errno::ENOMEM) => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        let watched = watches.entry(wd).or_insert_with(|| Watched { wake: watch::Sender::new(()), users: 0 });
        watched.users += 1;
        let woken = watched.wake.subscribe();
        drop(watches);
        Ok(Some(Notified { watcher, wd, woken, path: path.to_owned() }))
    }
}

impl Drop for Notified {
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
    fn shared() -> io::Result<Arc<Watcher>> {
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
        timeout(HANG, c.next()).await.is_ok()
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

    #[tokio::test]
    async fn without_an_instance_a_write_between_watch_and_next_is_not_missed() {
        let dir = tempfile::tempdir().unwrap();
        let bell = dir.path().join("bell");
        std::fs::write(&bell, "\n").unwrap();
        let mut rung = Changes::polled(&bell).unwrap();
        // As a bell is rung: its size stays, and its times may too (the same clock tick).
        let f = std::fs::OpenOptions::new().write(true).open(&bell).unwrap();
        rustix::io::pwrite(&f, b"\n", 0).unwrap();
        assert!(woken(&mut rung).await);
        // A write into a watched directory, as inotify reports it.
        let mut dir_changes = Changes::polled(dir.path()).unwrap();
        rustix::io::pwrite(&f, b"\n", 0).unwrap();
        assert!(woken(&mut dir_changes).await);
        assert!(Changes::polled(&dir.path().join("missing")).is_err());
    }
}
