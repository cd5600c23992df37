//! Parsing of user-given durations: `10s`, `500ms`, `5m`, `1h30m`, or plain (fractional) seconds.

use std::time::Duration;

use crate::error::Error;

/// Parse a duration as the CLI accepts it.
pub fn parse_duration(s: &str) -> Result<Duration, Error> {
    let t = s.trim();
    let bad = || {
        Error::Usage(format!(
            "invalid duration `{}`: use a number of seconds or a value like 500ms, 10s, 5m, 1h",
            super::token::input_preview(s)
        ))
    };
    if t.is_empty() {
        return Err(bad());
    }
    if t.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        let secs: f64 = t.parse().map_err(|_| bad())?;
        return Duration::try_from_secs_f64(secs).map_err(|_| bad());
    }
    humantime::parse_duration(t).map_err(|_| bad())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_documented_forms() {
        let cases = [
            ("10s", 10_000),
            ("500ms", 500),
            ("5m", 300_000),
            ("1h", 3_600_000),
            ("7", 7_000),
            ("0.25", 250),
            ("0", 0),
            (" 2s ", 2_000),
        ];
        for (input, ms) in cases {
            assert_eq!(parse_duration(input).unwrap(), Duration::from_millis(ms), "{input}");
        }
    }

    #[test]
    fn refuses_garbage() {
        for bad in ["", "abc", "-1", "10x", "1..2", "s"] {
            assert!(matches!(parse_duration(bad), Err(Error::Usage(_))), "{bad:?}");
        }
    }
}
