//! What an agent spent: tokens, turns, model and cost, as its stream reports them. A figure
//! the agent never reported is unknown (`None`), never zero.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// One task's usage.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Usage {
    /// Input tokens not read from the prompt cache.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_tokens: Option<u64>,
    /// Input tokens read from the prompt cache.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_read_tokens: Option<u64>,
    /// Input tokens written to the prompt cache.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_write_tokens: Option<u64>,
    /// Model calls (Claude Code, OpenCode) or turns (Codex), as the agent counts them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turns: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// In US dollars: as the agent reported it, or estimated from a price table.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
    /// The cost is agentctl's estimate from token counts and `[prices]`, not the agent's own.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cost_estimated: bool,
    /// The agent's own id for the conversation (to resume it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
}

/// What a model's tokens cost, in US dollars per million (`[prices."MODEL"]` in agents.toml).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Price {
    pub input: f64,
    pub output: f64,
    /// Unset: the input price.
    pub cache_read: Option<f64>,
    /// Unset: the input price.
    pub cache_write: Option<f64>,
}

/// Prices by model name.
pub type Prices = BTreeMap<String, Price>;

impl Usage {
    /// Its counts, in the order tests compare them: input, output, cache read, cache write, turns.
    #[cfg(test)]
    pub fn figures(&self) -> [Option<u64>; 5] {
        [self.input_tokens, self.output_tokens, self.cache_read_tokens, self.cache_write_tokens, self.turns]
    }

    /// Whether the agent reported anything of what it spent.
    pub fn is_known(&self) -> bool {
        self.tokens().is_some() || self.cost_usd.is_some() || self.turns.is_some()
    }

    /// All its tokens (input, output and cache), if it reported any.
    pub fn tokens(&self) -> Option<u64> {
        let all = [self.input_tokens, self.output_tokens, self.cache_read_tokens, self.cache_write_tokens];
        all.into_iter().flatten().reduce(|a, b| a.saturating_add(b))
    }

    /// Fill in the cost from `prices` when the agent reports tokens but no cost and its model
    /// has a price; marked estimated.
    pub fn estimate(&mut self, prices: &Prices) {
        if self.cost_usd.is_some() && !self.cost_estimated {
            return;
        }
        let Some(price) = self.model.as_deref().and_then(|m| price_of(m, prices)) else { return };
        if self.tokens().is_none() {
            return;
        }
        let n = |t: Option<u64>| t.unwrap_or(0) as f64 / 1e6;
        let cost = n(self.input_tokens) * price.input
            + n(self.output_tokens) * price.output
            + n(self.cache_read_tokens) * price.cache_read.unwrap_or(price.input)
            + n(self.cache_write_tokens) * price.cache_write.unwrap_or(price.input);
        self.cost_usd = Some(cost);
        self.cost_estimated = true;
    }

    /// This usage with `other`'s added (for totals): a figure known in either is known.
    pub fn add(&mut self, other: &Usage) {
        fn sum<T: std::ops::Add<Output = T> + Copy>(a: &mut Option<T>, b: Option<T>) {
            *a = match (*a, b) {
                (Some(x), Some(y)) => Some(x + y),
                (x, y) => x.or(y),
            };
        }
        sum(&mut self.input_tokens, other.input_tokens);
        sum(&mut self.output_tokens, other.output_tokens);
        sum(&mut self.cache_read_tokens, other.cache_read_tokens);
        sum(&mut self.cache_write_tokens, other.cache_write_tokens);
        sum(&mut self.turns, other.turns);
        sum(&mut self.cost_usd, other.cost_usd);
        self.cost_estimated |= other.cost_estimated;
    }

    /// What this usage has beyond `earlier` (a total less its earlier part): each figure known
    /// in both is the difference, never below zero; the rest is this one's.
    pub fn minus(&self, earlier: &Usage) -> Usage {
        fn less<T: PartialOrd + std::ops::Sub<Output = T> + Copy + Default>(a: Option<T>, b: Option<T>) -> Option<T> {
            match (a, b) {
                (Some(x), Some(y)) if x > y => Some(x - y),
                (Some(_), Some(_)) => Some(T::default()),
                (x, _) => x,
            }
        }
        Usage {
            input_tokens: less(self.input_tokens, earlier.input_tokens),
            output_tokens: less(self.output_tokens, earlier.output_tokens),
            cache_read_tokens: less(self.cache_read_tokens, earlier.cache_read_tokens),
            cache_write_tokens: less(self.cache_write_tokens, earlier.cache_write_tokens),
            turns: less(self.turns, earlier.turns),
            cost_usd: less(self.cost_usd, earlier.cost_usd),
            ..self.clone()
        }
    }

    /// One short line for listings: `$0.0123 · 12.3k tokens · 3 turns`, `unknown` when nothing
    /// was reported; an estimated cost is marked `~`.
    pub fn brief(&self) -> String {
        let mut parts = Vec::new();
        if let Some(c) = self.cost_usd {
            parts.push(format!("{}{}", if self.cost_estimated { "~" } else { "" }, dollars(c)));
        }
        if let Some(t) = self.tokens() {
            parts.push(format!("{} tokens", count(t)));
        }
        if let Some(n) = self.turns {
            parts.push(format!("{n} turn{}", if n == 1 { "" } else { "s" }));
        }
        if parts.is_empty() { "unknown".into() } else { parts.join(" · ") }
    }
}

/// The price of `model`: the table's entry for it, else for the longest name it starts with
/// (`claude-opus` serves `claude-opus-4-8`), else the list price of its Claude family (Claude
/// Code reports its own cost only at its end: this estimates it while it runs).
fn price_of(model: &str, prices: &Prices) -> Option<Price> {
    if let Some(p) = prices.get(model) {
        return Some(*p);
    }
    let by_prefix = prices.iter().filter(|(k, _)| model.starts_with(k.as_str())).max_by_key(|(k, _)| k.len());
    if let Some((_, p)) = by_prefix {
        return Some(*p);
    }
    // USD per million tokens; the cache read at a tenth, the cache write at 1.25 times the input.
    let (input, output) = match model {
        m if m.starts_with("claude-opus") => (5.0, 25.0),
        m if m.starts_with("claude-sonnet") => (3.0, 15.0),
        m if m.starts_with("claude-haiku") => (1.0, 5.0),
        _ => return None,
    };
    Some(Price { input, output, cache_read: Some(input / 10.0), cache_write: Some(input * 1.25) })
}

/// Token counts as a line shows them, the unknown ones left out: `in 330, out 60, cache read 800`.
pub fn token_split(
    input: Option<u64>,
    output: Option<u64>,
    cache_read: Option<u64>,
    cache_write: Option<u64>,
) -> String {
    let split = [("in", input), ("out", output), ("cache read", cache_read), ("cache write", cache_write)];
    split.iter().filter_map(|(k, n)| n.map(|n| format!("{k} {n}"))).collect::<Vec<_>>().join(", ")
}

/// A cost as people read it: four decimals below a dollar, two above.
pub fn dollars(usd: f64) -> String {
    if usd < 1.0 { format!("${usd:.4}") } else { format!("${usd:.2}") }
}

/// A count of tokens, shortened: `950`, `12.3k`, `1.70M`.
pub fn count(n: u64) -> String {
    match n {
        0..1_000 => n.to_string(),
        1_000..1_000_000 => format!("{:.1}k", n as f64 / 1e3),
        _ => format!("{:.2}M", n as f64 / 1e6),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_is_never_zero_and_totals_keep_what_is_known() {
        let none = Usage::default();
        assert!(!none.is_known());
        assert_eq!(none.tokens(), None);
        assert_eq!(none.brief(), "unknown");
        let a = Usage { input_tokens: Some(100), output_tokens: Some(20), turns: Some(2), ..Usage::default() };
        let b = Usage { cost_usd: Some(0.5), cache_read_tokens: Some(1000), ..Usage::default() };
        let mut t = a.clone();
        t.add(&b);
        assert_eq!(t.tokens(), Some(1120));
        assert_eq!((t.turns, t.cost_usd), (Some(2), Some(0.5)));
        assert_eq!(t.brief(), "$0.5000 · 1.1k tokens · 2 turns");
    }

    #[test]
    fn a_cost_is_estimated_only_from_a_known_price_and_says_so() {
        let prices: Prices =
            [("gpt-5.5".to_owned(), Price { input: 1.25, output: 10.0, cache_read: Some(0.125), cache_write: None })]
                .into();
        let mut u = Usage {
            input_tokens: Some(1_000_000),
            output_tokens: Some(100_000),
            cache_read_tokens: Some(2_000_000),
            model: Some("gpt-5.5".into()),
            ..Usage::default()
        };
        u.estimate(&prices);
        assert_eq!(u.cost_usd, Some(1.25 + 1.0 + 0.25));
        assert!(u.cost_estimated);
        assert_eq!(u.brief(), "~$2.50 · 3.10M tokens");
        // The agent's own cost stands; an unknown model stays unknown.
        let mut own = Usage { cost_usd: Some(0.01), ..u.clone() };
        own.cost_estimated = false;
        own.estimate(&prices);
        assert_eq!(own.cost_usd, Some(0.01));
        let mut other = Usage { model: Some("other".into()), cost_usd: None, cost_estimated: false, ..u.clone() };
        other.estimate(&prices);
        assert_eq!(other.cost_usd, None);
        // A Claude model is priced by its family unless the table says otherwise.
        let claude = Usage {
            model: Some("claude-opus-4-8".into()),
            input_tokens: Some(10),
            output_tokens: Some(20),
            ..Usage::default()
        };
        let mut c = claude.clone();
        c.estimate(&Prices::new());
        assert!((c.cost_usd.unwrap() - 0.00055).abs() < 1e-12 && c.cost_estimated, "{c:?}");
        let mut c = claude;
        c.estimate(&[("claude-opus".to_owned(), Price { input: 1e6, output: 0.0, ..Price::default() })].into());
        assert_eq!(c.cost_usd, Some(10.0));
    }
}
