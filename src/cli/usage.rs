//! What clap refused, said in agentctl's error style, with the hint that fits what went wrong:
//! a command or question that needs `--` before it, a negative number given to an option.

use clap::Parser;

use super::args::Cli;
use crate::ops;

/// The options whose value is a duration, and those whose value is a count.
const DURATION_OPTIONS: [&str; 5] = ["--wait", "--timeout", "--grace", "--older-than", "--max-wait"];
const COUNT_OPTIONS: [&str; 6] = ["--limit", "--offset", "--keep", "--tail", "-n", "--result-budget"];

/// The message, then hint and usage lines.
pub fn usage_error(e: &clap::Error, args: &[String]) -> (String, Vec<String>) {
    let text = e.render().to_string();
    let mut lines = text.lines().map(str::trim).filter(|l| !l.is_empty());
    let mut message = lines.next().unwrap_or("invalid arguments").trim_start_matches("error: ").to_owned();
    let mut hints: Vec<String> = Vec::new();
    let mut listed: Vec<&str> = Vec::new();
    for line in lines {
        if let Some(tip) = line.strip_prefix("tip: ") {
            hints.push(format!("hint: {tip}"));
        } else if let Some(usage) = line.strip_prefix("Usage: ") {
            hints.push(format!("usage: {usage}"));
        } else if line.starts_with("agentctl ") && hints.last().is_some_and(|h| h.starts_with("usage: ")) {
            // A command's other form, on the usage's next line.
            hints.push(format!("usage: {line}"));
        } else if !line.starts_with("For more information") {
            // The arguments a message lists on lines of their own (those missing, say).
            listed.push(line);
        }
    }
    if !listed.is_empty() {
        message = format!("{} {}", message.trim_end_matches(':'), listed.join(", "));
    }
    let Some(bad) = (match e.get(clap::error::ContextKind::InvalidArg) {
        Some(clap::error::ContextValue::String(a)) => Some(a.clone()),
        _ => None,
    }) else {
        return (message, hints);
    };
    // clap's own advice for a value that starts with `-` (`use '-- -5'`) would make it the
    // command or the question: it is replaced by one that fits.
    let clap_dash_tip = |h: &String| h.starts_with("hint: to pass ");
    if let Some(hint) = negative_value(&bad, args) {
        hints.retain(|h| !clap_dash_tip(h));
        hints.insert(0, hint);
    } else if let Some(hint) = after_dashes(&bad, args, &hints) {
        // A question with spaces in it is no misspelled option.
        let spaced = bad.contains(char::is_whitespace);
        hints.retain(|h| !(clap_dash_tip(h) || spaced && h.contains("similar argument")));
        hints.insert(0, hint);
    }
    (message, hints)
}

/// A negative number given to an option that takes a duration or a count. clap names what it
/// took for short flags (`-5` of `-5s`): the argument is the one after such an option that
/// starts with it.
fn negative_value(bad: &str, args: &[String]) -> Option<String> {
    if !bad.strip_prefix('-').is_some_and(|n| n.starts_with(|c: char| c.is_ascii_digit() || c == '.')) {
        return None;
    }
    let at = (1..args.len()).find(|&i| args[i].starts_with(bad) && args[i - 1].starts_with('-'))?;
    let (option, bad) = (args[at - 1].as_str(), args[at].as_str());
    let example = if DURATION_OPTIONS.contains(&option) {
        "5s"
    } else if COUNT_OPTIONS.contains(&option) {
        "5"
    } else {
        return None;
    };
    Some(format!("hint: {option} takes 0 or more, like `{option} {example}`; `{bad}` is negative"))
}

/// `run`'s command, or `ask`'s question, that starts with `-` and so was taken for an option:
/// the first place for `--` that makes a command line clap takes.
fn after_dashes(bad: &str, args: &[String], hints: &[String]) -> Option<String> {
    let is = |verb: &str| hints.iter().any(|h| h.starts_with(&format!("usage: agentctl {verb} ")));
    let (run, ask) = (is("run"), is("ask"));
    if !(run || ask) || args.iter().any(|a| a == "--") {
        return None;
    }
    let fixed = (0..args.len()).filter(|&i| args[i] == bad).find_map(|at| {
        let mut fixed = vec!["agentctl".to_owned()];
        fixed.extend(args[..at].iter().cloned());
        fixed.push("--".into());
        fixed.extend(args[at..].iter().cloned());
        Cli::try_parse_from(&fixed).is_ok().then_some(fixed)
    })?;
    let fixed = ops::shell_words(&fixed);
    Some(match run {
        true => format!("hint: the command goes after `--`: {fixed}"),
        false => format!("hint: a question that starts with `-` goes after `--`: {fixed} (or give `-` and pipe it in)"),
    })
}
