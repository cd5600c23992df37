//! The `questions` table: what tasks ask their lead, each question recorded with its
//! `question` event in one transaction, answered or withdrawn once.

use std::time::SystemTime;

use rusqlite::{Connection, OptionalExtension, params};

use super::Store;
use super::db::{self, err};
use crate::error::{Error, Result};
use crate::task::{Event, EventKind, Question, QuestionState, Role, Token, question_id, unix_ms};

/// The most pending questions of one task read at once.
const MAX_PENDING: usize = 100;

fn what() -> String {
    "cannot record a question in the store".to_owned()
}

impl Store {
    /// Record that task `token` (of `role`) asks `text` of its lead in `session`, and post the
    /// `question` event there, in one transaction.
    /// `asker` names the process that waits for the answer.
    pub fn ask(
        &self,
        token: Token,
        role: &Role,
        session: &str,
        text: &str,
        choices: &[String],
        asker: &str,
    ) -> Result<Question> {
        let q = Question {
            id: question_id(),
            token,
            text: text.to_owned(),
            choices: choices.to_vec(),
            state: QuestionState::Pending,
            answer: None,
            asker: asker.to_owned(),
        };
        let conn = self.db()?;
        let tx = db::write_durably(&conn).map_err(err(what))?;
        // Its end withdraws its questions: one asked after that would wait for ever.
        let running = tx
            .query_row("SELECT 1 FROM tasks WHERE token = ?1 AND ended_at_ms IS NULL", [token.as_str()], |_| Ok(()))
            .optional()
            .map_err(err(what))?;
        if running.is_none() {
            return Err(Error::Usage(format!("task {token} has already ended; nobody waits on it")));
        }
        tx.execute(
            "INSERT INTO questions (id, token, session, text, choices, asked_at_ms, asker) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            params![
                q.id,
                token.as_str(),
                session,
                text,
                serde_json::to_string(choices).unwrap_or_default(),
                unix_ms(SystemTime::now()) as i64,
                asker
            ],
        )
        .map_err(err(what))?;
        let mut event = Event::new(EventKind::Question, session);
        event.token = Some(token);
        event.role = Some(role.clone());
        event.text = Some(text.to_owned());
        event.question_id = Some(q.id.clone());
        event.choices = choices.to_vec();
        super::rows::insert(&tx, event)?;
        tx.commit().map_err(err(what))?;
        self.events().ring(session);
        // Whoever awaits the task watches its own bell.
        self.events().ring(token.as_str());
        Ok(q)
    }

    /// The question with this id, if any.
    pub fn question(&self, id: &str) -> Result<Option<Question>> {
        let conn = self.db()?;
        read(&conn, "id = ?1", id)
    }

    /// The questions task `token` waits on, newest first (at most `MAX_PENDING`: each one is
    /// a process of the task blocked in `ask-lead`).
    pub fn pending_questions(&self, token: Token) -> Result<Vec<Question>> {
        let conn = self.db()?;
        read_all(&conn, "token = ?1 AND state = 0", token.as_str(), MAX_PENDING)
    }

    /// Settle pending question `id` as answered with `answer`, or withdrawn (`None`). `None`
    /// when it was not pending any more (someone settled it first).
    pub fn settle_question(&self, id: &str, answer: Option<&str>) -> Result<Option<Question>> {
        let conn = self.db()?;
        let tx = db::write_durably(&conn).map_err(err(what))?;
        let state = if answer.is_some() { QuestionState::Answered } else { QuestionState::Withdrawn };
        let changed = tx
            .execute(
                "UPDATE questions SET state = ?2, answer = ?3, settled_at_ms = ?4 WHERE id = ?1 AND state = 0",
                params![id, state.code(), answer, unix_ms(SystemTime::now()) as i64],
            )
            .map_err(err(what))?;
        let q = read(&tx, "id = ?1", id)?;
        if changed == 1 {
            // Settled: its event no longer asks anything of whoever has not taken it yet.
            tx.execute(
                "UPDATE events SET state = 2 WHERE kind = 'question' AND json_extract(body, '$.question_id') = ?1",
                [id],
            )
            .map_err(err(what))?;
        }
        tx.commit().map_err(err(what))?;
        if let Some(q) = &q {
            self.events().ring(q.token.as_str());
        }
        Ok(q.filter(|_| changed == 1))
    }

    /// Withdraw the questions task `t` still waits on (it ended).
    pub(super) fn withdraw_questions(tx: &Connection, t: Token) -> Result<usize> {
        let n = tx
            .execute(
                "UPDATE questions SET state = 2, settled_at_ms = ?2 WHERE token = ?1 AND state = 0",
                params![t.as_str(), unix_ms(SystemTime::now()) as i64],
            )
            .map_err(err(what))?;
        if n > 0 {
            tx.execute(
                "UPDATE events SET state = 2 WHERE kind = 'question' AND token = ?1 AND state < 2 \
                 AND json_extract(body, '$.question_id') IS NOT NULL",
                [t.as_str()],
            )
            .map_err(err(what))?;
        }
        Ok(n)
    }

    /// Remove the questions of `tasks` (pruned).
    pub(super) fn remove_questions(tx: &Connection, tasks: &[Token]) -> Result<()> {
        let mut stmt = tx.prepare_cached("DELETE FROM questions WHERE token = ?1").map_err(err(what))?;
        for t in tasks {
            stmt.execute([t.as_str()]).map_err(err(what))?;
        }
        Ok(())
    }
}

/// The newest question where `condition` (on `?1` = `value`) holds.
fn read(conn: &Connection, condition: &str, value: &str) -> Result<Option<Question>> {
    Ok(read_all(conn, condition, value, 1)?.into_iter().next())
}

/// Up to `limit` questions where `condition` (on `?1` = `value`) holds, newest first.
fn read_all(conn: &Connection, condition: &str, value: &str, limit: usize) -> Result<Vec<Question>> {
    let sql = format!(
        "SELECT id, token, text, choices, state, answer, asker FROM questions WHERE {condition} \
         ORDER BY asked_at_ms DESC, id DESC LIMIT {limit}"
    );
    let mut stmt = conn.prepare_cached(&sql).map_err(err(what))?;
    let rows = stmt
        .query_map([value], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, String>(2)?,
                r.get::<_, String>(3)?,
                r.get::<_, i64>(4)?,
                r.get::<_, Option<String>>(5)?,
                r.get::<_, String>(6)?,
            ))
        })
        .map_err(err(what))?;
    let mut out = Vec::new();
    for row in rows {
        let (id, token, text, choices, state, answer, asker) = row.map_err(err(what))?;
        let token = Token::parse(&token).map_err(|_| Error::Internal(format!("question {id} names no task")))?;
        let choices = serde_json::from_str(&choices).unwrap_or_default();
        out.push(Question { id, token, text, choices, state: QuestionState::from_code(state), answer, asker });
    }
    Ok(out)
}
