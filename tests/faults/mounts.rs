//! Mounts a test makes (root only), unmounted when dropped.

use std::path::{Path, PathBuf};
use std::process::Command;

/// A mount at a path, lazily unmounted when dropped.
pub struct Mount(pub PathBuf);

fn mount(args: &[&str]) -> bool {
    Command::new("mount").args(args).status().is_ok_and(|s| s.success())
}

impl Mount {
    /// A 2 MiB tmpfs at `at` (a disk that fills at once).
    pub fn tiny_tmpfs(at: &Path) -> Mount {
        crate::needs_root("it mounts a 2 MiB tmpfs");
        std::fs::create_dir_all(at).unwrap();
        assert!(mount(&["-t", "tmpfs", "-o", "size=2m,mode=0700", "tmpfs", at.to_str().unwrap()]), "mount failed");
        Mount(at.to_owned())
    }

    /// A read-only view of `dir` at `at`.
    pub fn read_only(dir: &Path, at: &Path) -> Mount {
        crate::needs_root("it bind-mounts the home read-only");
        std::fs::create_dir_all(at).unwrap();
        let (d, a) = (dir.to_str().unwrap(), at.to_str().unwrap());
        assert!(mount(&["--bind", d, a]), "bind mount failed");
        let view = Mount(at.to_owned());
        assert!(mount(&["-o", "remount,bind,ro", a]), "read-only remount failed");
        view
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}
