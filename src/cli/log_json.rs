//! `logs --json`'s output as it streams: the log as one object's `text`, or (with `--follow`)
//! one object per line, without ever holding the whole log.

use std::io::{self, Write};
use std::process::ExitCode;

use serde_json::json;

use crate::ops::{LINE_PIECE, TaskView};
use crate::task::Token;

/// `logs --json`: the output streamed as the `text` field of one object (no copy of the whole
/// log is held), the task's fields after it once known. `write` streams the text. An error
/// after the text began ends the same object, with the error's fields; one before it is the
/// caller's to print.
pub fn log_json(
    out: &mut dyn Write,
    write: impl FnOnce(&mut dyn Write) -> crate::error::Result<TaskView>,
) -> crate::error::Result<ExitCode> {
    use crate::error::IoContext;
    let mut text = JsonText { out: &mut *out, partial: Vec::new(), begun: false };
    let (rest, code) = match write(&mut text) {
        Ok(v) => (
            json!({
                "token": v.token, "role": v.role, "status": v.status, "line_count": v.line_count,
                "log_path": v.log_path,
            }),
            ExitCode::SUCCESS,
        ),
        Err(e) if text.begun => {
            eprintln!("agentctl: error: {e}");
            let fields = json!({ "error": e.to_string(), "kind": e.kind(), "exit_code": e.exit_code() });
            (fields, ExitCode::from(e.exit_code()))
        }
        Err(e) => return Err(e),
    };
    let rest = rest.to_string();
    let end = format!("\",{}\n", &rest[1..]);
    text.finish()
        .and_then(|()| out.write_all(end.as_bytes()))
        .and_then(|()| out.flush())
        .ctx(|| "cannot write to stdout".into())?;
    Ok(code)
}

/// Writes text into a JSON string, escaped, as it comes (UTF-8 cut between writes is joined),
/// after `{"text":"` on the first write.
struct JsonText<'a> {
    out: &'a mut dyn Write,
    partial: Vec<u8>,
    begun: bool,
}

impl JsonText<'_> {
    fn finish(&mut self) -> io::Result<()> {
        let rest = std::mem::take(&mut self.partial);
        self.escape(&String::from_utf8_lossy(&rest))
    }

    fn escape(&mut self, s: &str) -> io::Result<()> {
        if !self.begun {
            self.begun = true;
            self.out.write_all(b"{\"text\":\"")?;
        }
        let quoted = serde_json::to_string(s).map_err(io::Error::other)?;
        self.out.write_all(&quoted.as_bytes()[1..quoted.len() - 1])
    }
}

impl Write for JsonText<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.partial.extend_from_slice(buf);
        let valid = match std::str::from_utf8(&self.partial) {
            Ok(_) => self.partial.len(),
            // An incomplete character at the end waits for the next write; anything else is
            // replaced.
            Err(e) if e.error_len().is_none() => e.valid_up_to(),
            Err(_) => self.partial.len(),
        };
        let text = String::from_utf8_lossy(&self.partial[..valid]).into_owned();
        self.partial.drain(..valid);
        self.escape(&text)?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }
}

/// `logs --follow --json`: one `{"token", "line"}` object per output line; a line longer than
/// `LINE_PIECE` comes in several objects, all but the last with `"partial": true`.
pub struct JsonLines<'a> {
    token: Token,
    out: &'a mut dyn Write,
    pending: Vec<u8>,
}

impl<'a> JsonLines<'a> {
    pub fn new(token: Token, out: &'a mut dyn Write) -> JsonLines<'a> {
        JsonLines { token, out, pending: Vec::new() }
    }

    fn emit(&mut self, line: &[u8], partial: bool) -> io::Result<()> {
        let line = String::from_utf8_lossy(line);
        if partial {
            writeln!(self.out, "{}", json!({ "token": self.token, "line": line, "partial": true }))
        } else {
            writeln!(self.out, "{}", json!({ "token": self.token, "line": line }))
        }
    }

    /// Emit a last line without a newline, if any.
    pub fn finish(mut self) -> io::Result<()> {
        if !self.pending.is_empty() {
            let rest = std::mem::take(&mut self.pending);
            self.emit(&rest, false)?;
        }
        self.out.flush()
    }
}

impl Write for JsonLines<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.pending.extend_from_slice(buf);
        while let Some(i) = memchr::memchr(b'\n', &self.pending) {
            let line: Vec<u8> = self.pending.drain(..=i).take(i).collect();
            self.emit(&line, false)?;
        }
        if self.pending.len() > LINE_PIECE {
            // Cut at a character boundary: the text is UTF-8 (cleaned) or, raw, anything.
            let cut = match std::str::from_utf8(&self.pending) {
                Err(e) if e.error_len().is_none() && e.valid_up_to() > 0 => e.valid_up_to(),
                _ => self.pending.len(),
            };
            let piece: Vec<u8> = self.pending.drain(..cut).collect();
            self.emit(&piece, true)?;
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }
}
