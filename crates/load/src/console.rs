//! aesload's report on standard output, written so that no state of
//! stdout panics: a closed pipe (`aesload ... | head -1`) quietly ends
//! the printing and the run goes on (its `--json`/`--csv` files are still
//! written); any other write error (a full disk) ends the printing too and
//! is remembered, for `main` to say in one line and exit 1. With an
//! output file `-` (`--json -`), stdout carries that file alone and the
//! report goes to stderr.
//!
//! [`outln!`](crate::outln) is `println!` through this module.

use std::fmt;
use std::io::{self, Write};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

static REPORT_TO_STDERR: AtomicBool = AtomicBool::new(false);
static STDOUT_CLOSED: AtomicBool = AtomicBool::new(false);
static STDOUT_ERROR: Mutex<Option<String>> = Mutex::new(None);

/// Sends the report to stderr from now on (stdout carries an output file).
pub fn report_to_stderr() {
    REPORT_TO_STDERR.store(true, Ordering::Relaxed);
}

/// Writes the report text `args`.
pub fn print(args: fmt::Arguments<'_>) {
    if REPORT_TO_STDERR.load(Ordering::Relaxed) {
        let _ = io::stderr().write_fmt(args);
        return;
    }
    if STDOUT_CLOSED.load(Ordering::Relaxed) {
        return;
    }
    let mut stdout = io::stdout().lock();
    if let Err(err) = stdout.write_fmt(args).and_then(|()| stdout.flush()) {
        note_stdout_error(&err);
    }
}

/// Records a failed write to stdout: a closed pipe ends the printing
/// quietly, any other error is kept for [`stdout_error`].
pub fn note_stdout_error(err: &io::Error) {
    STDOUT_CLOSED.store(true, Ordering::Relaxed);
    if err.kind() != io::ErrorKind::BrokenPipe {
        if let Ok(mut kept) = STDOUT_ERROR.lock() {
            kept.get_or_insert_with(|| format!("cannot write to stdout: {err}"));
        }
    }
}

/// The first write error on stdout other than a closed pipe, if any.
pub fn stdout_error() -> Option<String> {
    STDOUT_ERROR.lock().ok().and_then(|kept| kept.clone())
}

/// `println!` for the report: see the [module](self).
#[macro_export]
macro_rules! outln {
    () => {
        $crate::console::print(format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::console::print(format_args!("{}\n", format_args!($($arg)*)))
    };
}

/// `print!` for the report: see the [module](self).
#[macro_export]
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::console::print(format_args!($($arg)*))
    };
}
