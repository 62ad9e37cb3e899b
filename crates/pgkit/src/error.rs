//! One-line errors that carry the tool's exit status.
//!
//! Before COMMAND is started every failure is an `Error`: the tool prints
//! `TOOL: what is wrong, and the fix` on one line and exits with `code`
//! (125 for its own failures, 126 and 127 for COMMAND's). After COMMAND is
//! started, the tools log and carry on instead: a wrapper that dies orphans
//! its child.

use std::fmt;
use std::io;

/// The tool itself failed: bad usage, or a system call before COMMAND ran.
pub const TOOL_FAILED: i32 = 125;
/// COMMAND was found but could not be executed.
pub const CANNOT_EXEC: i32 = 126;
/// COMMAND was not found.
pub const NOT_FOUND: i32 = 127;

/// A failure with the exit status it ends the tool with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    pub code: i32,
    pub msg: String,
}

impl Error {
    /// Bad usage (an option, a value, a missing COMMAND): exit status 125.
    /// A failed system call is [`Error::sys`].
    pub fn usage(msg: impl Into<String>) -> Error {
        Error {
            code: TOOL_FAILED,
            msg: msg.into(),
        }
    }

    /// A system call failed before COMMAND was started: `unable to WHAT: ERRNO`.
    pub fn sys(what: &str, err: io::Error) -> Error {
        Error::usage(format!("unable to {what}: {}", describe(&err)))
    }

    /// Print the one line on stderr and exit with `code` (before COMMAND
    /// ran, so there is no status of COMMAND's to end with: see
    /// [`crate::exit`] for that).
    pub fn exit(&self) -> ! {
        // The tool's own failure is said as a refused command line is
        // (`TOOL: ...`); COMMAND's (126, 127) as every line said while
        // running (`TOOL[PID]: ...`), as reap, whose back reports it, does.
        if self.code == TOOL_FAILED {
            crate::log::usage_error(&self.msg);
        } else {
            crate::log::error(&self.msg);
        }
        std::process::exit(self.code)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.msg)
    }
}

/// An OS error as a short phrase, without Rust's "(os error N)" suffix.
pub fn describe(err: &io::Error) -> String {
    let mut text = err.to_string();
    text.truncate(text.find(" (os error").unwrap_or(text.len()));
    text
}
