//! Diagnostics on stderr: `-v` decision lines and the always-printed errors
//! and hints.
//!
//! Every line is assembled in memory and written with a single `write(2)`, so
//! lines from the tools of a chain never interleave mid-line. Nothing here is
//! ever called from a signal handler (the suite installs none).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;

static TOOL: OnceLock<&'static str> = OnceLock::new();
/// How many `-v` the command line gave (`-vv`: 2): the one verbosity setting.
static VERBOSITY: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

/// Set at start when stderr is the journal's stream (see [`set_tool`]).
static JOURNAL: AtomicBool = AtomicBool::new(false);

/// Name the tool for every line it prints (`pgwrap`, `graceful`, `reap`),
/// and decide, once, whether stderr is the journal's stream: the file
/// `JOURNAL_STREAM` names by `DEV:INODE` in decimal (systemd.exec(5)). There each line
/// starts with its priority (sd-daemon(3)) and `TOOL: `, without the PID
/// (journald records the stream's).
pub fn set_tool(tool: &'static str) {
    let _ = TOOL.set(tool);
    let named = crate::spawn::var("JOURNAL_STREAM").and_then(|v| v.to_str());
    let named = named.unwrap_or_default();
    let st = rustix::fs::fstat(rustix::stdio::stderr()).ok();
    // Nothing formatted without the variable, the usual case: two numbers
    // formatted by std cost some 4 000 instructions at every start.
    let ours =
        st.is_some_and(|s| !named.is_empty() && named == format!("{}:{}", s.st_dev, s.st_ino));
    JOURNAL.store(ours, Ordering::Relaxed);
}

/// The tool's name as given to [`set_tool`].
pub fn tool() -> &'static str {
    TOOL.get().copied().unwrap_or("pgkit")
}

/// One more `-v` on the command line.
pub fn more_verbose() {
    VERBOSITY.fetch_add(1, Ordering::Relaxed);
}

/// How many `-v` were given: the lines of a second `-v` are for a look at
/// the details (what every background job starts with, for one).
pub fn verbosity() -> u32 {
    VERBOSITY.load(Ordering::Relaxed)
}

/// Whether `-v` lines are printed.
pub fn verbose_enabled() -> bool {
    verbosity() > 0
}

/// `TOOL[PID]: msg` — a `-v` decision line.
pub fn verbose_line(msg: std::fmt::Arguments<'_>) {
    say(6, true, &senders(msg.to_string()));
}

/// A signal's sender of pid 0 is no process: the kernel sent it, or the
/// terminal's line discipline (Ctrl-C, Ctrl-Z, a resize). Every line that
/// names a sender writes `from pid N`; that one is said as what it is.
fn senders(msg: String) -> String {
    const ZERO: &str = "from pid 0";
    const KERNEL: &str = "from the terminal/kernel";
    let mut parts = msg.split(ZERO);
    let mut out = parts.next().unwrap_or_default().to_string();
    for part in parts {
        // `from pid 07`: a pid that starts with 0, said as it is.
        let pid = part.starts_with(|c: char| c.is_ascii_digit());
        out.push_str(if pid { ZERO } else { KERNEL });
        out.push_str(part);
    }
    out
}

/// `TOOL[PID]: msg` — a line printed whatever `-v` says (a survivor, a
/// cap, a failed cleanup, COMMAND not found): the same prefix as the `-v`
/// lines, so that in a chain of two of the same tool the line tells which
/// one spoke.
pub fn error(msg: &str) {
    say(4, true, msg);
}

/// As [`error`], a notice (priority 5 on the journal's stream): news the
/// user should have, not trouble (a cap of the grace, a wait past a deadline).
pub fn notice(msg: &str) {
    say(5, true, msg);
}

/// `TOOL: msg` — the one line of a command line refused (exit 125, nothing
/// started), as `env`, `timeout` and the contract write it.
pub fn usage_error(msg: &str) {
    say(3, false, msg);
}

/// One line: `TOOL[PID]: ` (`TOOL: ` without `pid`) and `msg`; on the
/// journal's stream `<PRIORITY>TOOL: ` and `msg`.
fn say(priority: u8, pid: bool, msg: &str) {
    let line = match (JOURNAL.load(Ordering::Relaxed), pid) {
        (true, _) => format!("<{priority}>{}: {}\n", tool(), one_line(msg)),
        (false, true) => format!("{}[{}]: {}\n", tool(), std::process::id(), one_line(msg)),
        (false, false) => format!("{}: {}\n", tool(), one_line(msg)),
    };
    write_all(rustix::stdio::stderr(), line.as_bytes());
}

/// `msg` with every control character (a newline, a carriage return, an
/// escape sequence's ESC) written as an escape (`\n`, `\r`, `\u{1b}`): a
/// value from the command line or a file name quoted in a message can
/// neither break the one line nor drive the terminal.
pub fn one_line(msg: &str) -> std::borrow::Cow<'_, str> {
    if !msg.chars().any(char::is_control) {
        return msg.into();
    }
    let escaped = msg.chars().map(|c| match c.is_control() {
        true => c.escape_default().to_string(),
        false => c.to_string(),
    });
    escaped.collect::<String>().into()
}

/// Set once stderr (or stdout, for `--help`) is a broken pipe: nothing
/// more is written.
static BROKEN: AtomicBool = AtomicBool::new(false);

/// One `write(2)` of the whole line to `fd`, stderr or stdout (a short
/// write is finished, an error such as a closed descriptor is ignored: a
/// diagnostic or `--help` must never stop the tool). After EPIPE nothing
/// more is written: each write would raise another SIGPIPE for nothing.
pub(crate) fn write_all(fd: std::os::fd::BorrowedFd<'_>, mut buf: &[u8]) {
    while !buf.is_empty() && !BROKEN.load(Ordering::Relaxed) {
        // The descriptor may be closed: write reports EBADF, ignored.
        match rustix::io::write(fd, buf) {
            Ok(n @ 1..) => buf = &buf[n..],
            Err(rustix::io::Errno::INTR) => continue,
            // Nothing written, or an error; EPIPE: nobody reads it any more.
            r => return BROKEN.store(r == Err(rustix::io::Errno::PIPE), Ordering::Relaxed),
        }
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

#[cfg(test)]
mod tests {
    use super::one_line;

    #[test]
    fn sender_0_is_the_terminal_or_the_kernel() {
        use super::senders;
        assert_eq!(
            senders("received INT from pid 0: forwarded".into()),
            "received INT from the terminal/kernel: forwarded"
        );
        assert_eq!(
            senders("received INT from pid 0".into()),
            "received INT from the terminal/kernel"
        );
        assert_eq!(
            senders("from pid 07 and from pid 42".into()),
            "from pid 07 and from pid 42"
        );
    }

    #[test]
    fn control_characters_are_escaped() {
        assert_eq!(one_line("plain 'x' é"), "plain 'x' é");
        assert_eq!(one_line("a\nb\r\u{1b}[2J\t"), "a\\nb\\r\\u{1b}[2J\\t");
        assert!(!one_line("\u{85}\u{7f}\n").contains(char::is_control));
    }
}
