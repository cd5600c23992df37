//! `usage` as text: a line per group and the total, then what the window held.

use std::io::{self, Write};
use std::time::{Duration, UNIX_EPOCH};

use crate::agent::usage::{count, dollars};
use crate::ops::{Spend, UsageTotals};

/// Print `t` as a table on `w`.
pub fn write(w: &mut dyn Write, t: &UsageTotals) -> io::Result<()> {
    let head = t.by.map_or("", |b| b.as_str()).to_uppercase();
    let name = |s: &Spend| match (&s.group, t.by) {
        (Some(g), _) => g.clone(),
        (None, Some(crate::ops::SpendBy::Pool)) => "(none)".to_owned(),
        (None, _) => "(unknown)".to_owned(),
    };
    let mut rows: Vec<(String, &Spend)> = t.groups.iter().map(|g| (name(g), g)).collect();
    rows.push(("total".to_owned(), &t.total));
    let name_w = rows.iter().map(|(n, _)| n.chars().count()).chain([head.len(), 5]).max().unwrap_or(5).min(40);
    writeln!(
        w,
        "{head:<name_w$}  {:>5}  {:>7}  {:>7}  {:>7}  {:>10}  {:>11}  {:>5}  {:>9}",
        "TASKS", "UNKNOWN", "INPUT", "OUTPUT", "CACHE READ", "CACHE WRITE", "TURNS", "COST"
    )?;
    // A figure no task reported is `-`, never 0.
    let n = |v: Option<u64>| v.map_or_else(|| "-".to_owned(), count);
    for (name, s) in &rows {
        let cost = s
            .cost_usd
            .map_or_else(|| "-".to_owned(), |c| format!("{}{}", if s.cost_estimated { "~" } else { "" }, dollars(c)));
        let name = crate::cli::term::fit(name, name_w);
        writeln!(
            w,
            "{name:<name_w$}  {:>5}  {:>7}  {:>7}  {:>7}  {:>10}  {:>11}  {:>5}  {cost:>9}",
            s.tasks,
            s.unknown,
            n(s.input_tokens),
            n(s.output_tokens),
            n(s.cache_read_tokens),
            n(s.cache_write_tokens),
            s.turns.map_or_else(|| "-".to_owned(), |t| t.to_string()),
        )?;
    }
    let window = match t.since_ms {
        Some(ms) => {
            let at = humantime::format_rfc3339_seconds(UNIX_EPOCH + Duration::from_millis(ms));
            format!("tasks that ended since {at}, and those not yet ended")
        }
        None => "every task of the home".to_owned(),
    };
    writeln!(w, "{window}")?;
    if t.total.unknown > 0 || t.total.cost_estimated {
        writeln!(w, "UNKNOWN: tasks whose agent reported no usage; ~: part of the cost is estimated")?;
    }
    if t.total.running > 0 {
        writeln!(w, "{} task(s) still running count with what they spent so far", t.total.running)?;
    }
    if t.total.cost_unknown > 0 {
        writeln!(
            w,
            "{} task(s) reported tokens but no cost: no price for their model ([prices] in agents.toml)",
            t.total.cost_unknown
        )?;
    }
    Ok(())
}
