//! A task that waits for others before it starts (`--after`): its supervisor sleeps on their
//! supervisors' sockets (`wait`: the answer comes once the final record is written, the
//! connection closes if one dies), as a pool's waiters do, with no polling and no daemon. A
//! task waited for whose supervisor died is recorded `lost` on the spot. Once each has ended,
//! the task starts if each completed (or any end will do), its command rendered again with
//! their answers (`{after}`, `{after_file}`); else it ends `cancelled`, never run, its note
//! naming the one that did not complete. Meanwhile it is `queued`, out of its pool's line, and
//! answers its own clients (a halt ends it without a run).

use std::time::Instant;

use nix::sys::signalfd::SignalFd;

use super::clients::Clients;
use super::control::Request;
use super::queue::{Calm, Slept, Waited, connect, sleep_on};
use crate::error::{Error, Result};
use crate::store::{Durability, Store, write_atomic};
use crate::task::{Awaited, TaskRecord, TaskSpec, Template, Token, answers};

/// The longest answer of a task waited for that `{after}` carries (its end is kept).
const ANSWER_MAX: u64 = 1 << 20;

/// Wait until every task `rec` waits for has ended: `Placed` when it may start (its command
/// made final), `Halted` when it ends instead (why).
pub(super) fn wait_for_tasks(
    store: &Store,
    rec: &mut TaskRecord,
    spec: &mut TaskSpec,
    signals: &SignalFd,
    clients: &mut Clients,
) -> Result<Waited> {
    let Some(after) = spec.after.clone().filter(|_| !rec.waiting_for.is_empty()) else { return Ok(Waited::Placed) };
    let what = format!("task(s) {}", rec.waiting_for.iter().map(|t| t.as_str()).collect::<Vec<_>>().join(", "));
    let mut calm = Calm::default();
    // Those found ended, kept: one pruned after it ended still counts as it ended.
    let mut ended: Vec<Awaited> = Vec::new();
    loop {
        if let Some(pause) = calm.pause()
            && let Slept::Halted(why) = sleep_on(&[], None, signals, clients, None, Some(Instant::now() + pause), &what)
        {
            return Ok(Waited::Halted(why));
        }
        let mut open = Vec::new();
        let unknown: Vec<Token> =
            after.tokens.iter().copied().filter(|t| !ended.iter().any(|e| e.token == *t)).collect();
        for t in unknown {
            let r = match crate::ops::refresh(store, t) {
                Ok(r) => r,
                Err(Error::UnknownToken { .. }) => {
                    return Ok(Waited::Halted(format!("it never ran: task {t}, which it waited for, was pruned")));
                }
                Err(e) => return Err(e),
            };
            match r.status() {
                s if s.is_final() => {
                    ended.push(Awaited { token: t, answer: answer_of(store, &r), role: r.role, status: s })
                }
                _ => open.push(t),
            }
        }
        if let Some(why) = after.refusal(&ended) {
            return Ok(Waited::Halted(why));
        }
        if open.is_empty() {
            // In the order they were named.
            ended.sort_by_key(|e| after.tokens.iter().position(|t| *t == e.token));
            made_final(store, rec, spec, &ended)?;
            rec.waiting_for.clear();
            rec.queued = spec.pool.is_some();
            store.write_record(rec)?;
            return Ok(Waited::Placed);
        }
        if open != rec.waiting_for {
            rec.waiting_for = open.clone();
            store.write_record(rec)?;
        }
        let Some(streams) = open.iter().map(|&t| connect(store, t, Request::Wait)).collect::<Option<Vec<_>>>() else {
            // One was starting or ending as we looked (no socket): look again, soon.
            calm.more();
            continue;
        };
        store.close_db();
        match sleep_on(&streams, None, signals, clients, None, None, &what) {
            Slept::Halted(why) => return Ok(Waited::Halted(why)),
            Slept::Woke { closed } if closed.is_empty() => calm = Calm::default(),
            Slept::Woke { .. } => calm.more(),
        }
    }
}

/// The answer of ended task `rec`, as its summary file holds it (its end, if it is long).
fn answer_of(store: &Store, rec: &TaskRecord) -> String {
    use std::io::{Read, Seek, SeekFrom};
    let tail = std::fs::File::open(store.summary_path(&rec.role, rec.token)).map(|mut f| {
        let len = f.metadata().map_or(0, |m| m.len());
        let _ = f.seek(SeekFrom::Start(len.saturating_sub(ANSWER_MAX)));
        let mut bytes = Vec::new();
        let _ = f.take(ANSWER_MAX).read_to_end(&mut bytes);
        bytes
    });
    let bytes = store.or_saved_answer(rec.token, tail).unwrap_or_default();
    crate::summary::keep_end(&String::from_utf8_lossy(&bytes), ANSWER_MAX as usize)
}

/// Render `spec`'s command again (an `ask`'s), now that the answers of `ended` are known:
/// `{after}` in its question or template stands for them, `{after_file}` for the file that
/// holds them.
fn made_final(store: &Store, rec: &TaskRecord, spec: &mut TaskSpec, ended: &[Awaited]) -> Result<()> {
    let text = answers(ended);
    let file = store.after_path(rec.token);
    write_atomic(&file, text.as_bytes(), Durability::Atomic)?;
    let Some(after) = spec.after.as_ref() else { return Ok(()) };
    // An ask's template with its question; a run's own command.
    let Some(command) = spec.template.clone().or_else(|| after.command.clone()) else { return Ok(()) };
    let question = after.question.clone().unwrap_or_default();
    let question = question.replace("{after}", &text).replace("{after_file}", &file.to_string_lossy());
    let template = Template { command, ..Template::default() };
    if template.uses_question_file() {
        write_atomic(&store.question_path(&rec.role, rec.token), question.as_bytes(), Durability::Atomic)?;
    }
    let mut argv = crate::ops::command_of(store, &template, &rec.role, rec.token, &question, &text)?;
    spec.input = crate::agent::first_message(spec.agent_kind(), &mut argv, &question);
    spec.argv = spec
        .backend
        .instead(&spec.argv, argv)
        .ok_or_else(|| Error::Internal(format!("task {}'s command is not one its backend made", rec.token)))?;
    store.write_spec(rec.token, spec)
}
