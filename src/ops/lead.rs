//! What an agent's own commands (`ask-lead`, `notify`, `inbox`) reach: its home, or in a
//! sandbox, which hides the home, its supervisor through the gateway (`ops::gateway`). A
//! front-end calls these and need not know which.

use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::time::Duration;

use super::converse::{Asked, ask_lead, inbox};
use super::events::{Holder, delivered, notice, notify, undelivered};
use super::gateway;
use super::posting::post_lines;
use crate::error::{IoContext, Result};
use crate::store::Store;
use crate::task::Event;

/// `ask_lead`, for the task this process runs in, of home `home`.
pub async fn ask_lead_from(home: &Path, text: &str, choices: &[String], limit: Option<Duration>) -> Result<Asked> {
    match gateway::inside() {
        true => gateway::ask_lead(text.to_owned(), choices.to_vec(), limit),
        false => ask_lead(&Store::existing(home)?, text, choices, limit).await,
    }
}

/// Post `message`, else each line of `input`, to `session` (else the task's own) of home
/// `home`, `posted` told of each event posted.
pub fn notify_from(
    home: &Path,
    (session, question): (Option<&str>, bool),
    message: Option<&str>,
    input: impl Read,
    mut posted: impl FnMut(&Event),
) -> Result<()> {
    if gateway::inside() {
        let mut post = |text: String| -> Result<()> {
            posted(&gateway::notify(session.map(str::to_owned), question, text)?);
            Ok(())
        };
        match message {
            Some(message) => post(message.to_owned())?,
            None => {
                for line in BufReader::new(input).lines() {
                    post(line.ctx(|| "cannot read stdin".into())?)?;
                }
            }
        }
        return Ok(());
    }
    let store = Store::open(home)?;
    match message {
        Some(message) => posted(&notify(&store, session, question, message)?),
        None => {
            let notice = notice(&store, session, question)?;
            post_lines(&store, &notice, input, posted)?;
        }
    }
    Ok(())
}

/// The next message sent to the task this process runs in, waiting up to `limit`, handed to
/// `write`: it counts as read once written (else the next `inbox` gets it again).
pub async fn inbox_from<T>(
    home: &Path,
    limit: Duration,
    write: impl FnOnce(&Event) -> std::io::Result<T>,
) -> Result<T> {
    if gateway::inside() {
        // Delivered as its supervisor wrote it to this process.
        return write(&gateway::inbox(limit)?).ctx(|| "cannot write to stdout".into());
    }
    let store = Store::existing(home)?;
    let holder = Holder::new(0);
    let event = inbox(&store, limit, &holder).await?;
    match write(&event) {
        Ok(written) => {
            delivered(&store, &holder, None)?;
            Ok(written)
        }
        Err(e) => {
            undelivered(&store, &holder, None)?;
            Err(e).ctx(|| "cannot write to stdout".into())
        }
    }
}
