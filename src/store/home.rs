//! Which directory is the home (`--home` > `AGENTCTL_HOME` > `$XDG_STATE_HOME/agentctl` >
//! `~/.local/state/agentctl`), and making it safe: owned by us, 0700, no symlinks inside.

use std::fs::{self, DirBuilder};
use std::io::ErrorKind;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};

use crate::error::{Error, IoContext, Result};

/// Pick the home from the flag and the environment (not yet created).
pub fn resolve_home(flag: Option<PathBuf>) -> Result<PathBuf> {
    let nonempty = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty()).map(PathBuf::from);
    if let Some(h) = flag.or_else(|| nonempty("AGENTCTL_HOME")) {
        return Ok(h);
    }
    if let Some(x) = nonempty("XDG_STATE_HOME") {
        return Ok(x.join("agentctl"));
    }
    match nonempty("HOME") {
        Some(h) => Ok(h.join(".local/state/agentctl")),
        None => Err(Error::Usage("cannot find a home for agentctl: set --home, AGENTCTL_HOME or HOME".into())),
    }
}

/// What to do about a home that cannot be one.
const PICK: &str = "pick a directory of your own with --home or AGENTCTL_HOME";

/// Where the home is, as a path without symlinks, without creating anything: the canonical
/// form of its longest existing ancestor with the rest appended (the rest will be created as
/// plain directories). Whether it exists yet is the second value.
pub(super) fn locate_home(home: &Path) -> Result<(PathBuf, bool)> {
    // Most of the time it is there: one call.
    if let Ok(real) = home.canonicalize() {
        return if real.is_dir() { Ok((real, true)) } else { Err(not_a_directory(home)) };
    }
    let absolute = std::path::absolute(home).ctx(|| format!("cannot resolve home {}", home.display()))?;
    // Resolve part by part while the parts exist (symlinks and `..` as the system sees them),
    // then lexically: what does not exist yet will be created as written.
    let mut planned = PathBuf::from("/");
    let mut found = true;
    for part in absolute.components() {
        match part {
            Component::RootDir | Component::Prefix(_) | Component::CurDir => {}
            Component::ParentDir if !found => {
                planned.pop();
            }
            Component::ParentDir | Component::Normal(_) => {
                let next = planned.join(part);
                if found {
                    match next.canonicalize() {
                        Ok(real) => {
                            planned = real;
                            continue;
                        }
                        Err(e) if e.kind() == ErrorKind::NotFound => found = false,
                        Err(e) if e.raw_os_error() == Some(libc::ENOTDIR) => {
                            return Err(Error::Usage(format!(
                                "cannot create home {}: {} is not a directory; {PICK}",
                                home.display(),
                                planned.display()
                            )));
                        }
                        Err(e) => {
                            return Err(Error::Usage(format!("cannot reach home {}: {e}; {PICK}", home.display())));
                        }
                    }
                }
                planned = next;
            }
        }
    }
    if !found && let Ok(real) = planned.canonicalize() {
        // `missing/../existing`: it was there after all.
        (planned, found) = (real, true);
    }
    if found && !planned.is_dir() {
        return Err(not_a_directory(home));
    }
    Ok((planned, found))
}

fn not_a_directory(home: &Path) -> Error {
    Error::Usage(format!("home {} exists and is not a directory; {PICK}", home.display()))
}

/// Check an existing home: it must belong to this user; wider permissions than 0700 are
/// tightened (with a warning; a home that cannot be changed, read-only say, is left as it is).
pub(super) fn check_home(home: &Path) -> Result<()> {
    let meta = check_owner(home)?;
    if meta.mode() & 0o077 != 0 {
        let was = meta.mode() & 0o777;
        match fs::set_permissions(home, fs::Permissions::from_mode(0o700)) {
            Ok(()) => {
                eprintln!("agentctl: warning: home {} was open to others ({was:o}); it is now 0700", home.display())
            }
            Err(e) => eprintln!(
                "agentctl: warning: home {} is open to others ({was:o}) and cannot be made private: {e}",
                home.display()
            ),
        }
    }
    Ok(())
}

/// Refuse a home that exists but belongs to another user (whose 0700 would otherwise look
/// like no home at all); its metadata otherwise.
pub(super) fn check_owner(home: &Path) -> Result<fs::Metadata> {
    let meta = fs::metadata(home).ctx(|| format!("cannot read home {}", home.display()))?;
    // SAFETY: geteuid cannot fail.
    let me = unsafe { libc::geteuid() };
    if meta.uid() != me {
        return Err(Error::Usage(format!(
            "home {} exists and belongs to uid {}, not to you (uid {me}); use a home of your own with --home or \
             AGENTCTL_HOME",
            home.display(),
            meta.uid()
        )));
    }
    Ok(meta)
}

/// Create the (located) home and check it.
pub(super) fn create_home(home: &Path) -> Result<()> {
    DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(home)
        .map_err(|e| Error::Usage(format!("cannot create home {}: {e}; {PICK}", home.display())))?;
    check_home(home)
}

/// Create `home/rel` (each missing part 0700), refusing to pass through a symlink: nothing
/// planted in the home may redirect where agentctl writes.
pub(super) fn ensure_dir(home: &Path, rel: &Path) -> Result<PathBuf> {
    // Most often all there already: one look at the whole path (the home's own has no symlink).
    let whole = home.join(rel);
    if super::files::is_real_dir(&whole) {
        return Ok(whole);
    }
    let mut dir = home.to_owned();
    for part in rel.components() {
        dir.push(part);
        match DirBuilder::new().mode(0o700).create(&dir) {
            Ok(()) => {}
            Err(e) if e.kind() == ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e).ctx(|| format!("cannot create {}", dir.display())),
        }
        let meta = fs::symlink_metadata(&dir).ctx(|| format!("cannot read {}", dir.display()))?;
        if !meta.is_dir() {
            return Err(Error::Usage(format!(
                "{} is {} inside the home, where agentctl expects its own directory; remove it",
                dir.display(),
                if meta.file_type().is_symlink() { "a symlink" } else { "not a directory" }
            )));
        }
    }
    Ok(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_symlinks_inside_the_home() {
        let home = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        ensure_dir(home.path(), Path::new("subagents/a/data")).unwrap();
        std::os::unix::fs::symlink(outside.path(), home.path().join("subagents/b")).unwrap();
        let e = ensure_dir(home.path(), Path::new("subagents/b/data/history")).unwrap_err();
        assert!(e.to_string().contains("is a symlink"), "{e}");
        assert_eq!(fs::read_dir(outside.path()).unwrap().count(), 0);
    }

    #[test]
    fn tightens_a_home_open_to_others() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("h");
        fs::create_dir(&home).unwrap();
        fs::set_permissions(&home, fs::Permissions::from_mode(0o755)).unwrap();
        check_home(&home).unwrap();
        assert_eq!(fs::metadata(&home).unwrap().mode() & 0o777, 0o700);
    }

    #[test]
    fn locates_a_home_without_creating_it() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().canonicalize().unwrap();
        std::os::unix::fs::symlink(&real, real.join("link")).unwrap();
        let (at, found) = locate_home(&real.join("link/a/./b/../c")).unwrap();
        assert_eq!((at, found), (real.join("a/c"), false));
        assert!(!real.join("a").exists(), "nothing is created");
        let (at, found) = locate_home(&real.join("link")).unwrap();
        assert_eq!((at, found), (real.clone(), true));
        fs::write(real.join("file"), "").unwrap();
        assert!(locate_home(&real.join("file")).is_err());
    }
}
