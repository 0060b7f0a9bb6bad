//! The receive low-water mark of a plain TCP connection while a data
//! payload is read (`SO_RCVLOWAT`).
//!
//! A frame's payload arrives a TCP segment at a time; without a mark the
//! kernel wakes the connection's task for every segment, and each wake is
//! an `epoll_wait`, a `recv`, a turn of the driver's loop and a clock read
//! (a system call on riscv32 Linux, which has no vDSO clock): on the
//! board's single core, per 1448-byte segment. With the mark set to the
//! payload's remaining length (set before each wait: what the reader's
//! buffer already holds is not asked of the kernel), the kernel queues the
//! segments and wakes the task once, when the whole payload is there (it still acknowledges
//! every second segment at once while the mark is unmet, so the sender is
//! not slowed). Between payloads (headers, control frames, a queued
//! client's close) the mark is 1, so nothing small ever waits.
//!
//! A slow client is the one case the mark changes: bytes it sent sit in
//! the kernel, unseen by the minimum input rate. So when a rate window
//! ends while the mark is raised, the driver first takes what is queued
//! ([`LowWater::take_queued`], a non-blocking `recv`, once its reader's
//! buffer holds nothing that comes before): a client that sends slowly is
//! judged on what it sent, as without the mark. (The idle timeout is
//! unchanged: a data frame's read deadline is the whole frame's, with or
//! without it.)
//! Only plain TCP takes a mark ([`Socket`]); TLS reads as before.
//!
//! The socket is borrowed from the connection's read half for each call
//! (no descriptor of its own: a connection costs one, as the open-file
//! budget assumes). `setsockopt` has no safe binding in the crates this
//! workspace uses (rustix, socket2 and nix lack `SO_RCVLOWAT`): its call
//! (and the tests' `getsockopt`) are the only unsafe code of this crate.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};

use rustix::net::RecvFlags;
use tokio::net::tcp::OwnedReadHalf;
use tracing::debug;

/// The highest mark set (a payload above it wakes the task once per this
/// many bytes). The kernel grows the socket's receive buffer to hold the
/// mark, so it is bounded.
pub const MAX_MARK: usize = 64 * 1024;

/// A stream a connection is read from, and the socket under it when it is
/// read from the socket directly (plain TCP: a mark can be set); `None`
/// for a stream that decodes what it reads (TLS), where a mark on the
/// socket would not say when its records make up a payload.
pub trait Socket {
    /// The socket read from, if the stream's bytes are the socket's.
    fn socket(&self) -> Option<BorrowedFd<'_>>;
}

impl Socket for OwnedReadHalf {
    fn socket(&self) -> Option<BorrowedFd<'_>> {
        let stream: &tokio::net::TcpStream = self.as_ref();
        Some(stream.as_fd())
    }
}

impl<S> Socket for tokio::io::ReadHalf<S> {
    fn socket(&self) -> Option<BorrowedFd<'_>> {
        None
    }
}

/// The mark one connection has set on its socket.
#[derive(Debug)]
pub struct LowWater {
    /// The mark now (1: the kernel's default).
    mark: usize,
}

impl Default for LowWater {
    fn default() -> Self {
        LowWater { mark: 1 }
    }
}

impl LowWater {
    /// Whether the mark is above 1.
    pub fn is_raised(&self) -> bool {
        self.mark > 1
    }

    /// Sets `socket`'s mark for a payload of which `remaining` bytes are
    /// still to come (at most [`MAX_MARK`]).
    pub fn raise(&mut self, socket: BorrowedFd<'_>, remaining: usize) {
        self.set(socket, remaining.clamp(1, MAX_MARK));
    }

    /// Sets `socket`'s mark back to 1.
    pub fn lower(&mut self, socket: BorrowedFd<'_>) {
        self.set(socket, 1);
    }

    /// Takes what the kernel has queued for `socket` into `dst`, without
    /// waiting: `Ok(0)` at the end of the stream, `WouldBlock` when
    /// nothing is queued.
    pub fn take_queued(socket: BorrowedFd<'_>, dst: &mut [u8]) -> io::Result<usize> {
        let (read, _) = rustix::net::recv(socket, dst, RecvFlags::DONTWAIT)?;
        Ok(read)
    }

    fn set(&mut self, socket: BorrowedFd<'_>, mark: usize) {
        if mark == self.mark {
            return;
        }
        let value = libc::c_int::try_from(mark).unwrap_or(libc::c_int::MAX);
        // SAFETY: the descriptor is borrowed (open) for the call; the
        // option's value is a c_int borrowed for the call, its size passed
        // with it.
        #[allow(unsafe_code)]
        let status = unsafe {
            libc::setsockopt(
                socket.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_RCVLOWAT,
                (&raw const value).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        if status == 0 {
            self.mark = mark;
        } else {
            // The connection still works: it is woken per segment.
            debug!(
                "cannot set SO_RCVLOWAT to {mark}: {}",
                io::Error::last_os_error()
            );
        }
    }
}

/// The mark the kernel holds for `socket` (tests).
#[cfg(test)]
fn kernel_mark(socket: BorrowedFd<'_>) -> io::Result<usize> {
    let mut value: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: the descriptor is borrowed (open) for the call; `value` and
    // `len` are valid for writes of their sizes for the call.
    #[allow(unsafe_code)]
    let status = unsafe {
        libc::getsockopt(
            socket.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVLOWAT,
            (&raw mut value).cast(),
            &raw mut len,
        )
    };
    if status != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(usize::try_from(value).unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::net::{TcpListener, TcpStream};

    use super::*;

    fn pair() -> (TcpStream, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let client = TcpStream::connect(listener.local_addr().expect("addr")).expect("connect");
        let (server, _) = listener.accept().expect("accept");
        (client, server)
    }

    #[test]
    fn the_kernel_holds_the_mark_raised_capped_and_lowered() {
        let (_client, server) = pair();
        let socket = server.as_fd();
        let mut mark = LowWater::default();
        assert_eq!(kernel_mark(socket).expect("get"), 1);
        mark.raise(socket, 16_384);
        assert!(mark.is_raised());
        assert_eq!(kernel_mark(socket).expect("get"), 16_384);
        mark.raise(socket, 10 << 20);
        assert_eq!(kernel_mark(socket).expect("get"), MAX_MARK);
        mark.lower(socket);
        assert!(!mark.is_raised());
        assert_eq!(kernel_mark(socket).expect("get"), 1);
    }

    #[test]
    fn queued_bytes_are_taken_below_the_mark_without_waiting() {
        let (mut client, server) = pair();
        let socket = server.as_fd();
        LowWater::default().raise(socket, 4096);
        let mut dst = [0u8; 4096];
        let nothing = LowWater::take_queued(socket, &mut dst).expect_err("nothing is queued yet");
        assert_eq!(nothing.kind(), io::ErrorKind::WouldBlock);
        client.write_all(b"partial").expect("write");
        // Loopback delivers at once; allow the scheduler a moment.
        let mut got = 0;
        for _ in 0..100 {
            match LowWater::take_queued(socket, &mut dst) {
                Ok(n) => {
                    got = n;
                    break;
                }
                Err(err) if err.kind() == io::ErrorKind::WouldBlock => {
                    std::thread::sleep(std::time::Duration::from_millis(10));
                }
                Err(err) => panic!("recv: {err}"),
            }
        }
        assert_eq!(&dst[..got], b"partial");
        drop(client);
        let mut end = Err(io::ErrorKind::WouldBlock.into());
        for _ in 0..100 {
            end = LowWater::take_queued(socket, &mut dst);
            if !matches!(&end, Err(err) if err.kind() == io::ErrorKind::WouldBlock) {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert_eq!(end.expect("end of stream"), 0);
    }
}
