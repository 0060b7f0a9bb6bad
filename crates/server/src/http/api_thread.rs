//! The HTTP API's own thread: a single-threaded async runtime that parses
//! and answers every API request, apart from the job port's multi-thread
//! runtime. Why: on the shared runtime a request arriving on an idle
//! server woke one worker for the socket and, through a futex, a second
//! one to look for work; a runtime of one thread wakes one thread per
//! request (docs/performance.md, "Transit on the HTTP API"). The cost:
//! the API's clients share this thread for parsing, JSON and the small
//! requests' crypto; big requests and every store write still go to the
//! runtime's blocking threads (docs/aesd.md, "HTTP API").

use std::future::Future;
use std::io;
use std::thread::JoinHandle;

use tokio::net::TcpListener;
use tokio::sync::oneshot;

/// The name of the API's thread (and of its blocking threads).
pub const THREAD_NAME: &str = "aesd-http";

/// The most blocking threads the API's runtime keeps (batches, bodies
/// above 16 KiB, store writes); more such requests at once wait for one.
/// Without a cap tokio starts a thread whenever a request arrives before
/// the last one's thread is idle again, each with a malloc arena of its
/// own: peak RSS varied from 7.6 to 12.5 MiB between identical runs
/// (docs/performance.md).
pub const MAX_BLOCKING_THREADS: usize = 2;

/// The thread serving the API; dropping it stops the API (its listener
/// closes, open connections are dropped) and waits for the handlers still
/// running on blocking threads, as the shared runtime's shutdown did.
pub struct ApiThread {
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for ApiThread {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiThread").finish_non_exhaustive()
    }
}

impl ApiThread {
    /// Moves `listener` to a new thread and runs `serve` there on it until
    /// this is dropped (`serve` gets the listener and the stop signal).
    pub fn start<F, Fut>(listener: TcpListener, serve: F) -> io::Result<ApiThread>
    where
        F: FnOnce(TcpListener, oneshot::Receiver<()>) -> Fut + Send + 'static,
        Fut: Future<Output = ()>,
    {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .thread_name(THREAD_NAME)
            .max_blocking_threads(MAX_BLOCKING_THREADS)
            .build()?;
        // Taken off the runtime it was bound on, registered with this one.
        let listener = listener.into_std()?;
        let (stop, stopped) = oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name(THREAD_NAME.to_owned())
            .spawn(move || {
                runtime.block_on(async move {
                    match TcpListener::from_std(listener) {
                        Ok(listener) => serve(listener, stopped).await,
                        Err(err) => tracing::error!("the HTTP API cannot listen: {err}"),
                    }
                });
                // The runtime is dropped here, outside every async
                // context: it waits for the blocking handlers.
            })?;
        Ok(ApiThread {
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    /// Stops the API and waits for its thread (as dropping it does).
    pub fn stop(self) {
        drop(self);
    }
}

impl Drop for ApiThread {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(thread) = self.thread.take()
            && thread.join().is_err()
        {
            tracing::error!("the HTTP API's thread panicked");
        }
    }
}
