//! The input and output paths: stdin and stdout (`-`), terminals, and the
//! input's checks before any work.

use std::io::IsTerminal;
use std::path::Path;

use aesd_cli::output::OutputPath;
use anyhow::{Context, Result, bail};

pub(crate) fn is_stdio(path: &Path) -> bool {
    path.as_os_str() == "-"
}

/// Whether the output is a terminal (stdout, or a device such as /dev/tty).
pub(crate) fn is_terminal(output: &OutputPath) -> bool {
    if output.is_stdout() {
        return std::io::stdout().is_terminal();
    }
    let is_device = std::fs::metadata(output.path()).is_ok_and(|meta| {
        use std::os::unix::fs::FileTypeExt;
        meta.file_type().is_char_device()
    });
    is_device
        && std::fs::OpenOptions::new()
            .write(true)
            .open(output.path())
            .is_ok_and(|device| device.is_terminal())
}

/// Checks, before a password is asked for or a server contacted, that the
/// input is something a job can read to its end: a file, a FIFO or socket
/// (streamed, as stdin), a device. A directory, or an input that cannot be
/// opened, is an error that says so.
pub(crate) fn check_input(path: &Path) -> Result<()> {
    if is_stdio(path) {
        return Ok(());
    }
    let metadata =
        std::fs::metadata(path).with_context(|| format!("cannot open input {}", path.display()))?;
    if metadata.is_file() {
        // Opened here to be refused before the password prompt when
        // unreadable; a FIFO is not (its open waits for a writer, and
        // the job opens it).
        std::fs::File::open(path)
            .with_context(|| format!("cannot open input {}", path.display()))?;
    }
    if metadata.is_dir() {
        bail!(
            "input {} is a directory: aescrypt encrypts one file or stream (for a directory, \
             archive it: tar -C {} -c . | aescrypt ... -i -)",
            path.display(),
            path.display()
        );
    }
    Ok(())
}
