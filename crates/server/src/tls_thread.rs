//! The TLS handshake thread: a thread of its own (a single-threaded async
//! runtime) that runs every TLS handshake, so that none runs on the async
//! runtime's threads (why: [`crate::tls_accept`]). The server's shared
//! state owns it; the accept path hands it each handshake.

use std::io;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::runtime::Handle;
use tokio::sync::oneshot;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;
use tokio_util::task::AbortOnDropHandle;

use crate::error::ConnectionError;

/// The name of the handshake thread.
pub const THREAD_NAME: &str = "aesd-tls";

/// A thread that runs TLS handshakes (a single-threaded async runtime of
/// its own); it stops when this is dropped.
pub struct HandshakeThread {
    handle: Handle,
    _stop: oneshot::Sender<()>,
}

impl std::fmt::Debug for HandshakeThread {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HandshakeThread").finish_non_exhaustive()
    }
}

impl HandshakeThread {
    /// Starts the thread.
    pub fn start() -> io::Result<HandshakeThread> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()?;
        let handle = runtime.handle().clone();
        let (stop, stopped) = oneshot::channel::<()>();
        std::thread::Builder::new()
            .name(THREAD_NAME.to_owned())
            .spawn(move || {
                // Runs the handshakes until the owner is dropped; the
                // runtime (and any handshake left) is dropped here, on
                // this thread, outside every async context.
                runtime.block_on(async {
                    let _ = stopped.await;
                });
            })?;
        Ok(HandshakeThread {
            handle,
            _stop: stop,
        })
    }

    /// Runs `acceptor`'s handshake on `stream` on the handshake thread,
    /// within `limit`, and hands the encrypted stream back. Dropping the
    /// returned future abandons the handshake.
    pub async fn handshake<IO>(
        &self,
        acceptor: &TlsAcceptor,
        stream: IO,
        limit: Duration,
    ) -> Result<TlsStream<IO>, ConnectionError>
    where
        IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let accept = acceptor.accept(stream);
        let task = AbortOnDropHandle::new(
            self.handle
                .spawn(async move { tokio::time::timeout(limit, accept).await }),
        );
        match task.await {
            Ok(Ok(Ok(stream))) => Ok(stream),
            Ok(Ok(Err(err))) => Err(ConnectionError::TlsHandshake(err.to_string())),
            Ok(Err(_)) => Err(ConnectionError::TlsHandshake(format!(
                "not finished within {:.1} s",
                limit.as_secs_f64()
            ))),
            Err(_) => Err(ConnectionError::TlsHandshake(
                "the handshake thread has stopped".into(),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use rustls::crypto::ring as provider;
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
    use rustls::server::{ClientHello, ResolvesServerCert};
    use rustls::sign::{CertifiedKey, Signer, SigningKey};
    use rustls::{SignatureAlgorithm, SignatureScheme};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    /// The names of the threads the server's signatures ran on, and how
    /// long each signature takes (a board's handshake, in a test).
    #[derive(Debug, Default)]
    struct SignLog {
        threads: Mutex<Vec<String>>,
        pause: Duration,
    }

    #[derive(Debug)]
    struct LoggedKey(Arc<dyn SigningKey>, Arc<SignLog>);

    #[derive(Debug)]
    struct LoggedSigner(Box<dyn Signer>, Arc<SignLog>);

    impl SigningKey for LoggedKey {
        fn choose_scheme(&self, offered: &[SignatureScheme]) -> Option<Box<dyn Signer>> {
            let signer = self.0.choose_scheme(offered)?;
            Some(Box::new(LoggedSigner(signer, Arc::clone(&self.1))))
        }

        fn algorithm(&self) -> SignatureAlgorithm {
            self.0.algorithm()
        }
    }

    impl Signer for LoggedSigner {
        fn sign(&self, message: &[u8]) -> Result<Vec<u8>, rustls::Error> {
            let name = std::thread::current().name().unwrap_or("").to_owned();
            self.1.threads.lock().expect("log").push(name);
            // Blocks its thread, as a board's signature would.
            std::thread::sleep(self.1.pause);
            self.0.sign(message)
        }

        fn scheme(&self) -> SignatureScheme {
            self.0.scheme()
        }
    }

    #[derive(Debug)]
    struct Resolver(Arc<CertifiedKey>);

    impl ResolvesServerCert for Resolver {
        fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
            Some(Arc::clone(&self.0))
        }
    }

    /// A server whose signatures are logged (and take `pause`), and a
    /// client that trusts its certificate.
    fn configs(pause: Duration) -> (TlsAcceptor, Arc<rustls::ClientConfig>, Arc<SignLog>) {
        let dir = std::env::temp_dir().join(format!(
            "aesd-tls-accept-{}-{}",
            std::process::id(),
            pause.as_millis()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        let made = crate::tls_init::make_for_loopback(&dir).expect("identity");
        let cert = CertificateDer::from_pem_file(&made.cert).expect("cert");
        let key = PrivateKeyDer::from_pem_file(&made.key).expect("key");
        let _ = std::fs::remove_dir_all(&dir);
        let log = Arc::new(SignLog {
            pause,
            ..SignLog::default()
        });
        let signing = provider::sign::any_supported_type(&key).expect("signing key");
        let certified = CertifiedKey::new(
            vec![cert.clone()],
            Arc::new(LoggedKey(signing, Arc::clone(&log))),
        );
        let server =
            rustls::ServerConfig::builder_with_provider(Arc::new(provider::default_provider()))
                .with_safe_default_protocol_versions()
                .expect("versions")
                .with_no_client_auth()
                .with_cert_resolver(Arc::new(Resolver(Arc::new(certified))));
        let mut roots = rustls::RootCertStore::empty();
        roots.add(cert).expect("root");
        let client =
            rustls::ClientConfig::builder_with_provider(Arc::new(provider::default_provider()))
                .with_safe_default_protocol_versions()
                .expect("versions")
                .with_root_certificates(roots)
                .with_no_client_auth();
        (TlsAcceptor::from(Arc::new(server)), Arc::new(client), log)
    }

    /// One handshake through `thread` over an in-memory pipe; the server
    /// then sends a byte the client reads.
    async fn handshake_through(
        thread: &HandshakeThread,
        acceptor: &TlsAcceptor,
        client: &Arc<rustls::ClientConfig>,
    ) {
        let (near, far) = tokio::io::duplex(64 * 1024);
        let connector = tokio_rustls::TlsConnector::from(Arc::clone(client));
        let name = ServerName::try_from("localhost").expect("name");
        let (served, connected) = tokio::join!(
            thread.handshake(acceptor, far, Duration::from_secs(30)),
            connector.connect(name, near),
        );
        let mut served = served.expect("server handshake");
        let mut connected = connected.expect("client handshake");
        served.write_all(b"x").await.expect("write");
        served.flush().await.expect("flush");
        let mut byte = [0u8; 1];
        connected.read_exact(&mut byte).await.expect("read");
        assert_eq!(&byte, b"x");
    }

    /// The handshake's cryptography runs on the handshake thread, not on
    /// the thread of the runtime that awaits it.
    #[tokio::test(flavor = "current_thread")]
    async fn the_signature_is_made_on_the_handshake_thread() {
        let thread = HandshakeThread::start().expect("thread");
        let (acceptor, client, log) = configs(Duration::ZERO);
        handshake_through(&thread, &acceptor, &client).await;
        let threads = log.threads.lock().expect("log").clone();
        assert_eq!(threads, vec![THREAD_NAME.to_owned()]);
    }

    /// While a slow handshake (a board's: its signature blocks its thread
    /// for 600 ms) runs, the only thread of the runtime that awaits it
    /// goes on serving other work: a task ticking every 10 ms ticks on.
    #[tokio::test(flavor = "current_thread")]
    async fn other_work_on_the_runtime_goes_on_during_a_slow_handshake() {
        let thread = HandshakeThread::start().expect("thread");
        let (acceptor, client, log) = configs(Duration::from_millis(600));
        let ticks = Arc::new(std::sync::atomic::AtomicU32::new(0));
        let ticker = tokio::spawn({
            let ticks = Arc::clone(&ticks);
            async move {
                loop {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    ticks.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
            }
        });
        let started = std::time::Instant::now();
        handshake_through(&thread, &acceptor, &client).await;
        let took = started.elapsed();
        ticker.abort();
        let ticks = ticks.load(std::sync::atomic::Ordering::Relaxed);
        assert_eq!(log.threads.lock().expect("log").len(), 1);
        assert!(took >= Duration::from_millis(600), "{took:?}");
        // About 60 ticks; a blocked runtime would manage one or two.
        assert!(ticks >= 20, "{ticks} ticks in {took:?}");
    }
}
