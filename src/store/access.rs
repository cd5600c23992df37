//! The access tokens of the HTTP server (`agentctl token`), in `access/tokens.json`: each one's
//! name, what it may do, when it expires or was revoked, and the SHA-256 of its secret (the
//! secret itself is shown once, when made, and kept nowhere). Changes are made under
//! `access/tokens.lock` and are durable before the command that made them returns; every
//! request reads the file again, so a revocation holds from the next request on.

use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::{Durability, FileLock, Store, write_atomic};
use crate::error::{Error, Result};

/// The longest tokens file read (a few hundred bytes a token).
const MAX_FILE: u64 = 16 * 1024 * 1024;

/// One access token as kept: never its secret.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AccessToken {
    pub name: String,
    /// The SHA-256 of the secret, in hex.
    pub sha256: String,
    /// May list, read, await and wait, but not start, stop, answer or message a task.
    #[serde(default)]
    pub read_only: bool,
    pub created_at_ms: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revoked_at_ms: Option<u64>,
}

#[derive(Default, Serialize, Deserialize)]
struct File {
    tokens: Vec<AccessToken>,
}

/// The SHA-256 of `secret`, in hex: what the file keeps and what a request is looked up by.
pub fn digest(secret: &str) -> String {
    Sha256::digest(secret.as_bytes()).iter().map(|b| format!("{b:02x}")).collect()
}

impl Store {
    fn access_dir(&self) -> PathBuf {
        self.home().join("access")
    }

    /// Every access token, in the order they were made (none if there is no file yet).
    pub fn access_tokens(&self) -> Result<Vec<AccessToken>> {
        read(&self.access_dir().join("tokens.json")).map(|f| f.tokens)
    }

    /// Change the access tokens with `change` (under the file's lock), and save them durably
    /// when it returns `Ok`. Its value is returned.
    pub fn change_access_tokens<T>(&self, change: impl FnOnce(&mut Vec<AccessToken>) -> Result<T>) -> Result<T> {
        let dir = self.private_dir(Path::new("access"))?;
        let _lock = FileLock::take(&dir.join("tokens.lock"))?;
        let path = dir.join("tokens.json");
        let mut file = read(&path)?;
        let out = change(&mut file.tokens)?;
        let text =
            serde_json::to_vec_pretty(&file).map_err(|e| Error::Internal(format!("cannot encode tokens: {e}")))?;
        write_atomic(&path, &text, Durability::Durable)?;
        Ok(out)
    }
}

fn read(path: &Path) -> Result<File> {
    let damaged = |why: String| {
        Error::Internal(format!(
            "the tokens file {} cannot be read ({why}); fix or remove it, then make the tokens again",
            path.display()
        ))
    };
    match super::files::read(path, MAX_FILE) {
        Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| damaged(e.to_string())),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(File::default()),
        Err(e) => Err(damaged(e.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn token(name: &str) -> AccessToken {
        AccessToken {
            name: name.into(),
            sha256: digest(name),
            read_only: false,
            created_at_ms: 1,
            expires_at_ms: None,
            revoked_at_ms: None,
        }
    }

    #[test]
    fn the_digest_is_sha256_in_hex() {
        assert_eq!(digest("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    }

    #[test]
    fn tokens_are_kept_in_order_and_a_failed_change_saves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        assert_eq!(store.access_tokens().unwrap(), []);
        store
            .change_access_tokens(|t| {
                t.extend([token("a"), token("b")]);
                Ok(())
            })
            .unwrap();
        let failed: Result<()> = store.change_access_tokens(|t| {
            t.clear();
            Err(Error::Usage("no".into()))
        });
        assert!(failed.is_err());
        let names: Vec<String> = store.access_tokens().unwrap().into_iter().map(|t| t.name).collect();
        assert_eq!(names, ["a", "b"]);
        let mode = std::fs::metadata(dir.path().join("access/tokens.json")).unwrap();
        assert_eq!(std::os::unix::fs::PermissionsExt::mode(&mode.permissions()) & 0o077, 0);
    }

    #[test]
    fn a_damaged_file_is_refused_saying_what_to_do() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        std::fs::create_dir_all(dir.path().join("access")).unwrap();
        std::fs::write(dir.path().join("access/tokens.json"), "{not json").unwrap();
        let e = store.access_tokens().unwrap_err().to_string();
        assert!(e.contains("tokens file") && e.contains("fix or remove it"), "{e}");
    }
}
