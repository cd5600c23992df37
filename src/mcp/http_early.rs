//! Answers that are slow to begin. rmcp opens a request's event stream only with its first
//! message; on protocol 2026-07-28 (no session) a wait whose client sent no progress token has
//! no message before its result, so the connection would carry nothing for up to the max wait
//! and a proxy or load balancer with a shorter idle timeout would cut it. An answer that has
//! not begun within `EARLY` is begun here instead: status 200, an event stream of comments
//! every `KEEP`, then the answer's own events (a JSON answer as one event).

use std::convert::Infallible;
use std::future::Future;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::header::{CACHE_CONTROL, CONTENT_TYPE};
use axum::http::{HeaderValue, StatusCode};
use axum::response::Response;
use futures_util::StreamExt;
use tokio::sync::mpsc;

/// How long an answer may take to begin before it is begun as an event stream.
const EARLY: Duration = Duration::from_secs(1);

/// How often the stream says it is alive while the answer is not ready.
const KEEP: Duration = Duration::from_secs(4);

/// `answer`, begun as an event stream if it is not ready within `EARLY`. A client that goes
/// away drops the stream, and with it `answer` at the next comment.
pub(super) async fn begun<F>(answer: F) -> Response
where
    F: Future<Output = Response> + Send + 'static,
{
    let mut answer = Box::pin(answer);
    if let Ok(ready) = tokio::time::timeout(EARLY, &mut answer).await {
        return ready;
    }
    let (tx, rx) = mpsc::channel::<Bytes>(8);
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(KEEP);
        let response = loop {
            tokio::select! {
                r = &mut answer => break r,
                _ = tick.tick() => if tx.send(Bytes::from_static(b":\n\n")).await.is_err() {
                    return;
                },
            }
        };
        if is_event_stream(&response) {
            let mut body = response.into_body().into_data_stream();
            while let Some(Ok(chunk)) = body.next().await {
                if tx.send(chunk).await.is_err() {
                    return;
                }
            }
        } else {
            // A JSON answer (a result, or an error of any status) is the stream's one event.
            let json = axum::body::to_bytes(response.into_body(), super::http::MAX_BODY).await.unwrap_or_default();
            let text = String::from_utf8_lossy(&json);
            let _ = tx.send(Bytes::from(format!("event: message\ndata: {}\n\n", text.trim()))).await;
        }
    });
    let stream =
        futures_util::stream::unfold(rx, |mut rx| async { rx.recv().await.map(|b| (Ok::<_, Infallible>(b), rx)) });
    let mut response = Response::new(Body::from_stream(stream));
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}

fn is_event_stream(response: &Response) -> bool {
    response.status() == StatusCode::OK
        && response.headers().get(CONTENT_TYPE).is_some_and(|t| t.as_bytes().starts_with(b"text/event-stream"))
}
