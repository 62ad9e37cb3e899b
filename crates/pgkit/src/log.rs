//! Diagnostics on stderr: `-v` decision lines and the always-printed errors
//! and hints.
//!
//! Every line is assembled in memory and written with a single `write(2)`, so
//! lines from the tools of a chain never interleave mid-line. Nothing here is
//! ever called from a signal handler (the suite installs none).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;

static TOOL: OnceLock<&'static str> = OnceLock::new();
static VERBOSE: AtomicBool = AtomicBool::new(false);

/// Name the tool for every line it prints (`pgwrap`, `graceful`, `reap`).
pub fn set_tool(tool: &'static str) {
    let _ = TOOL.set(tool);
}

/// The tool's name as given to [`set_tool`].
pub fn tool() -> &'static str {
    TOOL.get().copied().unwrap_or("pgkit")
}

/// Turn `-v` lines on or off.
pub fn set_verbose(on: bool) {
    VERBOSE.store(on, Ordering::Relaxed);
}

/// Whether `-v` lines are printed.
pub fn verbose_enabled() -> bool {
    VERBOSE.load(Ordering::Relaxed)
}

/// `TOOL[PID]: msg` — a `-v` decision line.
pub fn verbose_line(msg: std::fmt::Arguments<'_>) {
    let line = format!("{}[{}]: {}\n", tool(), std::process::id(), msg);
    write_stderr(line.as_bytes());
}

/// `TOOL: msg` — an error or a hint, printed whatever `-v` says.
pub fn error(msg: &str) {
    let line = format!("{}: {}\n", tool(), msg);
    write_stderr(line.as_bytes());
}

/// Set once stderr is a broken pipe: nothing more is written to it.
static STDERR_BROKEN: AtomicBool = AtomicBool::new(false);

/// One `write(2)` of the whole line (a short write is finished, an error
/// such as a closed stderr is ignored: a diagnostic must never stop the
/// tool). After EPIPE nothing more is written: each write would raise
/// another SIGPIPE for nothing.
fn write_stderr(mut buf: &[u8]) {
    while !buf.is_empty() && !STDERR_BROKEN.load(Ordering::Relaxed) {
        // SAFETY: `buf` is a valid slice for its whole length; fd 2 may be
        // closed, which write reports as EBADF and we ignore.
        let n = unsafe { libc::write(2, buf.as_ptr().cast(), buf.len()) };
        if n <= 0 {
            let err = std::io::Error::last_os_error();
            if n < 0 && err.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            if n < 0 && err.raw_os_error() == Some(libc::EPIPE) {
                STDERR_BROKEN.store(true, Ordering::Relaxed);
            }
            return;
        }
        buf = &buf[n as usize..];
    }
}

/// Print a `-v` line: `verbose!("forwarded {} to group {}", sig, pgid)`.
#[macro_export]
macro_rules! verbose {
    ($($arg:tt)*) => {
        if $crate::log::verbose_enabled() {
            $crate::log::verbose_line(format_args!($($arg)*));
        }
    };
}

/// Print an always-shown line: `warn!("COMMAND is stopped ...")`.
#[macro_export]
macro_rules! warn {
    ($($arg:tt)*) => {
        $crate::log::error(&format!($($arg)*))
    };
}
