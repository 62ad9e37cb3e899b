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
use rustix::process::Pid;
use std::io;
use std::os::fd::{FromRawFd, OwnedFd};

/// `fork(2)`: the parent gets the child (pidfd included, unreaped), the
/// child gets `None`. The child inherits the signal mask (so every signal
/// stays blocked) but no pending signal, and no parent-death signal.
pub fn fork() -> io::Result<Option<Child>> {
    // SAFETY: the tools are single-threaded, so no other thread can hold a
    // lock (allocator, stdio) that the child would then wait on forever.
    let pid = unsafe { libc::fork() };
    match pid {
        -1 => Err(io::Error::last_os_error()),
        0 => Ok(None),
        pid => {
            let pid = Pid::from_raw(pid).expect("fork returns a positive pid to the parent");
            Ok(Some(Child::new(pid, pidfd::open_pinned(pid))))
        }
    }
}

/// `pipe2(O_CLOEXEC | O_NONBLOCK)`: (read end, write end). Neither end
/// reaches COMMAND; a full pipe or a gone reader never blocks the writer.
pub fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [-1; 2];
    // SAFETY: `fds` has room for the two descriptors pipe2 writes.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: two new descriptors that nothing else owns.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// `setsid(2)`: a new session and group, without a controlling terminal.
pub fn new_session() -> io::Result<()> {
    // SAFETY: setsid has no arguments.
    if unsafe { libc::setsid() } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// `setpgid(0, 0)`: a new process group in the same session.
pub fn new_group() -> io::Result<()> {
    // SAFETY: setpgid on ourselves with plain integers.
    if unsafe { libc::setpgid(0, 0) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
