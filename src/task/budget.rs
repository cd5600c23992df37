//! Budgets: the most a task may spend (`budget = { usd = 2.0, tokens = 2_000_000, turns = 40 }`
//! on a template or pool, `--budget-usd/--budget-tokens/--budget-turns` per task), and the
//! limit its usage crossed.

use serde::{Deserialize, Serialize};

use crate::agent::Usage;
use crate::agent::usage::dollars;

/// The most one task may spend; an unset limit is no limit.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Budget {
    /// US dollars, as the agent reports its cost (or as estimated from `[prices]`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usd: Option<f64>,
    /// Tokens of every sort: input, output, cache read and cache write.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens: Option<u64>,
    /// Model calls (turns, for Codex).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turns: Option<u64>,
}

impl Budget {
    pub fn is_empty(&self) -> bool {
        *self == Budget::default()
    }

    /// Each limit of `self`, else `under`'s (a task's own over its template's over its pool's).
    pub fn or(self, under: Budget) -> Budget {
        Budget { usd: self.usd.or(under.usd), tokens: self.tokens.or(under.tokens), turns: self.turns.or(under.turns) }
    }

    /// Refuse a limit that is not a positive number, saying where it is.
    pub fn check(&self, where_: &str) -> Result<(), String> {
        match self.usd {
            Some(usd) if !(usd.is_finite() && usd > 0.0) => {
                Err(format!("{where_}: budget usd must be a positive number of dollars, like 2.5 (not {usd})"))
            }
            _ if self.tokens == Some(0) || self.turns == Some(0) => Err(format!(
                "{where_}: a budget of 0 tokens or turns would stop the task before it starts; leave it out for no limit"
            )),
            _ => Ok(()),
        }
    }

    /// The first limit `usage` has passed, said as the task's note says it: which limit, and by
    /// how much. Reaching a limit exactly is within it.
    pub fn crossed(&self, usage: &Usage) -> Option<String> {
        if let (Some(limit), Some(cost)) = (self.usd, usage.cost_usd)
            && cost > limit
        {
            let est = if usage.cost_estimated { " (estimated)" } else { "" };
            return Some(format!(
                "over budget: cost {}{est} passed its budget of {} by {}",
                dollars(cost),
                dollars(limit),
                dollars(cost - limit)
            ));
        }
        if let (Some(limit), Some(used)) = (self.tokens, usage.tokens())
            && used > limit
        {
            return Some(format!("over budget: {used} tokens passed its budget of {limit} by {}", used - limit));
        }
        if let (Some(limit), Some(turns)) = (self.turns, usage.turns)
            && turns > limit
        {
            return Some(format!("over budget: {turns} turns passed its budget of {limit} by {}", turns - limit));
        }
        None
    }
}

/// What a pool's tasks may spend together over a sliding window (`[pools.NAME] spend = { usd =
/// 50, per = "1d" }`): once the pool's spend in the last `per` reaches `usd`, its new tasks wait.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Spend {
    pub usd: f64,
    pub per: String,
}

impl Spend {
    /// The window, checked: `where_` names the setting in errors.
    pub fn window(&self, where_: &str) -> Result<std::time::Duration, String> {
        if !(self.usd.is_finite() && self.usd > 0.0) {
            return Err(format!("{where_} spend usd must be a positive number of dollars, like 50 (not {})", self.usd));
        }
        let per = super::parse_duration(&self.per)
            .map_err(|e| format!("{where_} spend per: {}", e.message(crate::error::Frontend::Cli)))?;
        if per.is_zero() {
            return Err(format!("{where_} spend per must be longer than 0s, like \"1h\" or \"1d\""));
        }
        Ok(per)
    }

    /// When a pool that spent `ended` (each task's end, ms since the epoch, and its cost, in
    /// the window) and `running` (its running tasks so far) may spend again: `None` while it
    /// may now; `Some(None)` when only its running tasks' end can free it (they spend still);
    /// `Some(Some(ms))` when enough of what ended leaves the window.
    pub fn frees_at(&self, per_ms: u64, ended: &[(u64, f64)], running: f64) -> Option<Option<u64>> {
        // In nanodollars, so that sums are exact whatever their order.
        let nano = |usd: f64| (usd * 1e9).round() as i64;
        let limit = nano(self.usd);
        let spent: i64 = ended.iter().map(|e| nano(e.1)).sum::<i64>() + nano(running);
        if spent < limit {
            return None;
        }
        let mut by_end = ended.to_vec();
        by_end.sort_by_key(|e| e.0);
        let mut left = spent;
        for (at, cost) in by_end {
            left -= nano(cost);
            if left < limit {
                return Some(Some(at + per_ms));
            }
        }
        Some(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pools_window_frees_when_enough_of_what_it_spent_leaves_it() {
        let s = Spend { usd: 0.10, per: "1h".into() };
        assert_eq!(s.window("[pools.p]"), Ok(std::time::Duration::from_secs(3600)));
        assert!(Spend { usd: 0.0, per: "1h".into() }.window("x").unwrap_err().contains("positive"));
        assert!(Spend { usd: 1.0, per: "soon".into() }.window("x").is_err());
        assert_eq!(s.frees_at(1000, &[(5, 0.04)], 0.05), None, "under its limit");
        // Once what ended at 5 and 7 has left, $0.06 is left: under $0.10 (exactly: 0.11 − 0.01 is 0.10).
        assert_eq!(s.frees_at(1000, &[(9, 0.06), (5, 0.01), (7, 0.04)], 0.0), Some(Some(1007)));
        assert_eq!(s.frees_at(1000, &[(5, 0.01)], 0.2), Some(None), "its running tasks alone pass it");
    }

    #[test]
    fn the_first_limit_passed_is_named_with_its_excess() {
        let b = Budget { usd: Some(0.05), tokens: Some(1000), turns: Some(3) };
        let mut u = Usage { cost_usd: Some(0.05), input_tokens: Some(1000), turns: Some(3), ..Usage::default() };
        assert_eq!(b.crossed(&u), None, "reaching a limit is within it");
        u.cost_usd = Some(0.061);
        assert_eq!(b.crossed(&u).unwrap(), "over budget: cost $0.0610 passed its budget of $0.0500 by $0.0110");
        u.cost_usd = None;
        u.turns = Some(4);
        assert_eq!(b.crossed(&u).unwrap(), "over budget: 4 turns passed its budget of 3 by 1");
        u.output_tokens = Some(1);
        assert_eq!(b.crossed(&u).unwrap(), "over budget: 1001 tokens passed its budget of 1000 by 1");
        // Unknown usage never crosses a budget.
        assert_eq!(b.crossed(&Usage::default()), None);
    }

    #[test]
    fn limits_are_checked_and_layered() {
        assert!(Budget { usd: Some(-1.0), ..Budget::default() }.check("x").unwrap_err().contains("positive"));
        assert!(Budget { turns: Some(0), ..Budget::default() }.check("x").is_err());
        assert_eq!(Budget { usd: Some(1.0), ..Budget::default() }.check("x"), Ok(()));
        let task = Budget { usd: Some(1.0), ..Budget::default() };
        let pool = Budget { usd: Some(5.0), turns: Some(9), tokens: None };
        assert_eq!(task.or(pool), Budget { usd: Some(1.0), turns: Some(9), tokens: None });
    }
}
