//! The stdio transport: one JSON-RPC message a line, in on stdin and out on stdout. A line
//! that is not a message the server can read is answered, never dropped (rmcp's own transport
//! drops what does not parse, and answers a misfit without its id, so a client waits forever):
//! not JSON, or nested deeper than serde_json reads (128 levels), is a parse error (-32700); no
//! request object, an invalid request (-32600). A request whose params rmcp cannot read goes on
//! as a custom request of its method, for the gate to refuse as invalid params (-32602).
//! Answers and notifications are never answered, whatever is wrong with them.

use std::future::Future;
use std::io;
use std::sync::Arc;

use futures_util::StreamExt;
use rmcp::RoleServer;
use rmcp::model::{ClientRequest, CustomRequest, ErrorData, JsonRpcMessage, JsonRpcRequest, RequestId};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use rmcp::transport::async_rw::DEFAULT_MAX_LINE_LENGTH;
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::sync::Mutex;
use tokio_util::bytes::BytesMut;
use tokio_util::codec::{Decoder, FramedRead};

/// The longest line read, as rmcp's own transport: a longer one is answered, not held.
const MAX_LINE: usize = DEFAULT_MAX_LINE_LENGTH;

/// Messages over `R` and `W`, a line each.
pub struct Wire<R, W> {
    read: FramedRead<R, Lines>,
    /// `None` once closed.
    write: Arc<Mutex<Option<W>>>,
}

impl Wire<tokio::io::Stdin, tokio::io::Stdout> {
    /// On the process's stdin and stdout.
    pub fn stdio() -> Self {
        Wire::new(tokio::io::stdin(), tokio::io::stdout())
    }
}

impl<R: AsyncRead, W> Wire<R, W> {
    pub fn new(read: R, write: W) -> Self {
        Wire { read: FramedRead::new(read, Lines::default()), write: Arc::new(Mutex::new(Some(write))) }
    }
}

impl<R, W> Wire<R, W>
where
    W: AsyncWrite + Unpin + Send + 'static,
{
    /// Write `line` whole (each line under the lock: answers sent side by side never mix).
    fn write(&self, line: Vec<u8>) -> impl Future<Output = io::Result<()>> + Send + 'static {
        let write = self.write.clone();
        async move {
            let mut write = write.lock().await;
            let w = write.as_mut().ok_or_else(|| io::Error::new(io::ErrorKind::NotConnected, "stdout is closed"))?;
            w.write_all(&line).await?;
            w.flush().await
        }
    }
}

impl<R, W> Transport<RoleServer> for Wire<R, W>
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    type Error = io::Error;

    fn send(&mut self, item: TxJsonRpcMessage<RoleServer>) -> impl Future<Output = io::Result<()>> + Send + 'static {
        self.write(line(&item))
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        loop {
            let frame = match self.read.next().await? {
                Ok(frame) => frame,
                Err(e) => {
                    eprintln!("agentctl mcp: cannot read stdin: {e}");
                    return None;
                }
            };
            let answer = match frame {
                Frame::Line(line) => match read(&line) {
                    Read::Message(msg) => return Some(msg),
                    Read::Skip => continue,
                    Read::Answer(error, id) => JsonRpcMessage::error(error, id),
                },
                Frame::Overlong => {
                    let max = MAX_LINE / (1024 * 1024);
                    JsonRpcMessage::error(
                        ErrorData::invalid_request(format!("a message is at most {max} MiB"), None),
                        None,
                    )
                }
            };
            // Sent on its own: `receive` may be dropped at any await (rmcp polls it in a
            // `select!`), and the answer must not be lost with it.
            tokio::spawn(self.write(line(&answer)));
        }
    }

    async fn close(&mut self) -> io::Result<()> {
        drop(self.write.lock().await.take());
        Ok(())
    }
}

/// `msg` as a line. An error whose request's id could not be read says `"id": null`, as
/// JSON-RPC 2.0 asks (rmcp leaves the id out, which clients such as the Python SDK reject).
fn line(msg: &TxJsonRpcMessage<RoleServer>) -> Vec<u8> {
    let mut line = match msg {
        JsonRpcMessage::Error(e) if e.id.is_none() => serde_json::to_vec(&NoId::new(&e.error)),
        msg => serde_json::to_vec(msg),
    }
    .unwrap_or_else(|e| {
        // Nothing the server sends fails to serialize; should it, the client still hears.
        let error = ErrorData::internal_error(format!("agentctl could not write its answer: {e}"), None);
        serde_json::to_vec(&NoId::new(&error)).unwrap_or_default()
    });
    line.push(b'\n');
    line
}

/// An error answering a request whose id could not be read.
#[derive(serde::Serialize)]
struct NoId<'a> {
    jsonrpc: &'static str,
    /// Null.
    id: (),
    error: &'a ErrorData,
}

impl NoId<'_> {
    fn new(error: &ErrorData) -> NoId<'_> {
        NoId { jsonrpc: "2.0", id: (), error }
    }
}

/// What one line holds.
#[derive(Debug)]
#[expect(clippy::large_enum_variant, reason = "one a line, moved once: boxing would only add an allocation")]
enum Read {
    Message(RxJsonRpcMessage<RoleServer>),
    /// Nothing to do: a blank line, or an answer or notification that cannot be read.
    Skip,
    /// An error to answer with, and the id of the request it answers if that could be read.
    Answer(ErrorData, Option<RequestId>),
}

/// UTF-8 byte order mark, which JSON readers may skip (RFC 8259 §8.1).
const BOM: &[u8] = b"\xEF\xBB\xBF";

fn read(line: &[u8]) -> Read {
    let line = line.strip_prefix(BOM).unwrap_or(line).trim_ascii();
    if line.is_empty() {
        return Read::Skip;
    }
    if let Ok(msg) = serde_json::from_slice(line) {
        return Read::Message(msg);
    }
    match serde_json::from_slice::<Value>(line) {
        Ok(value) => unreadable(value),
        Err(e) => {
            let why =
                format!("parse error: {e}; each line must be one JSON-RPC message, nested at most 128 levels deep");
            Read::Answer(ErrorData::parse_error(why, None), None)
        }
    }
}

/// What is made of JSON that rmcp does not read as a message.
fn unreadable(value: Value) -> Read {
    let invalid = |what: &str, id| Read::Answer(ErrorData::invalid_request(what.to_owned(), None), id);
    let Value::Object(mut msg) = value else {
        return invalid("a JSON-RPC message is an object, one a line (batches are not taken)", None);
    };
    if !msg.contains_key("id") || msg.contains_key("result") || msg.contains_key("error") {
        return Read::Skip;
    }
    let id = match msg.get("id") {
        Some(Value::String(s)) => RequestId::String(s.as_str().into()),
        Some(Value::Number(n)) if n.as_i64().is_some() => RequestId::Number(n.as_i64().unwrap_or_default()),
        _ => return invalid("a request's `id` is a string or an integer", None),
    };
    if msg.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return invalid("a request says `\"jsonrpc\": \"2.0\"`", Some(id));
    }
    let Some(Value::String(method)) = msg.remove("method") else {
        return invalid("a request's `method` is a string", Some(id));
    };
    // A request of its own kind, but for its params: the gate says what is wrong with them.
    let request = ClientRequest::CustomRequest(CustomRequest::new(method, msg.remove("params")));
    Read::Message(JsonRpcMessage::Request(JsonRpcRequest::new(id, request)))
}

/// Splits the input into lines of at most `MAX_LINE` bytes: a longer one is dropped as it
/// comes, never held whole, and reported once it ends.
#[derive(Default)]
struct Lines {
    /// How far the buffer was searched for a newline.
    searched: usize,
    /// The line under way is too long.
    overlong: bool,
}

enum Frame {
    Line(BytesMut),
    Overlong,
}

impl Decoder for Lines {
    type Item = Frame;
    type Error = io::Error;

    fn decode(&mut self, buf: &mut BytesMut) -> io::Result<Option<Frame>> {
        match memchr::memchr(b'\n', &buf[self.searched..]) {
            Some(at) => {
                let line = buf.split_to(self.searched + at + 1);
                self.searched = 0;
                let overlong = std::mem::take(&mut self.overlong) || line.len() > MAX_LINE + 1;
                Ok(Some(if overlong { Frame::Overlong } else { Frame::Line(line) }))
            }
            None => {
                if buf.len() > MAX_LINE {
                    self.overlong = true;
                    buf.clear();
                }
                self.searched = buf.len();
                Ok(None)
            }
        }
    }

    fn decode_eof(&mut self, buf: &mut BytesMut) -> io::Result<Option<Frame>> {
        if let Some(frame) = self.decode(buf)? {
            return Ok(Some(frame));
        }
        // A last line without its newline is read as one (a whole request is answered, a cut
        // one is a parse error), unless it is only white space.
        self.searched = 0;
        let rest = buf.split();
        Ok(match (std::mem::take(&mut self.overlong), rest.iter().all(u8::is_ascii_whitespace)) {
            (true, _) => Some(Frame::Overlong),
            (false, true) => None,
            (false, false) => Some(Frame::Line(rest)),
        })
    }
}

#[cfg(test)]
mod tests {
    use rmcp::model::ErrorCode;
    use serde_json::json;

    use super::*;

    fn answer(line: &str) -> (ErrorCode, Option<RequestId>) {
        match read(line.as_bytes()) {
            Read::Answer(e, id) => (e.code, id),
            other => panic!("{line}: {other:?}"),
        }
    }

    #[test]
    fn what_is_not_json_is_a_parse_error_with_no_id() {
        let deep = format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"params\":{}{}}}",
            "[".repeat(5000),
            "]".repeat(5000)
        );
        for line in [r#"{"jsonrpc":"2.0","id":1,"method":"ping""#, "hello", deep.as_str()] {
            assert_eq!(answer(line), (ErrorCode::PARSE_ERROR, None), "{line}");
        }
    }

    #[test]
    fn what_is_no_request_is_an_invalid_request_with_its_id_when_it_has_one() {
        let n = |i| Some(RequestId::Number(i));
        for (line, id) in [
            ("5", None),
            (r#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#, None),
            (r#"{"jsonrpc":"2.0","id":true,"method":"ping"}"#, None),
            (r#"{"jsonrpc":"2.0","id":1.5,"method":"ping"}"#, None),
            (r#"{"jsonrpc":"1.0","id":3,"method":"ping"}"#, n(3)),
            (r#"{"jsonrpc":"2.0","id":4,"method":7}"#, n(4)),
            (r#"{"jsonrpc":"2.0","id":"x"}"#, Some(RequestId::String("x".into()))),
        ] {
            assert_eq!(answer(line), (ErrorCode::INVALID_REQUEST, id), "{line}");
        }
    }

    #[test]
    fn a_request_whose_params_do_not_fit_goes_on_as_its_method() {
        let line = r#"{"jsonrpc":"2.0","id":9,"method":"tools/list","params":{"_meta":"x"}}"#;
        let Read::Message(JsonRpcMessage::Request(r)) = read(line.as_bytes()) else { panic!("{line}") };
        assert_eq!(r.id, RequestId::Number(9));
        let ClientRequest::CustomRequest(c) = r.request else { panic!("{:?}", r.request) };
        assert_eq!((c.method.as_str(), c.params), ("tools/list", Some(json!({"_meta": "x"}))));
    }

    #[test]
    fn blank_lines_and_unreadable_notifications_and_answers_are_not_answered() {
        for line in [
            "",
            " \r",
            r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"_meta":"x"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":5,"error":5}"#,
        ] {
            assert!(matches!(read(line.as_bytes()), Read::Skip), "{line}");
        }
        let bom = "\u{feff}{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\r";
        assert!(matches!(read(bom.as_bytes()), Read::Message(_)));
    }

    #[test]
    fn lines_are_split_and_an_overlong_one_is_reported_once_it_ends() {
        let mut lines = Lines::default();
        let mut buf = BytesMut::from(&b"{\"a\":1}\n{\"b\""[..]);
        assert!(matches!(lines.decode(&mut buf).unwrap(), Some(Frame::Line(l)) if &l[..] == b"{\"a\":1}\n"));
        assert!(lines.decode(&mut buf).unwrap().is_none());
        buf.extend_from_slice(&vec![b' '; MAX_LINE]);
        assert!(lines.decode(&mut buf).unwrap().is_none());
        assert!(buf.is_empty(), "the overlong line is not held");
        buf.extend_from_slice(b"tail\n{}\n");
        assert!(matches!(lines.decode(&mut buf).unwrap(), Some(Frame::Overlong)));
        assert!(matches!(lines.decode(&mut buf).unwrap(), Some(Frame::Line(l)) if &l[..] == b"{}\n"));
        // At the end of input, a last line without its newline is read as a line (a cut one
        // is then a parse error); white space alone is nothing.
        buf.extend_from_slice(b"{\"cut\":");
        assert!(matches!(lines.decode_eof(&mut buf).unwrap(), Some(Frame::Line(l)) if &l[..] == b"{\"cut\":"));
        assert!(lines.decode_eof(&mut buf).unwrap().is_none());
        buf.extend_from_slice(b" \r\t");
        assert!(lines.decode_eof(&mut buf).unwrap().is_none());
    }
}
