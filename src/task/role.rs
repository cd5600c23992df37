//! `Role`: the name of an agent to ask, safe to use as a directory name.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize};

use crate::error::Error;

/// A validated role name: `[A-Za-z0-9_-]{1,64}`.
#[derive(Clone, PartialEq, Eq, Hash, Serialize)]
#[serde(into = "String")]
pub struct Role(String);

impl Role {
    /// Parse user input; anything that could escape a directory or is too long is refused.
    pub fn parse(s: &str) -> Result<Role, Error> {
        let ok = (1..=64).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        if ok { Ok(Role(s.to_owned())) } else { Err(Error::InvalidRole(super::token::input_preview(s))) }
    }

    /// The role as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Role({})", self.0)
    }
}

impl From<Role> for String {
    fn from(r: Role) -> String {
        r.0
    }
}

impl<'de> Deserialize<'de> for Role {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Role, D::Error> {
        let s = String::deserialize(d)?;
        Role::parse(&s).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validates_roles() {
        for ok in ["reviewer", "a", "Tester_2-b", &"x".repeat(64)] {
            assert_eq!(Role::parse(ok).unwrap().as_str(), ok);
        }
        for bad in ["", "..", "a/b", "a b", "rôle", "a\0", &"x".repeat(65), "."] {
            assert!(matches!(Role::parse(bad), Err(Error::InvalidRole(_))), "{bad:?}");
        }
    }
}
