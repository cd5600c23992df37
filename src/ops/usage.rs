//! `usage`: what the tasks of a window spent, in total and per role, pool, session or agent
//! kind. Costs are summed in whole billionths of a dollar, each task's rounded to one, so a
//! total is exactly the sum of its tasks' figures, in any order.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use serde::Serialize;

use crate::agent::Usage;
use crate::agent::usage::token_split;
use crate::error::Result;
use crate::store::{SpendBy, SpendRow, Store};
use crate::task::unix_ms;

/// What a group of tasks spent. A figure no task reported is left out (unknown, never zero);
/// `unknown` counts the tasks that reported nothing at all.
#[derive(Clone, Debug, Default, PartialEq, Serialize, schemars::JsonSchema)]
pub struct Spend {
    /// The role, pool, session or agent kind; absent for the total (and, by pool, for tasks in none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    pub tasks: u64,
    /// Tasks whose agent reported no usage.
    pub unknown: u64,
    /// Tasks still running, counted with their figures so far.
    pub running: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub input_tokens: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_tokens: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cache_read_tokens: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cache_write_tokens: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub turns: Option<u64>,
    /// US dollars: `cost_nano_usd` / 1e9.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
    /// The cost in billionths of a dollar, each task's rounded to one (an exact sum).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cost_nano_usd: Option<u64>,
    /// Part of the cost is agentctl's estimate from token counts and prices.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub cost_estimated: bool,
    /// Tasks that reported usage but no cost (no price known for their model).
    #[serde(skip_serializing_if = "is_zero")]
    pub cost_unknown: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// What `usage` answers.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct UsageTotals {
    /// The window's start (ms since the epoch): tasks that ended since, and those still open.
    /// Absent: every task in the home.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub since_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub by: Option<SpendBy>,
    /// One per group, the costliest first (empty unless grouped).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<Spend>,
    pub total: Spend,
}

/// A task's cost in billionths of a dollar (a cost that is no number of dollars counts none).
pub fn nano_usd(usd: f64) -> u64 {
    if usd.is_finite() && usd > 0.0 { (usd * 1e9).round() as u64 } else { 0 }
}

impl Spend {
    fn add(&mut self, usage: Option<&Usage>, open: bool) {
        fn sum(total: &mut Option<u64>, n: Option<u64>) {
            if let Some(n) = n {
                *total = Some(total.unwrap_or(0).saturating_add(n));
            }
        }
        self.tasks += 1;
        self.running += u64::from(open);
        let Some(u) = usage.filter(|u| u.is_known()) else {
            self.unknown += 1;
            return;
        };
        sum(&mut self.input_tokens, u.input_tokens);
        sum(&mut self.output_tokens, u.output_tokens);
        sum(&mut self.cache_read_tokens, u.cache_read_tokens);
        sum(&mut self.cache_write_tokens, u.cache_write_tokens);
        sum(&mut self.turns, u.turns);
        sum(&mut self.cost_nano_usd, u.cost_usd.map(nano_usd));
        self.cost_usd = self.cost_nano_usd.map(|n| n as f64 / 1e9);
        self.cost_estimated |= u.cost_usd.is_some() && u.cost_estimated;
        self.cost_unknown += u64::from(u.cost_usd.is_none());
    }
}

impl Spend {
    /// One line: `3 tasks (1 unknown, 1 running) · ~$0.0205 · in 2468, out 112, cache read 156,
    /// cache write 180 · 6 turns`.
    pub fn line(&self) -> String {
        let mut counts = Vec::new();
        counts.extend((self.unknown > 0).then(|| format!("{} unknown", self.unknown)));
        counts.extend((self.running > 0).then(|| format!("{} running", self.running)));
        let mut parts = vec![match counts.is_empty() {
            true => format!("{} tasks", self.tasks),
            false => format!("{} tasks ({})", self.tasks, counts.join(", ")),
        }];
        if let Some(c) = self.cost_usd {
            parts.push(format!("{}{}", if self.cost_estimated { "~" } else { "" }, crate::agent::usage::dollars(c)));
        }
        let tokens =
            token_split(self.input_tokens, self.output_tokens, self.cache_read_tokens, self.cache_write_tokens);
        if !tokens.is_empty() {
            parts.push(tokens);
        }
        parts.extend(self.turns.map(|t| format!("{t} turns")));
        parts.join(" · ")
    }
}

/// What the tasks that ended in the last `since` (all tasks without it) and those still open
/// spent, in total and, with `by`, per group.
pub fn usage(store: &Store, since: Option<Duration>, by: Option<SpendBy>) -> Result<UsageTotals> {
    let now = unix_ms(SystemTime::now());
    let since_ms = since.map(|d| now.saturating_sub(d.as_millis().min(u64::MAX as u128) as u64));
    let rows = store.spend_rows(since_ms.unwrap_or(0), by)?;
    let mut total = Spend::default();
    let mut groups: BTreeMap<Option<String>, Spend> = BTreeMap::new();
    for row in rows {
        // A followed-up task's turns that ended before the window are not in it.
        let usage =
            usage_of(store, &row).map(|u| crate::task::usage_since(u, row.turns.as_deref(), since_ms.unwrap_or(0)));
        total.add(usage.as_ref(), row.open);
        if by.is_some() {
            let g = groups.entry(row.group.clone()).or_insert_with(|| Spend { group: row.group, ..Spend::default() });
            g.add(usage.as_ref(), row.open);
        }
    }
    let mut groups: Vec<Spend> = groups.into_values().collect();
    groups.sort_by(|a, b| b.cost_nano_usd.cmp(&a.cost_nano_usd).then_with(|| a.group.cmp(&b.group)));
    Ok(UsageTotals { since_ms, by, groups, total })
}

/// A task's usage: its record's once it ended; while it runs, what its supervisor last
/// published (the record's if it published nothing), as `status` shows it.
fn usage_of(store: &Store, row: &SpendRow) -> Option<Usage> {
    let recorded = row.usage.as_deref().and_then(|u| serde_json::from_str::<Usage>(u).ok());
    if !row.open {
        return recorded;
    }
    recorded.or_else(|| store.usage_so_far(row.token))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn costs_add_up_exactly_in_any_order_and_unknown_is_counted_not_zeroed() {
        let costs = [0.1, 0.2, 0.3, 0.0123, 1e-10, 2.5e-9, 0.333_333_333_7];
        let usage = |c: f64| Usage { cost_usd: Some(c), output_tokens: Some(7), ..Usage::default() };
        let (mut a, mut b) = (Spend::default(), Spend::default());
        for c in costs {
            a.add(Some(&usage(c)), false);
        }
        for c in costs.iter().rev() {
            b.add(Some(&usage(*c)), true);
        }
        let nanos: u64 = costs.iter().map(|c| nano_usd(*c)).sum();
        assert_eq!((a.cost_nano_usd, b.cost_nano_usd), (Some(nanos), Some(nanos)));
        assert_eq!(nanos, 100_000_000 + 200_000_000 + 300_000_000 + 12_300_000 + 3 + 333_333_334);
        assert_eq!((a.output_tokens, a.input_tokens, a.running, b.running), (Some(49), None, 0, 7));
        a.add(None, false);
        a.add(Some(&Usage { session_id: Some("s".into()), ..Usage::default() }), false);
        a.add(Some(&Usage { input_tokens: Some(5), ..Usage::default() }), false);
        assert_eq!((a.tasks, a.unknown, a.cost_unknown, a.input_tokens), (10, 2, 1, Some(5)));
        let mut none = Spend::default();
        none.add(None, false);
        assert_eq!((none.tasks, none.unknown, none.cost_usd, none.turns), (1, 1, None, None));
        assert_eq!((nano_usd(f64::NAN), nano_usd(-1.0)), (0, 0));
    }
}
