//! Checking an agents file once it parses: every setting that means nothing or is out of range
//! is refused when the file is read, naming its section (`[agents.NAME]`, `[pools.NAME]`,
//! `[prices."MODEL"]`).

use super::{AgentsFile, MOST_PARALLEL, PoolSettings};
use crate::agent::{Price, Prices};
use crate::task::{Limits, Role, Template};

/// Refuse the first bad setting of `file`, saying where it is.
pub(super) fn file(file: &AgentsFile) -> Result<(), String> {
    let named = file.agents.iter().map(|(n, t)| (format!("[agents.{n}]"), Some(n), t));
    for (section, name, t) in named.chain(file.default.iter().map(|t| ("[default]".to_owned(), None, t))) {
        if let Some(name) = name {
            Role::parse(name).map_err(|e| e.to_string())?;
        }
        template(t, &section)?;
    }
    for (name, pool) in &file.pools {
        self::pool(name, pool)?;
    }
    if let Some(t) = &file.hooks.timeout {
        crate::task::parse_duration(t)
            .map_err(|e| format!("[hooks] timeout: {}", e.message(crate::error::Frontend::Cli)))?;
    }
    hook(file.hooks.on_end.as_deref(), "[hooks]")?;
    prices(&file.prices)
}

/// An `on_end` command: a program, with its arguments.
fn hook(argv: Option<&[String]>, section: &str) -> Result<(), String> {
    match argv {
        Some(argv) if argv.first().is_none_or(|p| p.is_empty()) => Err(format!(
            "{section} on_end is empty; give the command to run at each task's end, like on_end = [\"notify-send\", \"agentctl\"]"
        )),
        _ => Ok(()),
    }
}

/// A template's limits, placeholders, timeout and budget.
fn template(t: &Template, section: &str) -> Result<(), String> {
    t.limits(section)?;
    t.check_placeholders(section)?;
    t.check_timeout(section)?;
    hook(t.on_end.as_deref(), section)?;
    t.budget.map_or(Ok(()), |b| b.check(section))
}

/// A pool's name, `parallel`, limits, budget and spend.
fn pool(name: &str, pool: &PoolSettings) -> Result<(), String> {
    Role::parse(name).map_err(|e| format!("pool names follow role names' rules: {e}"))?;
    let section = format!("[pools.{name}]");
    if !(1..=MOST_PARALLEL).contains(&pool.parallel) {
        return Err(format!("{section} parallel = {}; give 1 to {MOST_PARALLEL}", pool.parallel));
    }
    Limits::from_settings(pool.memory, pool.cpus, pool.pids, &section)?;
    if let Some(spend) = &pool.spend {
        spend.window(&section)?;
    }
    hook(pool.on_end.as_deref(), &section)?;
    pool.budget.map_or(Ok(()), |b| b.check(&section))
}

/// Each price a number of dollars, 0 or more (TOML can write `nan`, `inf` and `-1`).
fn prices(prices: &Prices) -> Result<(), String> {
    for (model, p) in prices {
        let Price { input, output, cache_read, cache_write } = *p;
        let all = [
            ("input", Some(input)),
            ("output", Some(output)),
            ("cache_read", cache_read),
            ("cache_write", cache_write),
        ];
        for (key, value) in all {
            if let Some(v) = value.filter(|v| !(v.is_finite() && *v >= 0.0)) {
                return Err(format!(
                    "[prices.{model:?}] {key} = {v}; give US dollars per million tokens, 0 or more, like {key} = 1.25"
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(toml: &str) -> Result<(), String> {
        file(&toml::from_str(toml).map_err(|e| e.to_string())?)
    }

    #[test]
    fn prices_are_dollars_per_million_tokens_never_negative_or_nan() {
        let ok = "[prices.\"gpt-5.5\"]\ninput = 1.25\noutput = 10\ncache_read = 0.125\n[prices.free]\ninput = 0\noutput = 0\n";
        assert_eq!(check(ok), Ok(()));
        let f: AgentsFile = toml::from_str(ok).unwrap();
        assert_eq!(
            f.prices["gpt-5.5"],
            Price { input: 1.25, output: 10.0, cache_read: Some(0.125), cache_write: None }
        );
        for (toml, says) in [
            ("[prices.m]\ninput = -1.0\noutput = 1\n", "[prices.\"m\"] input = -1; give US dollars per million tokens"),
            ("[prices.m]\ninput = 1\noutput = nan\n", "[prices.\"m\"] output = NaN"),
            ("[prices.m]\ninput = 1\noutput = 1\ncache_write = inf\n", "cache_write = inf"),
            ("[prices.m]\ninput = 1\ncache_read = -0.5\noutput = 1\n", "cache_read = -0.5"),
        ] {
            assert!(check(toml).unwrap_err().contains(says), "{toml}: {:?}", check(toml));
        }
        // A missing price or an unknown key is the parser's to refuse.
        assert!(check("[prices.m]\ninput = 1\n").unwrap_err().contains("missing field `output`"));
        assert!(
            check("[prices.m]\ninput = 1\noutput = 1\ncached = 1\n").unwrap_err().contains("unknown field `cached`")
        );
    }

    #[test]
    fn budgets_of_templates_and_pools_are_checked() {
        let ok = "[agents.w]\ncommand = [\"x\"]\nbudget = { usd = 2, tokens = 2_000_000, turns = 40 }\n\
                  [pools.p]\nbudget = { usd = 0.5 }\n";
        assert_eq!(check(ok), Ok(()));
        let f: AgentsFile = toml::from_str(ok).unwrap();
        assert_eq!(f.agents["w"].budget.unwrap().usd, Some(2.0));
        assert_eq!(f.pools["p"].budget.unwrap().usd, Some(0.5));
        for (toml, says) in [
            ("[agents.w]\ncommand = [\"x\"]\nbudget = { usd = -2 }\n", "[agents.w]: budget usd must be a positive"),
            ("[default]\ncommand = [\"x\"]\nbudget = { turns = 0 }\n", "[default]: a budget of 0 tokens or turns"),
            ("[pools.p]\nbudget = { usd = nan }\n", "[pools.p]: budget usd must be a positive"),
            ("[pools.p]\nbudget = { tokens = 0 }\n", "[pools.p]: a budget of 0"),
            ("[pools.p]\nbudget = { dollars = 1 }\n", "unknown field `dollars`"),
            ("[pools.p]\nbudget = { tokens = -1 }\n", "invalid value"),
        ] {
            assert!(check(toml).unwrap_err().contains(says), "{toml}: {:?}", check(toml));
        }
    }
}
