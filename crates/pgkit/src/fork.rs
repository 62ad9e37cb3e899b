//! A second process of the tool itself, and the pipes that link the two.
//!
//! `reap` keeps its promise to run the cleanup even when the process its
//! caller started is SIGKILLed with its whole group: it splits into a front
//! (that process, which stays where the caller put it) and a back (its
//! child, in a group or session of its own, the subreaper of COMMAND's
//! tree). The back learns of the front's death when the pipe from the front
//! reaches end of file.

use crate::child::Child;
use crate::pidfd;
use rustix::pipe::{pipe_with, PipeFlags};
use std::io;
use std::os::fd::OwnedFd;

/// `fork(2)` (libc's: rustix has only `runtime::kernel_fork`, which skips
/// the C library's own bookkeeping of the child): the parent gets the
/// child (pidfd included, unreaped), the child gets `None`. The child inherits the signal mask (so every signal
/// stays blocked) but no pending signal, and no parent-death signal.
pub fn fork() -> io::Result<Option<Child>> {
    // SAFETY: the tools are single-threaded, so no other thread can hold a
    // lock (allocator, stdio) that the child would then wait on forever.
    let pid = unsafe { libc::fork() };
    match pid {
        -1 => Err(io::Error::last_os_error()),
        0 => Ok(None),
        pid => {
            let pid = crate::typed_pid(pid).expect("fork returns a positive pid to the parent");
            Ok(Some(Child::new(pid, pidfd::open(pid).ok())))
        }
    }
}

/// `pipe2(O_CLOEXEC | O_NONBLOCK)`: (read end, write end). Neither end
/// reaches COMMAND; a full pipe or a gone reader never blocks the writer.
pub fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    Ok(pipe_with(PipeFlags::CLOEXEC | PipeFlags::NONBLOCK)?)
}

/// Leave the caller's process group: for a new one in the same session
/// (`group`: `setpgid(0, 0)`), or for a new session and group, without a
/// controlling terminal (`setsid(2)`).
pub fn leave_group(group: bool) -> io::Result<()> {
    match group {
        true => Ok(rustix::process::setpgid(None, None)?),
        false => Ok(rustix::process::setsid().map(drop)?),
    }
}
