//! `Token`: the 6-hex-char name of a task, validated once at the edge.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize};

use crate::error::Error;

/// A task's identifier: exactly 6 lowercase hex characters.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(into = "String")]
pub struct Token([u8; 6]);

impl Token {
    /// Parse user input; anything but `^[0-9a-f]{6}$` is refused before it can name a file.
    pub fn parse(s: &str) -> Result<Token, Error> {
        let bytes = s.as_bytes();
        if bytes.len() == 6 && bytes.iter().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
            let mut t = [0u8; 6];
            t.copy_from_slice(bytes);
            Ok(Token(t))
        } else {
            Err(Error::InvalidToken(input_preview(s)))
        }
    }

    /// A fresh random token (uniqueness is the store's job: it creates tokens exclusively).
    /// It always holds one of the letters a-d or f, so no client can take it for a number:
    /// all digits (`004217`) is an integer, and digits with an `e` (`12e456`) a float.
    pub fn random() -> Token {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        loop {
            let n = (random_u64() >> 32) as u32;
            let mut t = [0u8; 6];
            for (i, c) in t.iter_mut().enumerate() {
                *c = HEX[((n >> (i * 4)) & 0xf) as usize];
            }
            if t.iter().any(|c| matches!(c, b'a'..=b'd' | b'f')) {
                return Token(t);
            }
        }
    }

    /// The token as text.
    pub fn as_str(&self) -> &str {
        // Only ASCII hex digits are ever stored.
        std::str::from_utf8(&self.0).expect("token is ascii")
    }
}

/// A random number from the OS (`getrandom`: no generator to seed, no CPU feature probe).
/// Should the OS refuse, the time and process id, mixed, still differ between calls.
pub fn random_u64() -> u64 {
    // The system call itself: the crate, in a statically linked binary, cannot find glibc's
    // wrapper and opens /dev/random and /dev/urandom instead (five calls for every token).
    #[cfg(target_os = "linux")]
    {
        let mut n = [0u8; 8];
        // SAFETY: getrandom writes at most `n.len()` bytes into `n`.
        if unsafe { libc::getrandom(n.as_mut_ptr().cast(), n.len(), 0) } == n.len() as isize {
            return u64::from_ne_bytes(n);
        }
    }
    getrandom::u64().unwrap_or_else(|_| {
        use std::hash::{Hash, Hasher};
        static CALLS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let mut h = std::collections::hash_map::DefaultHasher::new();
        (std::time::SystemTime::now(), std::process::id(), CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed))
            .hash(&mut h);
        h.finish()
    })
}

/// Echo bad input back without flooding the terminal or smuggling control characters.
pub fn input_preview(s: &str) -> String {
    let cleaned: String = s.chars().take(40).map(|c| if c.is_control() { '?' } else { c }).collect();
    if s.chars().count() > 40 { format!("{cleaned}…") } else { cleaned }
}

impl fmt::Display for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Token({})", self.as_str())
    }
}

impl From<Token> for String {
    fn from(t: Token) -> String {
        t.as_str().to_owned()
    }
}

impl<'de> Deserialize<'de> for Token {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Token, D::Error> {
        let s = String::deserialize(d)?;
        Token::parse(&s).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_only_six_lowercase_hex() {
        for ok in ["a3f2c1", "000000", "ffffff"] {
            assert_eq!(Token::parse(ok).unwrap().as_str(), ok);
        }
        for bad in ["", "a3f2c", "a3f2c1a", "A3F2C1", "../x", "a3f2g1", "a3f2c\0", "a3/2c1", "ａ3f2c1"] {
            assert!(matches!(Token::parse(bad), Err(Error::InvalidToken(_))), "{bad:?}");
        }
    }

    #[test]
    fn random_tokens_are_valid_and_never_read_as_numbers() {
        // Without the retry, about 10 % of draws have no letter but `e`: 20 000 draws would
        // hit one with certainty (the chance to miss is below 1e-900).
        for _ in 0..20_000 {
            let t = Token::random();
            assert_eq!(Token::parse(t.as_str()).unwrap(), t);
            assert!(t.as_str().parse::<f64>().is_err(), "{t} reads as a number");
            assert!(t.as_str().bytes().any(|c| matches!(c, b'a'..=b'd' | b'f')), "{t}");
        }
    }

    #[test]
    fn preview_is_bounded_and_printable() {
        let long = "x".repeat(10_000);
        assert!(input_preview(&long).chars().count() <= 41);
        assert_eq!(input_preview("a\0b"), "a?b");
    }
}
