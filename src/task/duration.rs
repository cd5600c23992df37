//! Parsing of user-given durations: `10s`, `500ms`, `5m`, `1h30m`, or plain (fractional) seconds,
//! from the command line or as seconds from an MCP client. Every one is range-checked here.

use std::time::Duration;

use crate::error::Error;

/// The longest duration accepted anywhere (waits, timeouts, grace periods, ages): ten years.
/// Beyond it a deadline would overflow the clock or wrap when saved in milliseconds.
pub const MAX_DURATION: Duration = Duration::from_secs(10 * 365 * 24 * 3600);

const FORMS: &str = "use a number of seconds or a value like 500ms, 10s, 5m, 1h";

/// Parse a duration as the CLI accepts it.
pub fn parse_duration(s: &str) -> Result<Duration, Error> {
    let t = s.trim();
    let shown = super::token::input_preview(s);
    let bad = || Error::Usage(format!("invalid duration `{shown}`: {FORMS}"));
    if t.is_empty() {
        return Err(bad());
    }
    let d = if t.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        let secs: f64 = t.parse().map_err(|_| bad())?;
        Duration::try_from_secs_f64(secs).ok()
    } else {
        match humantime::parse_duration(t) {
            Ok(d) => Some(d),
            Err(humantime::DurationError::NumberOverflow) => None,
            Err(_) => return Err(bad()),
        }
    };
    in_range(&format!("duration `{shown}`"), d)
}

/// A number of seconds given by a client (MCP's `*_secs` parameters), checked: not negative,
/// not NaN, at most `MAX_DURATION`.
pub fn duration_from_secs(what: &str, secs: f64) -> Result<Duration, Error> {
    if secs.is_nan() || secs < 0.0 {
        return Err(Error::Usage(format!("`{what}` must be a number of seconds, 0 or more; got {secs}")));
    }
    in_range(&format!("`{what}` ({secs} s)"), Duration::try_from_secs_f64(secs).ok())
}

fn in_range(what: &str, d: Option<Duration>) -> Result<Duration, Error> {
    match d {
        Some(d) if d <= MAX_DURATION => Ok(d),
        _ => Err(Error::Usage(format!(
            "{what} is too long: the longest accepted is 10 years ({} s); give a shorter one",
            MAX_DURATION.as_secs()
        ))),
    }
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

    #[test]
    fn refuses_what_is_out_of_range_instead_of_wrapping() {
        for huge in ["10000000000000000000", "18446744073709552", "99999999999999999999999999h", "11y", "1e400"] {
            let e = parse_duration(huge).unwrap_err().to_string();
            assert!(e.contains("too long") || e.contains("invalid duration"), "{huge}: {e}");
        }
        assert_eq!(parse_duration("3650d").unwrap(), MAX_DURATION);
        for (secs, ok) in
            [(0.0, true), (1e6, true), (1e19, false), (f64::INFINITY, false), (f64::NAN, false), (-1.0, false)]
        {
            assert_eq!(duration_from_secs("wait_secs", secs).is_ok(), ok, "{secs}");
        }
        let e = duration_from_secs("grace_secs", 1e19).unwrap_err().to_string();
        assert!(e.contains("`grace_secs`") && e.contains("too long"), "{e}");
    }
}
