//! The `AsyncWrite` side of aesload's verifying sinks: every write is
//! taken whole and handed to the sink's synchronous check, and the first
//! failure is kept for the sink's `finish` (the job itself completes, so
//! its figures are kept, even when its output is wrong).

/// Implements `tokio::io::AsyncWrite` for `$sink`, a type with a method
/// `absorb(&mut self, &[u8]) -> Result<(), E>` and a field
/// `failure: Option<E>`: writes go to `absorb` until it fails once; flush
/// and shutdown have nothing to do.
macro_rules! absorbing_async_write {
    ($sink:ty) => {
        impl tokio::io::AsyncWrite for $sink {
            fn poll_write(
                mut self: std::pin::Pin<&mut Self>,
                _cx: &mut std::task::Context<'_>,
                buf: &[u8],
            ) -> std::task::Poll<std::io::Result<usize>> {
                if self.failure.is_none()
                    && let Err(failure) = self.absorb(buf)
                {
                    self.failure = Some(failure);
                }
                std::task::Poll::Ready(Ok(buf.len()))
            }

            fn poll_flush(
                self: std::pin::Pin<&mut Self>,
                _cx: &mut std::task::Context<'_>,
            ) -> std::task::Poll<std::io::Result<()>> {
                std::task::Poll::Ready(Ok(()))
            }

            fn poll_shutdown(
                self: std::pin::Pin<&mut Self>,
                _cx: &mut std::task::Context<'_>,
            ) -> std::task::Poll<std::io::Result<()>> {
                std::task::Poll::Ready(Ok(()))
            }
        }
    };
}
pub(crate) use absorbing_async_write;
