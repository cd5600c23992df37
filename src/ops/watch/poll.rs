//! Waking waiters that have no inotify instance or watch: one thread per process looks at the
//! metadata of each watched path (and of a directory's entries, whose writes inotify reports
//! too) every `EVERY`, and wakes a path's waiters when it changed. Idle waiters cost one look
//! per path and period, and no wake-up of their runtime.

use std::collections::HashMap;
use std::ffi::OsString;
use std::fs::{self, Metadata};
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use tokio::sync::watch;

use super::lock;

/// How often the paths are looked at: a thousand idle `wait` CLIs (a bell and a directory each)
/// cost 8% of one core of a small virtual machine, a debug build's 17%.
pub(crate) const EVERY: Duration = Duration::from_millis(500);

/// How soon after a change a look may be for a later change to leave no trace in the metadata:
/// a write in the same tick of the file system's clock leaves the times as they were, and a
/// bell's size too. Generous: some file systems keep whole seconds, a network one its server's
/// clock.
const UNSURE: Duration = Duration::from_secs(2);

/// The process's poller, made on first use; gone (with its thread) once nothing is watched.
static POLLER: Mutex<Option<Arc<Poller>>> = Mutex::new(None);

/// The watched paths, looked at by a thread of its own.
struct Poller {
    paths: Mutex<HashMap<PathBuf, Watched>>,
}

/// One path, shared by every waiter on it in the process.
struct Watched {
    last: Look,
    /// `last` was taken so soon after a change that a later one may not show in it: the next
    /// look wakes the waiters whatever it finds.
    unsure: bool,
    wake: watch::Sender<()>,
    users: usize,
}

/// A waiter on a path the process's poller looks at.
pub(super) struct Polled {
    poller: Arc<Poller>,
    path: PathBuf,
    woken: watch::Receiver<()>,
}

impl Polled {
    /// Watch `path` from now on: a change made after this returns wakes the next `next()`.
    /// Fails only if no thread can be started to look.
    pub(super) fn start(path: &Path) -> io::Result<Polled> {
        let mut slot = lock(&POLLER);
        let poller = match slot.as_ref() {
            Some(p) => Arc::clone(p),
            None => {
                let poller = Arc::new(Poller { paths: Mutex::new(HashMap::new()) });
                let looker = Arc::clone(&poller);
                std::thread::Builder::new().name("agentctl-poll".into()).spawn(move || looker.run())?;
                *slot = Some(Arc::clone(&poller));
                poller
            }
        };
        let mut paths = lock(&poller.paths);
        let watched = paths.entry(path.to_owned()).or_insert_with(|| {
            let (last, unsure) = Look::take(path);
            Watched { last, unsure, wake: watch::Sender::new(()), users: 0 }
        });
        watched.users += 1;
        let woken = watched.wake.subscribe();
        drop(paths);
        drop(slot);
        Ok(Polled { poller, path: path.to_owned(), woken })
    }

    /// Wait until `path` changed (found at the next look, within `EVERY`); spurious wake-ups
    /// happen, lost ones never.
    pub(super) async fn next(&mut self) {
        if self.woken.changed().await.is_err() {
            // Never: the path's entry, and its sender, live while it has users.
            std::future::pending::<()>().await;
        }
    }
}

impl Drop for Polled {
    fn drop(&mut self) {
        let mut paths = lock(&self.poller.paths);
        if let Some(w) = paths.get_mut(&self.path) {
            w.users -= 1;
            if w.users == 0 {
                paths.remove(&self.path);
            }
        }
    }
}

impl Poller {
    /// The thread's life: look at every path each period, until none is watched.
    fn run(self: Arc<Poller>) {
        loop {
            std::thread::sleep(EVERY);
            // The slot first, as `start` takes them: a path added meanwhile keeps it running.
            let mut slot = lock(&POLLER);
            let mut paths = lock(&self.paths);
            if paths.is_empty() {
                *slot = None;
                return;
            }
            drop(slot);
            for (path, w) in paths.iter_mut() {
                let (look, unsure) = Look::take(path);
                if w.unsure || look != w.last {
                    (w.last, w.unsure) = (look, unsure);
                    w.wake.send_replace(());
                }
            }
        }
    }
}

/// What a look at a path found.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Look {
    /// `None`: the path is gone (or cannot be read).
    this: Option<Meta>,
    /// A directory's entries, by name.
    entries: Vec<(OsString, Option<Meta>)>,
}

impl Look {
    /// Look at `path` now; and whether a change made after this might not show in the look.
    pub(crate) fn take(path: &Path) -> (Look, bool) {
        // Read before looking: a time stamp written after that is at least this.
        let now = SystemTime::now();
        let this = fs::metadata(path).ok();
        let mut entries = Vec::new();
        if this.as_ref().is_some_and(Metadata::is_dir)
            && let Ok(dir) = fs::read_dir(path)
        {
            // An entry's own metadata (a symlink's, not its target's), as inotify reports it.
            entries = dir.flatten().map(|e| (e.file_name(), e.metadata().ok().map(|m| Meta::of(&m)))).collect();
            entries.sort_by(|a, b| a.0.cmp(&b.0));
        }
        let look = Look { this: this.map(|m| Meta::of(&m)), entries };
        let unsure = look.newest().is_some_and(|t| t > nanos(now) - UNSURE.as_nanos() as i128);
        (look, unsure)
    }

    /// The latest time stamp of the path and its entries, in nanoseconds since 1970.
    fn newest(&self) -> Option<i128> {
        self.this.iter().chain(self.entries.iter().filter_map(|e| e.1.as_ref())).map(Meta::newest).max()
    }
}

/// What a change to a file or directory alters: its identity, size or time stamps (mtime,
/// ctime: the latter moves with any write, rename or chmod, and cannot be set back).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Meta {
    dev: u64,
    ino: u64,
    size: u64,
    mtime: i128,
    ctime: i128,
}

impl Meta {
    fn of(m: &Metadata) -> Meta {
        let at = |s: i64, ns: i64| i128::from(s) * 1_000_000_000 + i128::from(ns);
        Meta {
            dev: m.dev(),
            ino: m.ino(),
            size: m.size(),
            mtime: at(m.mtime(), m.mtime_nsec()),
            ctime: at(m.ctime(), m.ctime_nsec()),
        }
    }

    fn newest(&self) -> i128 {
        self.mtime.max(self.ctime)
    }
}

fn nanos(t: SystemTime) -> i128 {
    match t.duration_since(SystemTime::UNIX_EPOCH) {
        Ok(d) => d.as_nanos() as i128,
        Err(e) => -(e.duration().as_nanos() as i128),
    }
}

#[cfg(test)]
mod tests {
    use tokio::time::timeout;

    use super::*;

    const HANG: Duration = Duration::from_secs(10);

    /// As if the last look had been taken long after the last change (and any wake-up it
    /// caused seen).
    fn settled(p: &mut Polled) {
        let mut paths = lock(&p.poller.paths);
        paths.get_mut(&p.path).unwrap().unsure = false;
        p.woken.borrow_and_update();
    }

    #[tokio::test]
    async fn a_look_soon_after_a_change_wakes_the_next_wait_though_nothing_shows() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        fs::write(&file, "x").unwrap();
        // A write in the same clock tick as the first look would leave the metadata as it is.
        let mut p = Polled::start(&file).unwrap();
        assert!(timeout(HANG, p.next()).await.is_ok());
    }

    #[tokio::test]
    async fn a_still_file_or_directory_does_not_wake_and_a_change_does() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        fs::write(&file, "x").unwrap();
        for path in [&file, dir.path()] {
            let mut p = Polled::start(path).unwrap();
            settled(&mut p);
            assert!(timeout(EVERY * 3, p.next()).await.is_err(), "{}", path.display());
            // The same size: only the times move.
            fs::write(&file, "y").unwrap();
            assert!(timeout(HANG, p.next()).await.is_ok(), "{}", path.display());
        }
        // A new entry, or the path gone.
        let mut p = Polled::start(dir.path()).unwrap();
        settled(&mut p);
        fs::write(dir.path().join("g"), "").unwrap();
        assert!(timeout(HANG, p.next()).await.is_ok());
        let mut p = Polled::start(&file).unwrap();
        settled(&mut p);
        fs::remove_file(&file).unwrap();
        assert!(timeout(HANG, p.next()).await.is_ok());
    }

    #[tokio::test]
    async fn waiters_on_one_path_share_its_look_and_all_wake() {
        let dir = tempfile::tempdir().unwrap();
        let (mut a, mut b) = (Polled::start(dir.path()).unwrap(), Polled::start(dir.path()).unwrap());
        assert_eq!(lock(&a.poller.paths).get(dir.path()).unwrap().users, 2);
        drop(Polled::start(dir.path()).unwrap());
        settled(&mut a);
        fs::write(dir.path().join("f"), "").unwrap();
        assert!(timeout(HANG, a.next()).await.is_ok() && timeout(HANG, b.next()).await.is_ok());
        drop(a);
        drop(b);
        assert!(lock(&POLLER).as_ref().is_none_or(|p| !lock(&p.paths).contains_key(dir.path())));
    }
}
