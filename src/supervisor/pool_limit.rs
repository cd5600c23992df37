//! A pool's limit as its waiting tasks see it: read again from the agents file in force when the
//! task started, and the watch on that file that tells the first in line it changed.

use std::ffi::OsString;
use std::os::fd::{AsFd, BorrowedFd};
use std::path::{Path, PathBuf};
use std::time::Instant;

use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify};

use crate::agents::{Agents, DEFAULT_PARALLEL, DEFAULT_POOL};
use crate::ops::{LOOK_EVERY, Look};
use crate::store::Store;
use crate::task::PoolRef;

/// The pool's limit as last read from the agents file.
pub(super) struct Limit {
    pub(super) parallel: u32,
    /// What the pool's tasks may spend together, as last read.
    pub(super) spend: Option<crate::task::Spend>,
    /// The memory that must be available for one of its tasks to start, as last read.
    pub(super) min_memory: Option<crate::task::Bytes>,
}

impl Limit {
    /// Read the limit again (a changed `parallel` counts from the next look). A file that
    /// cannot be read now, or has no section for the pool (an editor saving it in place leaves
    /// it empty for a moment), leaves the last limit read: why, then.
    pub(super) fn read(&mut self, store: &Store, pool: &PoolRef) -> Option<String> {
        let name = &pool.name;
        let why = match Agents::load(store.home(), pool.agents_file.as_deref()) {
            Ok(agents) => {
                self.min_memory = agents.pool_min_memory(name);
                match agents.defined_parallel(name) {
                    Some(n) => {
                        self.parallel = n;
                        self.spend = agents.pool_spend(name);
                        return None;
                    }
                    // No section is the default pool's own limit, unless one said otherwise.
                    None if name == DEFAULT_POOL && self.parallel == DEFAULT_PARALLEL => return None,
                    None => match agents.path() {
                        Some(file) if agents.is_empty() => format!("agents file {} is empty now", file.display()),
                        Some(file) => format!("agents file {} has no [pools.{name}] now", file.display()),
                        None => "no agents file is found now".to_owned(),
                    },
                }
            }
            Err(e) => e.to_string(),
        };
        Some(format!(
            "{why}: pool `{name}` keeps its last limit, parallel = {}, until the file defines [pools.{name}] again",
            self.parallel
        ))
    }
}

/// The agents file, watched by those among the first in line: a raised `parallel` lets them
/// start.
pub(super) enum AgentsFile {
    /// An inotify watch on its directory (editors replace files rather than write them), and
    /// the file's name.
    Notified(Inotify, OsString),
    /// No instance to be had (the user's `fs.inotify.max_user_instances` all taken): looked at
    /// every `LOOK_EVERY`; the last look, whether a change may not show in it, the next look.
    Looked { path: PathBuf, last: Look, unsure: bool, at: Instant },
}

impl AgentsFile {
    /// Watch `file` from now on.
    pub(super) fn watch(file: &Path) -> AgentsFile {
        let notified = file.parent().zip(file.file_name()).and_then(|(dir, name)| {
            let inotify = Inotify::init(InitFlags::IN_CLOEXEC | InitFlags::IN_NONBLOCK).ok()?;
            let mask = AddWatchFlags::IN_CLOSE_WRITE | AddWatchFlags::IN_MOVED_TO | AddWatchFlags::IN_CREATE;
            inotify.add_watch(dir, mask).ok()?;
            Some(AgentsFile::Notified(inotify, name.to_owned()))
        });
        notified.unwrap_or_else(|| {
            let (last, unsure) = Look::take(file);
            AgentsFile::Looked { path: file.to_owned(), last, unsure, at: Instant::now() + LOOK_EVERY }
        })
    }

    /// What to poll, if anything.
    pub(super) fn fd(&self) -> Option<BorrowedFd<'_>> {
        match self {
            AgentsFile::Notified(inotify, _) => Some(inotify.as_fd()),
            AgentsFile::Looked { .. } => None,
        }
    }

    /// When to look at the file next, if it is looked at.
    pub(super) fn look_at(&self) -> Option<Instant> {
        match self {
            AgentsFile::Notified(..) => None,
            AgentsFile::Looked { at, .. } => Some(*at),
        }
    }

    /// Whether the file changed (`ready`: its instance has events); a look is taken if one
    /// is due.
    pub(super) fn changed(&mut self, ready: bool) -> bool {
        match self {
            // Other files of that directory (the store's, say) change all the time: only the
            // agents file counts.
            AgentsFile::Notified(inotify, name) => {
                ready && inotify.read_events().is_ok_and(|events| events.iter().any(|e| e.name.as_ref() == Some(name)))
            }
            AgentsFile::Looked { path, last, unsure, at } => {
                if Instant::now() < *at {
                    return false;
                }
                let (look, now_unsure) = Look::take(path);
                let changed = *unsure || look != *last;
                (*last, *unsure, *at) = (look, now_unsure, Instant::now() + LOOK_EVERY);
                changed
            }
        }
    }
}
