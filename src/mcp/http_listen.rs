//! The HTTP server's connections: accepted up to a limit, each given a limited time to send its
//! request's headers (a client that sends a byte a second is cut off, holding nothing long),
//! and on stop closed once their answers are sent.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

/// How long a connection may take to send a request's headers, or sit idle between requests.
const HEADER_TIME: Duration = Duration::from_secs(10);

/// The most connections open at once; one more waits until one closes.
const MAX_CONNECTIONS: usize = 4096;

/// Serve `app` on the connections of `listener` until `stop` resolves; then take no more, and
/// return once those open are done (each closes after the answer under way, if any).
pub async fn serve(listener: TcpListener, app: Router, stop: impl Future<Output = ()>) {
    let graceful = GracefulShutdown::new();
    let open = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    tokio::pin!(stop);
    loop {
        let permit = tokio::select! {
            permit = open.clone().acquire_owned() => permit,
            () = &mut stop => break,
        };
        let Ok(permit) = permit else { break };
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                // Out of descriptors, or a connection reset before it was taken: a moment's rest.
                Err(_) => {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    continue;
                }
            },
            () = &mut stop => break,
        };
        let _ = stream.set_nodelay(true);
        let service = TowerToHyperService::new(app.clone());
        let conn = http1::Builder::new()
            .timer(TokioTimer::new())
            .header_read_timeout(HEADER_TIME)
            .serve_connection(TokioIo::new(stream), service);
        let conn = graceful.watch(conn);
        tokio::spawn(async move {
            let _ = conn.await;
            drop(permit);
        });
    }
    drop(listener);
    graceful.shutdown().await;
}
