//! What each pool can take now, for a lead deciding before it delegates: its places, how many
//! of its tasks run and wait, and what it spent of its spend limit's window.

use std::path::Path;
use std::time::SystemTime;

use serde::Serialize;

use crate::agents::{Agents, DEFAULT_POOL};
use crate::error::Result;
use crate::store::Store;
use crate::task::unix_ms;

/// One pool as it stands.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct PoolCapacity {
    pub pool: String,
    /// How many of its tasks may run at once.
    pub places: u32,
    /// Its tasks holding a place, and those waiting for one.
    pub running: u32,
    pub queued: u32,
    /// Its spend limit, and what it spent in the window, if it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spend: Option<PoolSpend>,
}

#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct PoolSpend {
    pub usd: f64,
    pub per: String,
    pub spent_usd: f64,
}

/// Every pool the agents file in force (`agents_file`, else the home's or the user's) defines,
/// and every other with an open task, by name. An agents file or store that cannot be read now
/// gives no pools: a listing's tasks still come.
pub fn capacity(store: &Store, agents_file: Option<&Path>) -> Vec<PoolCapacity> {
    Agents::load(store.home(), agents_file).and_then(|agents| pools(store, &agents)).unwrap_or_default()
}

fn pools(store: &Store, agents: &Agents) -> Result<Vec<PoolCapacity>> {
    let open = store.pool_counts()?;
    let mut names: Vec<String> = agents.pool_names().into_iter().map(str::to_owned).collect();
    names.extend(open.keys().cloned());
    names.sort();
    names.dedup();
    let now = unix_ms(SystemTime::now());
    let mut out = Vec::new();
    for name in names {
        let (running, queued) = open.get(&name).copied().unwrap_or_default();
        if name == DEFAULT_POOL && running + queued == 0 && agents.defined_parallel(&name).is_none() {
            continue;
        }
        let spend = match agents.pool_spend(&name) {
            Some(s) => {
                let per = s.window("").unwrap_or_default();
                let spent = store.pool_spent(&name, now.saturating_sub(per.as_millis() as u64))?;
                let spent_usd = spent.ended.iter().map(|(_, c)| c).sum::<f64>() + spent.running;
                Some(PoolSpend { usd: s.usd, per: s.per, spent_usd })
            }
            None => None,
        };
        out.push(PoolCapacity { places: agents.parallel(&name), pool: name, running, queued, spend });
    }
    Ok(out)
}

impl PoolCapacity {
    /// One line: `pool p: 2 of 4 running, 1 queued, $1.20 of $50 spent per 1d`.
    pub fn line(&self) -> String {
        let mut s = format!("pool {}: {} of {} running, {} queued", self.pool, self.running, self.places, self.queued);
        if let Some(sp) = &self.spend {
            s.push_str(&format!(", ${:.2} of ${} spent per {}", sp.spent_usd, sp.usd, sp.per));
        }
        s
    }
}
