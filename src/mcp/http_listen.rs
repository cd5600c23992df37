//! The HTTP server's connections: accepted up to a limit, over TLS when it has a certificate,
//! each given a limited time to finish its TLS handshake and to send a request's headers (a
//! client that sends a byte a second is cut off, holding nothing long), and on stop closed once
//! their answers are sent.

use std::future::Future;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper::rt::{Read, Write};
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::{GracefulShutdown, Watcher};
use hyper_util::service::TowerToHyperService;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_rustls::TlsAcceptor;

use crate::error::{Error, Result};

/// How long a connection may take to send a request's headers, or sit idle between requests;
/// and to finish its TLS handshake.
const HEADER_TIME: Duration = Duration::from_secs(10);

/// The most connections open at once; one more waits until one closes.
const MAX_CONNECTIONS: usize = 4096;

/// The TLS side of the server, from a certificate chain and its key (PEM files).
pub fn tls(cert: &Path, key: &Path) -> Result<TlsAcceptor> {
    let read = |p: &Path| std::fs::read(p).map_err(|e| Error::Usage(format!("cannot read {}: {e}", p.display())));
    let (cert_pem, key_pem) = (read(cert)?, read(key)?);
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&cert_pem)
        .collect::<std::result::Result<_, _>>()
        .map_err(|e| Error::Usage(format!("{} is not a PEM certificate chain: {e}", cert.display())))?;
    if chain.is_empty() {
        return Err(Error::Usage(format!("{} holds no certificate (PEM, BEGIN CERTIFICATE)", cert.display())));
    }
    let key_der = PrivateKeyDer::from_pem_slice(&key_pem)
        .map_err(|e| Error::Usage(format!("{} is not a PEM private key: {e}", key.display())))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .and_then(|b| b.with_no_client_auth().with_single_cert(chain, key_der))
        .map_err(|e| {
            Error::Usage(format!("{} and {} do not make a TLS identity: {e}", cert.display(), key.display()))
        })?;
    let mut config = config;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}

/// Serve `app` on the connections of `listener` (over `tls` if given) until `stop` resolves;
/// then take no more, and return once those open are done (each closes after the answer
/// under way, if any).
pub async fn serve(listener: TcpListener, app: Router, tls: Option<TlsAcceptor>, stop: impl Future<Output = ()>) {
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
        let (app, tls, watcher) = (app.clone(), tls.clone(), graceful.watcher());
        tokio::spawn(async move {
            match tls {
                None => one(TokioIo::new(stream), app, watcher).await,
                Some(tls) => {
                    if let Ok(Ok(stream)) = tokio::time::timeout(HEADER_TIME, tls.accept(stream)).await {
                        one(TokioIo::new(stream), app, watcher).await;
                    }
                }
            }
            drop(permit);
        });
    }
    drop(listener);
    graceful.shutdown().await;
}

/// Serve one connection's requests until it closes (or the server stops).
async fn one<I: Read + Write + Unpin + Send + 'static>(io: I, app: Router, watcher: Watcher) {
    let conn = http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_TIME)
        .serve_connection(io, TowerToHyperService::new(app));
    let _ = watcher.watch(conn).await;
}
