//! Telling a supervisor that aesd is ready: listening on its ports.
//!
//! Two signals, both sent once the job port (and the metrics port, when
//! configured) is bound, so a client that connects after seeing either is
//! accepted:
//!
//! * `--pid-file FILE`: aesd writes its process id (decimal, one line) to
//!   FILE, atomically (a temporary file in the same folder, renamed), and
//!   removes FILE when it exits normally. The temporary file has a random
//!   name and is created exclusively without following a symlink
//!   (`O_CREAT|O_EXCL|O_NOFOLLOW`): in a folder others can write (`/tmp`,
//!   `/var/run` shared with other daemons) nobody can make aesd write
//!   through a link placed in advance. For init scripts (S50aesd waits
//!   for the file instead of reading the log).
//! * `NOTIFY_SOCKET` (systemd's `sd_notify` protocol, `Type=notify`): when
//!   the variable names a Unix datagram socket (a path, or `@name` in the
//!   abstract namespace), aesd sends `READY=1`, its `MAINPID`, a `STATUS`
//!   line and the bound addresses as `AESD_LISTEN=` / `AESD_METRICS=`
//!   (which systemd ignores and test harnesses read), and `STOPPING=1` when
//!   a graceful shutdown begins.

use std::ffi::OsString;
use std::fs;
use std::io::{self, Write};
use std::net::SocketAddr;
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};

/// The environment variable naming the supervisor's notification socket.
pub const NOTIFY_SOCKET_ENV: &str = "NOTIFY_SOCKET";

/// Why a readiness signal could not be sent.
#[derive(Debug, thiserror::Error)]
pub enum ReadinessError {
    /// The pid file could not be written (or renamed into place).
    #[error("cannot write the pid file {}: {source}", path.display())]
    PidFile {
        /// The pid file.
        path: PathBuf,
        /// What the file system said.
        source: io::Error,
    },
    /// `NOTIFY_SOCKET` is set but the message could not be sent to it.
    #[error("cannot notify {socket:?} ({NOTIFY_SOCKET_ENV}): {source}")]
    Notify {
        /// The socket as given in the environment.
        socket: OsString,
        /// What the socket said.
        source: io::Error,
    },
}

/// Where readiness is announced: the pid file and the notification socket,
/// either or both or neither.
#[derive(Debug)]
pub struct Readiness {
    pid_file: Option<PathBuf>,
    notify_socket: Option<OsString>,
    /// Whether this process wrote the pid file (so only it removes it).
    pid_file_written: bool,
}

impl Readiness {
    /// Readiness through `pid_file` (if any) and the `NOTIFY_SOCKET` of
    /// this process's environment (if set and not empty).
    pub fn from_env(pid_file: Option<PathBuf>) -> Readiness {
        let notify_socket = std::env::var_os(NOTIFY_SOCKET_ENV).filter(|s| !s.is_empty());
        Readiness::new(pid_file, notify_socket)
    }

    /// Readiness through `pid_file` and the socket `notify_socket` (a
    /// path, or `@name` in the abstract namespace), each if given.
    pub fn new(pid_file: Option<PathBuf>, notify_socket: Option<OsString>) -> Readiness {
        Readiness {
            pid_file,
            notify_socket,
            pid_file_written: false,
        }
    }

    /// Announces that aesd listens on `listen` (and serves metrics on
    /// `metrics`): writes the pid file, then notifies the socket.
    pub fn ready(
        &mut self,
        listen: SocketAddr,
        metrics: Option<SocketAddr>,
    ) -> Result<(), ReadinessError> {
        let pid = std::process::id();
        if let Some(path) = &self.pid_file {
            write_atomically(path, format!("{pid}\n").as_bytes()).map_err(|source| {
                ReadinessError::PidFile {
                    path: path.clone(),
                    source,
                }
            })?;
            self.pid_file_written = true;
        }
        let metrics_status = metrics
            .map(|m| format!(", metrics on {m}"))
            .unwrap_or_default();
        let metrics_line = metrics
            .map(|m| format!("AESD_METRICS={m}\n"))
            .unwrap_or_default();
        self.notify(&format!(
            "READY=1\nMAINPID={pid}\nSTATUS=listening on {listen}{metrics_status}\nAESD_LISTEN={listen}\n{metrics_line}"
        ))
    }

    /// Tells the supervisor that a graceful shutdown has begun.
    pub fn stopping(&self) -> Result<(), ReadinessError> {
        self.notify("STOPPING=1\nSTATUS=shutting down\n")
    }

    /// Sends `message` to the notification socket, if there is one.
    fn notify(&self, message: &str) -> Result<(), ReadinessError> {
        let Some(socket) = &self.notify_socket else {
            return Ok(());
        };
        send_datagram(socket, message.as_bytes()).map_err(|source| ReadinessError::Notify {
            socket: socket.clone(),
            source,
        })
    }
}

impl Drop for Readiness {
    /// Removes the pid file this process wrote, if it still names this
    /// process (an aesd started after it may have replaced it).
    fn drop(&mut self) {
        let (Some(path), true) = (&self.pid_file, self.pid_file_written) else {
            return;
        };
        let ours = fs::read_to_string(path)
            .map(|text| text.trim() == std::process::id().to_string())
            .unwrap_or(false);
        if ours {
            let _ = fs::remove_file(path);
        }
    }
}

/// Writes `bytes` to a new file beside `path`, then renames it over
/// `path`: a reader sees the old file, no file, or the whole new one. The
/// new file has a random name and is created exclusively, never through a
/// symlink; the rename replaces a symlink at `path` itself, not its target.
fn write_atomically(path: &Path, bytes: &[u8]) -> io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let temporary = temporary_path(path)?;
    let mut file = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o644)
        .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
        .open(&temporary)?;
    let result = file
        .write_all(bytes)
        .and_then(|()| fs::rename(&temporary, path));
    if result.is_err() {
        let _ = fs::remove_file(&temporary);
    }
    result
}

/// A new temporary name beside `path`: `.NAME.` and 16 random hex digits.
fn temporary_path(path: &Path) -> io::Result<PathBuf> {
    let name = path
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "not a file name"))?;
    let mut random = [0u8; 8];
    getrandom::fill(&mut random).map_err(|err| io::Error::other(err.to_string()))?;
    let mut temporary_name = OsString::from(".");
    temporary_name.push(name);
    temporary_name.push(".");
    for byte in random {
        temporary_name.push(format!("{byte:02x}"));
    }
    temporary_name.push(".tmp");
    Ok(path.with_file_name(temporary_name))
}

/// Sends one datagram to the Unix socket `socket`: a path, or `@name` for
/// Linux's abstract namespace.
fn send_datagram(socket: &OsString, message: &[u8]) -> io::Result<()> {
    let sender = UnixDatagram::unbound()?;
    let bytes = socket.as_encoded_bytes();
    if let Some(name) = bytes.strip_prefix(b"@") {
        use std::os::linux::net::SocketAddrExt;
        let address = std::os::unix::net::SocketAddr::from_abstract_name(name)?;
        sender.send_to_addr(message, &address)?;
        return Ok(());
    }
    sender.send_to(message, Path::new(socket))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn scratch(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("aesd-readiness-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).expect("scratch folder");
        dir
    }

    fn addr(text: &str) -> SocketAddr {
        text.parse().expect("address")
    }

    #[test]
    fn the_pid_file_appears_when_ready_and_goes_on_drop() {
        let dir = scratch("pid");
        let path = dir.join("aesd.pid");
        let mut readiness = Readiness::new(Some(path.clone()), None);
        assert!(!path.exists());
        readiness
            .ready(addr("127.0.0.1:7878"), None)
            .expect("ready");
        let text = fs::read_to_string(&path).expect("pid file");
        assert_eq!(text, format!("{}\n", std::process::id()));
        let leftovers: Vec<_> = fs::read_dir(&dir).expect("list").collect();
        assert_eq!(leftovers.len(), 1, "temporary file left behind");
        drop(readiness);
        assert!(!path.exists(), "pid file not removed");
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_pid_file_naming_another_process_is_left_alone() {
        let dir = scratch("other");
        let path = dir.join("aesd.pid");
        let mut readiness = Readiness::new(Some(path.clone()), None);
        readiness
            .ready(addr("127.0.0.1:7878"), None)
            .expect("ready");
        fs::write(&path, "1\n").expect("replace");
        drop(readiness);
        assert_eq!(fs::read_to_string(&path).expect("kept"), "1\n");
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_symlink_at_the_old_temporary_name_is_not_followed() {
        let dir = scratch("symlink");
        let path = dir.join("aesd.pid");
        let victim = dir.join("victim");
        fs::write(&victim, "precious\n").expect("victim");
        // The name the temporary file had before it was random.
        let predictable = dir.join(format!(".aesd.pid.{}.tmp", std::process::id()));
        std::os::unix::fs::symlink(&victim, &predictable).expect("symlink");
        let mut readiness = Readiness::new(Some(path.clone()), None);
        readiness
            .ready(addr("127.0.0.1:7878"), None)
            .expect("ready");
        assert_eq!(fs::read_to_string(&victim).expect("victim"), "precious\n");
        assert_eq!(
            fs::read_to_string(&path).expect("pid file"),
            format!("{}\n", std::process::id())
        );
        drop(readiness);
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn temporary_names_are_random() {
        let path = PathBuf::from("/run/aesd.pid");
        let first = temporary_path(&path).expect("name");
        let second = temporary_path(&path).expect("name");
        assert_ne!(first, second);
        let name = first.file_name().and_then(|n| n.to_str()).expect("utf-8");
        assert!(
            name.starts_with(".aesd.pid.") && name.ends_with(".tmp"),
            "{name}"
        );
        assert_eq!(name.len(), ".aesd.pid.".len() + 16 + ".tmp".len(), "{name}");
    }

    #[test]
    fn an_unwritable_pid_file_is_a_typed_error() {
        let mut readiness =
            Readiness::new(Some(PathBuf::from("/nonexistent-aesd-dir/aesd.pid")), None);
        let err = readiness
            .ready(addr("127.0.0.1:7878"), None)
            .expect_err("no such folder");
        assert!(matches!(err, ReadinessError::PidFile { .. }), "{err}");
        assert!(err.to_string().contains("/nonexistent-aesd-dir/aesd.pid"));
    }

    #[test]
    fn the_notify_socket_gets_ready_with_the_addresses_then_stopping() {
        let dir = scratch("notify");
        let socket_path = dir.join("notify");
        let receiver = UnixDatagram::bind(&socket_path).expect("bind");
        receiver
            .set_read_timeout(Some(Duration::from_secs(5)))
            .expect("timeout");
        let mut readiness = Readiness::new(None, Some(socket_path.clone().into_os_string()));
        readiness
            .ready(addr("127.0.0.1:4321"), Some(addr("127.0.0.1:9100")))
            .expect("ready");
        let mut buf = [0u8; 512];
        let n = receiver.recv(&mut buf).expect("ready message");
        let message = std::str::from_utf8(&buf[..n]).expect("text");
        let lines: Vec<&str> = message.lines().collect();
        assert!(lines.contains(&"READY=1"), "{message}");
        assert!(lines.contains(&format!("MAINPID={}", std::process::id()).as_str()));
        assert!(lines.contains(&"AESD_LISTEN=127.0.0.1:4321"), "{message}");
        assert!(lines.contains(&"AESD_METRICS=127.0.0.1:9100"), "{message}");
        readiness.stopping().expect("stopping");
        let n = receiver.recv(&mut buf).expect("stopping message");
        assert!(
            std::str::from_utf8(&buf[..n])
                .expect("text")
                .starts_with("STOPPING=1\n")
        );
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn an_abstract_notify_socket_is_reached() {
        use std::os::linux::net::SocketAddrExt;
        let name = format!("aesd-readiness-test-{}", std::process::id());
        let address =
            std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).expect("name");
        let receiver = UnixDatagram::bind_addr(&address).expect("bind abstract");
        receiver
            .set_read_timeout(Some(Duration::from_secs(5)))
            .expect("timeout");
        let mut readiness = Readiness::new(None, Some(OsString::from(format!("@{name}"))));
        readiness.ready(addr("[::1]:7878"), None).expect("ready");
        let mut buf = [0u8; 512];
        let n = receiver.recv(&mut buf).expect("message");
        let message = std::str::from_utf8(&buf[..n]).expect("text");
        assert!(message.contains("AESD_LISTEN=[::1]:7878\n"), "{message}");
        assert!(!message.contains("AESD_METRICS"), "{message}");
    }

    #[test]
    fn a_missing_notify_socket_is_a_typed_error() {
        let readiness = Readiness::new(None, Some(OsString::from("/nonexistent-aesd-dir/notify")));
        let err = readiness.stopping().expect_err("nobody listens");
        assert!(matches!(err, ReadinessError::Notify { .. }), "{err}");
    }
}
