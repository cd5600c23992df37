//! The supervisor's control socket protocol: one request line, then reply lines.
//!
//! `wait`        -> `done` once the final record is written (or EOF if the supervisor died)
//! `queue`       -> `done` once the task is not waiting for a place in its pool any more (it
//!                  has one, or it ended); at once if it was not waiting
//! `front [N]`   -> `done` once the task is among the first N (1 if not given) in line for a
//!                  place in its pool, or not waiting any more; at once if it is either
//! `place`       -> `done` once the task gives up its place in its pool (it ended, or went back
//!                  to wait after a rate-limited run); at once if it holds none
//! `halt <ms>`   -> `ok` as soon as the supervisor has taken the request, then stops the task
//!                  (SIGTERM, then SIGKILL after <ms>); `done` once nothing of it is left alive
//!                  and the final record is written
//! `say <JSON string>` -> `ok` once the message is the agent's to read (on its stdin, after the
//!                  ones before it); `closed` when its agent reads no messages, or has
//!                  answered them all and its input is closed

use std::io;
use std::path::Path;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::UnixStream;

/// What a client asks of the supervisor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Request {
    Wait,
    Queue,
    Front { within: u32 },
    Place,
    Halt { grace: Duration },
}

impl Request {
    /// The request as a protocol line.
    pub fn line(self) -> String {
        match self {
            Request::Wait => "wait\n".to_owned(),
            Request::Queue => "queue\n".to_owned(),
            // Said as releases before `N` said it, where they understand it.
            Request::Front { within: 1 } => "front\n".to_owned(),
            Request::Front { within } => format!("front {within}\n"),
            Request::Place => "place\n".to_owned(),
            Request::Halt { grace } => format!("halt {}\n", grace.as_millis()),
        }
    }

    /// Parse a protocol line (without its newline).
    pub fn parse(line: &str) -> Option<Request> {
        match line.trim().split_once(' ') {
            None if line.trim() == "wait" => Some(Request::Wait),
            None if line.trim() == "queue" => Some(Request::Queue),
            None if line.trim() == "front" => Some(Request::Front { within: 1 }),
            None if line.trim() == "place" => Some(Request::Place),
            Some(("halt", ms)) => ms.parse().ok().map(|ms| Request::Halt { grace: Duration::from_millis(ms) }),
            Some(("front", n)) => n.parse().ok().map(|within| Request::Front { within }),
            _ => None,
        }
    }
}

/// The last reply line.
pub const DONE: &[u8] = b"done\n";

/// The reply to a halt request, as soon as it is taken.
pub const ACK: &[u8] = b"ok\n";

/// The reply to a message the agent will not read.
pub const CLOSED: &[u8] = b"closed\n";

/// The longest `say` line: a message of `ops::MAX_MESSAGE` bytes, escaped.
pub const MAX_SAY: usize = 2 * 1024 * 1024;

/// A message for the agent as a protocol line.
pub fn say_line(text: &str) -> String {
    format!("say {}\n", serde_json::Value::from(text))
}

/// The message of a `say` line (without its newline), if it is one.
pub fn parse_say(line: &[u8]) -> Option<Result<String, ()>> {
    let json = line.strip_prefix(b"say ")?;
    Some(serde_json::from_slice(json).map_err(|_| ()))
}

/// Give the agent of the supervisor at `socket` a message: `None` when no supervisor listens
/// there, else whether it took it.
pub async fn say(socket: &Path, text: &str) -> io::Result<Option<bool>> {
    let Some(mut pending) = send_line(socket, say_line(text)).await? else { return Ok(None) };
    Ok(Some(pending.next().await == Reply::Taken))
}

/// What the supervisor said.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reply {
    /// It took the request (`ok`).
    Taken,
    /// The task is over (`done`).
    Done,
    /// The agent will not read the message (`closed`).
    Closed,
    /// The connection closed without `done`: the supervisor died, or could not keep the
    /// connection (out of descriptors).
    Gone,
}

/// A socket path short enough for `sockaddr_un` (108 bytes). Long paths are reached through
/// `/proc/self/fd/N/<name>` with N an open handle on the directory, kept alive by the caller.
pub struct SocketAddr {
    _dir: Option<std::fs::File>,
    pub path: std::path::PathBuf,
}

/// Make `socket` usable for bind/connect whatever the length of its directory's path.
pub fn socket_addr(socket: &Path) -> io::Result<SocketAddr> {
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::OpenOptionsExt;
    if socket.as_os_str().len() < 100 {
        return Ok(SocketAddr { _dir: None, path: socket.to_owned() });
    }
    let (Some(dir), Some(name)) = (socket.parent(), socket.file_name()) else {
        return Ok(SocketAddr { _dir: None, path: socket.to_owned() });
    };
    let handle = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_PATH | libc::O_DIRECTORY).open(dir)?;
    let path = Path::new("/proc/self/fd").join(handle.as_raw_fd().to_string()).join(name);
    Ok(SocketAddr { _dir: Some(handle), path })
}

/// An open request to a live supervisor.
pub struct Pending(BufReader<UnixStream>);

/// Send `req` to the supervisor at `socket`. `Ok(None)` when no supervisor listens there.
pub async fn send(socket: &Path, req: Request) -> io::Result<Option<Pending>> {
    send_line(socket, req.line()).await
}

async fn send_line(socket: &Path, line: String) -> io::Result<Option<Pending>> {
    let addr = socket_addr(socket)?;
    let mut stream = match UnixStream::connect(&addr.path).await {
        Ok(s) => s,
        Err(e) if matches!(e.kind(), io::ErrorKind::NotFound | io::ErrorKind::ConnectionRefused) => {
            return Ok(None);
        }
        Err(e) => return Err(e),
    };
    match stream.write_all(line.as_bytes()).await {
        Ok(()) => Ok(Some(Pending(BufReader::new(stream)))),
        // It went away between accept and write: as good as not listening.
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe || e.kind() == io::ErrorKind::ConnectionReset => Ok(None),
        Err(e) => Err(e),
    }
}

impl Pending {
    /// The next reply. Dropping this future may lose a line half read: drop the connection
    /// with it.
    pub async fn next(&mut self) -> Reply {
        let mut line = String::new();
        loop {
            line.clear();
            match self.0.read_line(&mut line).await {
                Ok(0) | Err(_) => return Reply::Gone,
                Ok(_) if line.as_bytes() == DONE => return Reply::Done,
                Ok(_) if line.as_bytes() == ACK => return Reply::Taken,
                Ok(_) if line.as_bytes() == CLOSED => return Reply::Closed,
                // Something this version does not know: read on.
                Ok(_) => {}
            }
        }
    }

    /// Wait for `done`; false if the supervisor went away without saying it.
    pub async fn finished(mut self) -> bool {
        loop {
            match self.next().await {
                Reply::Done => return true,
                Reply::Gone => return false,
                Reply::Taken | Reply::Closed => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_round_trip() {
        for r in [
            Request::Wait,
            Request::Queue,
            Request::Front { within: 1 },
            Request::Front { within: 2 },
            Request::Place,
            Request::Halt { grace: Duration::from_millis(5000) },
        ] {
            assert_eq!(Request::parse(r.line().trim_end()), Some(r));
        }
        assert_eq!(Request::parse("front"), Some(Request::Front { within: 1 }));
        assert_eq!(Request::parse("halt x"), None);
        assert_eq!(Request::parse("nope"), None);
    }

    #[test]
    fn a_message_is_one_line_whatever_it_holds() {
        let text = "stop\nand \"report\"\u{1}";
        let line = say_line(text);
        assert_eq!(line.matches('\n').count(), 1);
        assert_eq!(parse_say(line.trim_end().as_bytes()), Some(Ok(text.to_owned())));
        assert_eq!(parse_say(b"say nope"), Some(Err(())));
        assert_eq!(parse_say(b"wait"), None);
    }
}
