//! The terminal agentctl writes to: whether it is one, how wide, and whether to colour.

use std::io::IsTerminal;

/// Whether to colour text on stdout: `--color always`, or `auto` on a terminal that is not
/// `dumb`, with `NO_COLOR` unset or empty.
pub fn colour(choice: clap::ColorChoice) -> bool {
    let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
    match choice {
        clap::ColorChoice::Always => true,
        clap::ColorChoice::Never => false,
        clap::ColorChoice::Auto => {
            !no_color && std::io::stdout().is_terminal() && std::env::var("TERM").map_or(true, |t| t != "dumb")
        }
    }
}

/// The width of the terminal on stdout; `None` for a pipe or a file (nothing is cut then).
pub fn width() -> Option<usize> {
    width_of(&std::io::stdout())
}

/// The width of the terminal `fd` is; `None` if it is none. `COLUMNS` wins where it is set, as
/// shells set it for their children.
pub fn width_of(fd: &(impl IsTerminal + std::os::fd::AsFd)) -> Option<usize> {
    if !fd.is_terminal() {
        return None;
    }
    if let Some(n) = std::env::var("COLUMNS").ok().and_then(|c| c.parse().ok()).filter(|&n: &usize| n > 0) {
        return Some(n);
    }
    rustix::termios::tcgetwinsize(fd).ok().map(|w| w.ws_col as usize).filter(|&n| n > 0)
}

/// An ANSI SGR colour for a piece of text.
#[derive(Clone, Copy)]
pub enum Paint {
    Bold,
    Red,
    Green,
    Yellow,
    Blue,
    Magenta,
}

/// The colour of a status, in `list` and `top` alike.
pub fn status_paint(s: crate::task::Status) -> Paint {
    use crate::task::Status;
    match s {
        Status::Completed => Paint::Green,
        Status::Running | Status::Starting => Paint::Blue,
        Status::Queued => Paint::Yellow,
        Status::Cancelled | Status::Expired | Status::OverBudget => Paint::Magenta,
        Status::Failed | Status::Lost => Paint::Red,
    }
}

/// `text` in `paint` when `on`, else as it is.
pub fn paint(on: bool, paint: Paint, text: &str) -> String {
    if !on {
        return text.to_owned();
    }
    let code = match paint {
        Paint::Bold => "1",
        Paint::Red => "31",
        Paint::Green => "32",
        Paint::Yellow => "33",
        Paint::Blue => "34",
        Paint::Magenta => "35",
    };
    format!("\x1b[{code}m{text}\x1b[0m")
}

/// `text` cut to `max` terminal columns (wide characters take two), the last one `…` when
/// cut; control characters (tabs, escapes) become spaces, as they would upset the columns.
pub fn fit(text: &str, max: usize) -> String {
    use unicode_width::UnicodeWidthChar;
    let clean = || text.chars().map(|c| if c.is_control() { ' ' } else { c });
    if clean().map(|c| c.width().unwrap_or(0)).sum::<usize>() <= max {
        return clean().collect();
    }
    let mut out = String::new();
    let mut used = 0;
    for c in clean() {
        let w = c.width().unwrap_or(0);
        if used + w + 1 > max {
            break;
        }
        out.push(c);
        used += w;
    }
    if max > 0 {
        out.push('…');
    }
    out
}

/// `text` safe to print on a terminal: text an agent wrote (a question, a message, a summary, a
/// note) may carry escape sequences that set the window title, clear the screen or move the
/// cursor. Control characters but newline and tab are shown in caret notation (`^[` for ESC,
/// `^M` for a carriage return), C1 controls as `�`, so what was there is visible and inert.
pub fn printable(text: &str) -> std::borrow::Cow<'_, str> {
    let harmful = |c: char| c.is_control() && c != '\n' && c != '\t';
    if !text.contains(harmful) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c as u32 {
            _ if !harmful(c) => out.push(c),
            0x7f => out.push_str("^?"),
            n @ 0..0x20 => {
                out.push('^');
                out.push(char::from(b'@' + n as u8));
            }
            _ => out.push('\u{fffd}'),
        }
    }
    std::borrow::Cow::Owned(out)
}

/// The display width of `text` in columns.
pub fn columns(text: &str) -> usize {
    unicode_width::UnicodeWidthStr::width(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_cut_to_fit() {
        assert_eq!(fit("hello", 5), "hello");
        assert_eq!(fit("hello world", 6), "hello…");
        assert_eq!(fit("héllo", 2), "h…");
        assert_eq!(fit("x", 0), "");
        assert_eq!(fit("日本語のテキスト", 7), "日本語…");
        assert_eq!(fit("a\tb\x1b[1m", 10), "a b [1m");
        assert_eq!(columns("日本"), 4);
        assert_eq!(printable("plain\n\ttext"), "plain\n\ttext");
        assert_eq!(printable("a\x1b]0;pwned\x07b\x1b[2Jc\rd\x7f\u{9b}"), "a^[]0;pwned^Gb^[[2Jc^Md^?\u{fffd}");
        assert_eq!(paint(false, Paint::Red, "x"), "x");
        assert_eq!(paint(true, Paint::Green, "ok"), "\x1b[32mok\x1b[0m");
    }
}
