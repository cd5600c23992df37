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

#[cfg(test)]
mod tests {
    use super::*;

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
