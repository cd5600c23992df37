//! What an agent spent and does, as the CLI's tables and lines say it: the cost cell, the step.

use crate::agent::Usage;
use crate::ops::TaskView;

/// The cost cell of a table: `$0.0123`, `~$0.0123` when estimated, `-` when unknown.
pub fn cost(u: Option<&Usage>) -> String {
    crate::ops::cost_text(u).unwrap_or_else(|| "-".to_owned())
}

/// What a row says of a task that is not yet ended: the step its agent is on, if known.
pub fn step(v: &TaskView) -> Option<&str> {
    v.step.as_ref().filter(|_| !v.status.is_final()).map(|s| s.what.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cost_cell_says_unknown_estimated_and_reported_apart() {
        assert_eq!(cost(None), "-");
        assert_eq!(cost(Some(&Usage { turns: Some(2), ..Usage::default() })), "-");
        let own = Usage { cost_usd: Some(0.0123), ..Usage::default() };
        assert_eq!(cost(Some(&own)), "$0.0123");
        assert_eq!(cost(Some(&Usage { cost_estimated: true, ..own })), "~$0.0123");
        assert_eq!(cost(Some(&Usage { cost_usd: Some(12.345), ..Usage::default() })), "$12.35");
    }
}
