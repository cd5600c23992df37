//! Runs that hit a rate limit, tried again: a template's `retry_on` (which exit codes or output
//! mean "rate-limited"), `max_retries` and `backoff`. Such a run is not the task's end: after a
//! back-off that doubles each time, the agent runs again under the same token.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::parse_duration;
use crate::error::Error;

/// Retries when a template says `retry_on` but not how many.
pub const DEFAULT_MAX_RETRIES: u32 = 3;
/// The first back-off when a template does not say.
pub const DEFAULT_BACKOFF: Duration = Duration::from_secs(10);
/// No back-off is longer, however many retries came before.
pub const MAX_BACKOFF: Duration = Duration::from_secs(3600);
/// Most retries a template may ask for.
const MOST_RETRIES: u32 = 100;
/// How much of a run's output, from its end, the `output` patterns are looked for in.
pub const OUTPUT_WINDOW: u64 = 64 * 1024;

/// `retry_on` in a template: the exit codes, and the texts in the output, that mean a run was
/// rate-limited.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RetryOn {
    #[serde(default)]
    pub exit: Vec<i32>,
    #[serde(default)]
    pub output: Vec<String>,
}

/// What a task's spec carries: when to run again, how often, and how long to wait first.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RetryPolicy {
    pub exit: Vec<i32>,
    pub output: Vec<String>,
    pub max_retries: u32,
    pub backoff_ms: u64,
}

impl RetryPolicy {
    /// The policy a template's settings make, if any; settings that mean nothing (retries
    /// without `retry_on`, an empty `retry_on`, an empty text) are refused.
    pub fn from_settings(
        on: Option<&RetryOn>,
        max_retries: Option<u32>,
        backoff: Option<&str>,
    ) -> Result<Option<RetryPolicy>, Error> {
        let Some(on) = on else {
            if max_retries.is_some() || backoff.is_some() {
                return Err(Error::Usage(
                    "`max_retries` and `backoff` need `retry_on`, which says what a rate-limited run looks like: \
                     retry_on = { exit = [75], output = [\"429 Too Many Requests\"] }"
                        .into(),
                ));
            }
            return Ok(None);
        };
        if on.exit.is_empty() && on.output.is_empty() {
            return Err(Error::Usage(
                "`retry_on` names neither an exit code nor an output text: give `exit = [CODE, ...]`, \
                 `output = [\"TEXT\", ...]`, or both"
                    .into(),
            ));
        }
        if let Some(bad) = on.exit.iter().find(|&&c| !(1..=255).contains(&c)) {
            return Err(Error::Usage(format!(
                "`retry_on.exit` lists {bad}: an exit code that means rate-limited is 1 to 255 (0 is success)"
            )));
        }
        if on.output.iter().any(String::is_empty) {
            return Err(Error::Usage("`retry_on.output` has an empty text, which every output contains".into()));
        }
        let max_retries = max_retries.unwrap_or(DEFAULT_MAX_RETRIES);
        if !(1..=MOST_RETRIES).contains(&max_retries) {
            return Err(Error::Usage(format!("`max_retries` is {max_retries}; give 1 to {MOST_RETRIES}")));
        }
        let backoff = backoff.map(parse_duration).transpose()?.unwrap_or(DEFAULT_BACKOFF);
        if backoff > MAX_BACKOFF {
            return Err(Error::Usage(format!(
                "`backoff` is longer than {}, the longest wait between runs",
                humantime::format_duration(MAX_BACKOFF)
            )));
        }
        Ok(Some(RetryPolicy {
            exit: on.exit.clone(),
            output: on.output.clone(),
            max_retries,
            backoff_ms: backoff.as_millis() as u64,
        }))
    }

    /// Whether a run that exited with `exit_code` (after writing `tail` last) was rate-limited:
    /// a listed exit code, or a failure (non-zero exit) whose output holds a listed text. A
    /// run that succeeded is an answer, whatever it says.
    pub fn matches(&self, exit_code: Option<i32>, tail: &[u8]) -> bool {
        let Some(code) = exit_code else { return false };
        self.exit.contains(&code)
            || (code != 0 && self.output.iter().any(|t| tail.windows(t.len()).any(|w| w == t.as_bytes())))
    }

    /// The wait before retry number `n` (1 for the first): the back-off, doubled for each retry
    /// before it, at most `MAX_BACKOFF`.
    pub fn delay(&self, n: u32) -> Duration {
        let doubled = self.backoff_ms.saturating_mul(1u64 << n.saturating_sub(1).min(20));
        Duration::from_millis(doubled).min(MAX_BACKOFF)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn on(exit: &[i32], output: &[&str]) -> RetryOn {
        RetryOn { exit: exit.to_vec(), output: output.iter().map(|s| s.to_string()).collect() }
    }

    #[test]
    fn settings_make_a_policy_or_are_refused_with_what_to_write() {
        assert_eq!(RetryPolicy::from_settings(None, None, None).unwrap(), None);
        let p = RetryPolicy::from_settings(Some(&on(&[75], &[])), None, None).unwrap().unwrap();
        assert_eq!((p.max_retries, p.backoff_ms), (DEFAULT_MAX_RETRIES, 10_000));
        let p = RetryPolicy::from_settings(Some(&on(&[], &["429"])), Some(5), Some("2s")).unwrap().unwrap();
        assert_eq!((p.max_retries, p.backoff_ms), (5, 2000));
        for (o, m, b) in [
            (None, Some(2), None),
            (None, None, Some("1s")),
            (Some(on(&[], &[])), None, None),
            (Some(on(&[], &[""])), None, None),
            (Some(on(&[1], &[])), Some(1000), None),
            (Some(on(&[1], &[])), Some(0), None),
            (Some(on(&[0], &[])), None, None),
            (Some(on(&[256], &[])), None, None),
            (Some(on(&[1], &[])), None, Some("soon")),
            (Some(on(&[1], &[])), None, Some("2h")),
        ] {
            assert!(RetryPolicy::from_settings(o.as_ref(), m, b).is_err(), "{o:?} {m:?} {b:?}");
        }
    }

    #[test]
    fn a_run_is_rate_limited_by_its_exit_code_or_a_text_in_its_output() {
        let p = RetryPolicy::from_settings(Some(&on(&[75], &["rate_limit_error"])), None, None).unwrap().unwrap();
        assert!(p.matches(Some(75), b""));
        assert!(!p.matches(Some(1), b"all fine"));
        assert!(p.matches(Some(1), b"{\"type\":\"rate_limit_error\"}"));
        // A success is an answer, and a signal is no rate limit, whatever the output says.
        assert!(!p.matches(Some(0), b"explaining rate_limit_error"));
        assert!(!p.matches(None, b"... rate_limit_error"));
    }

    #[test]
    fn the_back_off_doubles_up_to_its_cap() {
        let p = RetryPolicy::from_settings(Some(&on(&[75], &[])), Some(100), Some("1s")).unwrap().unwrap();
        assert_eq!(p.delay(1), Duration::from_secs(1));
        assert_eq!(p.delay(2), Duration::from_secs(2));
        assert_eq!(p.delay(4), Duration::from_secs(8));
        assert_eq!(p.delay(99), MAX_BACKOFF);
    }
}
