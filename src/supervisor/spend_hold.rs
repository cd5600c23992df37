//! A pool's spend limit as its waiting tasks see it (`[pools.NAME] spend = { usd, per }`):
//! whether what the pool spent over the window holds new tasks back, why, and until when.

use std::time::{Duration, Instant, SystemTime};

use crate::agent::usage::dollars;
use crate::error::Result;
use crate::store::Store;
use crate::task::{Spend, TaskRecord, unix_ms};

/// How often a pool held by what its running tasks spend looks again (nothing ended in the
/// window will leave it soon enough).
const RUNNING_LOOK: Duration = Duration::from_secs(10);

/// Why the pool holds its new tasks back, and when to look again.
pub(super) struct Held {
    pub why: String,
    pub frees_at_ms: Option<u64>,
    pub look_at: Instant,
}

/// Whether pool `pool`'s spend over its window holds its new tasks back.
pub(super) fn held(store: &Store, pool: &str, spend: &Spend) -> Result<Option<Held>> {
    let Ok(per) = spend.window("") else { return Ok(None) };
    let now = unix_ms(SystemTime::now());
    let per_ms = per.as_millis() as u64;
    let spent = store.pool_spent(pool, now.saturating_sub(per_ms))?;
    let Some(frees_at) = spend.frees_at(per_ms, &spent.ended, spent.running) else { return Ok(None) };
    let total = spent.ended.iter().map(|e| e.1).sum::<f64>() + spent.running;
    let mut why = format!(
        "pool `{pool}` spent {} of its {} per {}",
        dollars(total),
        dollars(spend.usd),
        humantime::format_duration(per)
    );
    let look_at = match frees_at {
        Some(at) => {
            why.push_str(&format!(
                "; its window frees at {}",
                humantime::format_rfc3339_seconds(std::time::UNIX_EPOCH + Duration::from_millis(at))
            ));
            Instant::now() + Duration::from_millis(at.saturating_sub(now))
        }
        None => {
            why.push_str(
                "; its running tasks spent that much: it frees once they end and their spend leaves the window",
            );
            Instant::now() + RUNNING_LOOK
        }
    };
    Ok(Some(Held { why, frees_at_ms: frees_at, look_at }))
}

/// Save on the record why it waits (or that it no longer waits for spend), if that changed.
pub(super) fn note(store: &Store, rec: &mut TaskRecord, held: Option<&Held>) -> Result<()> {
    let now = held.map(|h| (h.why.clone(), h.frees_at_ms));
    let was = rec.spend_held.clone().map(|w| (w, rec.frees_at_ms));
    if now != was {
        (rec.spend_held, rec.frees_at_ms) = match now {
            Some((why, at)) => (Some(why), at),
            None => (None, None),
        };
        store.write_record(rec)?;
    }
    Ok(())
}
