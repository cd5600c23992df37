//! Access tokens for the HTTP server: made (`token create`), listed, revoked, and checked on
//! every request. A token is `agentctl_` and 64 hex digits of randomness; the home keeps only
//! its SHA-256 (`store::access`).

use std::time::{Duration, SystemTime};

use crate::error::{Error, Result};
use crate::store::{AccessToken, Store, digest};
use crate::task::unix_ms;

/// What every secret starts with (so that secret scanners and people can tell one).
const PREFIX: &str = "agentctl_";

/// A token just made: its secret is shown this once.
#[derive(Debug)]
pub struct NewAccess {
    pub token: AccessView,
    pub secret: String,
}

/// An access token as listed.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct AccessView {
    pub name: String,
    pub read_only: bool,
    pub created_at_ms: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expires_at_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub revoked_at_ms: Option<u64>,
    /// `active`, `expired` or `revoked`.
    pub state: &'static str,
}

/// Who a request is from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Identity {
    pub name: String,
    pub read_only: bool,
}

/// Why a request is not let in (each an HTTP 401).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Denied {
    /// No `Authorization: Bearer …`.
    Missing,
    /// A token this home never made.
    Unknown,
    Expired(String),
    Revoked(String),
}

impl Denied {
    /// What the client is told.
    pub fn reason(&self) -> String {
        match self {
            Denied::Missing => "no bearer token: send `Authorization: Bearer <token>` (agentctl token create)".into(),
            Denied::Unknown => "the bearer token is not one of this server's (agentctl token list)".into(),
            Denied::Expired(n) => format!("token `{n}` has expired; make another with agentctl token create"),
            Denied::Revoked(n) => format!("token `{n}` was revoked; make another with agentctl token create"),
        }
    }
}

/// Make token `name` (letters, digits, `_`, `-`; at most 64: its session's name), read-only if asked,
/// expiring after `expires` if given. A name in use by a token not revoked is refused.
pub fn create_access(store: &Store, name: &str, read_only: bool, expires: Option<Duration>) -> Result<NewAccess> {
    check_name(name)?;
    let now = unix_ms(SystemTime::now());
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(|e| Error::Internal(format!("cannot draw a random token: {e}")))?;
    let secret: String = PREFIX.chars().chain(bytes.iter().flat_map(|b| hex(*b))).collect();
    let made = AccessToken {
        name: name.to_owned(),
        sha256: digest(&secret),
        read_only,
        created_at_ms: now,
        expires_at_ms: expires.map(|d| now.saturating_add(d.as_millis() as u64)),
        revoked_at_ms: None,
    };
    store.change_access_tokens(|tokens| {
        if let Some(old) = tokens.iter().find(|t| t.name == name && t.revoked_at_ms.is_none()) {
            let state = view(old, now).state;
            return Err(Error::Refused(format!(
                "token `{name}` exists ({state}); `agentctl token revoke {name}` first, or choose another name"
            )));
        }
        // A revoked token of that name makes way for the new one.
        tokens.retain(|t| t.name != name);
        tokens.push(made.clone());
        Ok(())
    })?;
    Ok(NewAccess { token: view(&made, now), secret })
}

/// Every token, in the order they were made.
pub fn list_access(store: &Store) -> Result<Vec<AccessView>> {
    let now = unix_ms(SystemTime::now());
    Ok(store.access_tokens()?.iter().map(|t| view(t, now)).collect())
}

/// Revoke token `name`: requests with it are refused from the next one on.
pub fn revoke_access(store: &Store, name: &str) -> Result<AccessView> {
    let now = unix_ms(SystemTime::now());
    store.change_access_tokens(|tokens| {
        let Some(t) = tokens.iter_mut().find(|t| t.name == name) else {
            return Err(Error::Usage(format!("no token `{name}`; `agentctl token list` shows them")));
        };
        t.revoked_at_ms.get_or_insert(now);
        Ok(view(t, now))
    })
}

/// Who `presented` (the bearer token of a request, if any) is, or why it is not let in.
pub fn authenticate(store: &Store, presented: Option<&str>) -> std::result::Result<Identity, Denied> {
    let secret = presented.ok_or(Denied::Missing)?;
    // Unreadable tokens let nobody in.
    let tokens = store.access_tokens().map_err(|_| Denied::Unknown)?;
    let sha = digest(secret);
    let t = tokens.iter().find(|t| t.sha256 == sha).ok_or(Denied::Unknown)?;
    match view(t, unix_ms(SystemTime::now())).state {
        "revoked" => Err(Denied::Revoked(t.name.clone())),
        "expired" => Err(Denied::Expired(t.name.clone())),
        _ => Ok(Identity { name: t.name.clone(), read_only: t.read_only }),
    }
}

fn view(t: &AccessToken, now: u64) -> AccessView {
    let state = match (t.revoked_at_ms, t.expires_at_ms) {
        (Some(_), _) => "revoked",
        (None, Some(at)) if at <= now => "expired",
        _ => "active",
    };
    AccessView {
        name: t.name.clone(),
        read_only: t.read_only,
        created_at_ms: t.created_at_ms,
        expires_at_ms: t.expires_at_ms,
        revoked_at_ms: t.revoked_at_ms,
        state,
    }
}

/// A token's name is also the session its client's tasks report to: the same rule.
fn check_name(name: &str) -> Result<()> {
    crate::task::Role::parse(name).map(drop).map_err(|_| {
        Error::Usage(format!(
            "token name `{}` is not valid; use 1 to 64 letters, digits, `_` or `-`",
            crate::task::input_preview(name)
        ))
    })
}

fn hex(b: u8) -> [char; 2] {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    [DIGITS[usize::from(b >> 4)] as char, DIGITS[usize::from(b & 15)] as char]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn home() -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        (dir, store)
    }

    #[test]
    fn a_made_token_lets_its_holder_in_until_it_is_revoked() {
        let (_dir, store) = home();
        let made = create_access(&store, "lead", false, None).unwrap();
        assert!(made.secret.starts_with(PREFIX) && made.secret.len() == PREFIX.len() + 64, "{}", made.secret);
        assert_eq!(authenticate(&store, Some(&made.secret)), Ok(Identity { name: "lead".into(), read_only: false }));
        assert_eq!(authenticate(&store, None), Err(Denied::Missing));
        assert_eq!(authenticate(&store, Some("agentctl_00")), Err(Denied::Unknown));
        let kept = std::fs::read_to_string(store.home().join("access/tokens.json")).unwrap();
        assert!(!kept.contains(&made.secret[PREFIX.len()..]), "the secret itself is kept nowhere");
        assert_eq!(revoke_access(&store, "lead").unwrap().state, "revoked");
        assert_eq!(authenticate(&store, Some(&made.secret)), Err(Denied::Revoked("lead".into())));
    }

    #[test]
    fn names_are_unique_among_tokens_not_revoked() {
        let (_dir, store) = home();
        let first = create_access(&store, "ci", true, None).unwrap();
        let again = create_access(&store, "ci", false, None).unwrap_err().to_string();
        assert!(again.contains("token revoke ci"), "{again}");
        revoke_access(&store, "ci").unwrap();
        let second = create_access(&store, "ci", false, None).unwrap();
        assert_ne!(first.secret, second.secret);
        assert_eq!(authenticate(&store, Some(&first.secret)), Err(Denied::Unknown));
        let listed = list_access(&store).unwrap();
        assert_eq!((listed.len(), listed[0].state, listed[0].read_only), (1, "active", false));
    }

    #[test]
    fn an_expired_token_is_refused_and_listed_as_expired() {
        let (_dir, store) = home();
        let made = create_access(&store, "short", true, Some(Duration::ZERO)).unwrap();
        assert_eq!(authenticate(&store, Some(&made.secret)), Err(Denied::Expired("short".into())));
        assert_eq!(list_access(&store).unwrap()[0].state, "expired");
    }

    #[test]
    fn bad_names_and_unknown_revocations_say_what_to_do() {
        let (_dir, store) = home();
        for bad in ["", "a b", "x/y", "a.b", &"n".repeat(65)] {
            let e = create_access(&store, bad, false, None).unwrap_err().to_string();
            assert!(e.contains("letters, digits"), "{bad}: {e}");
        }
        let e = revoke_access(&store, "nobody").unwrap_err().to_string();
        assert!(e.contains("token list"), "{e}");
    }
}
