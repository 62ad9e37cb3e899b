//! pidfds: a descriptor that keeps naming one process, even after it exits
//! and its pid is given to another, so a signal sent through it can never
//! reach a stranger.
//!
//! Opening, with its fallbacks: a child the engine starts gets its pidfd from
//! the `clone(CLONE_PIDFD)` that creates it ([`crate::spawn`]); any other
//! process from `pidfd_open(2)`. Where the kernel has neither (before 5.3),
//! or a container's seccomp profile refuses them, there is no pidfd
//! ([`unsupported`]) and each caller falls back on what it has: SIGCHLD to
//! learn of a child's exit, and `kill(2)` on a pid that something else pins
//! (an unreaped child, or a fresh look in `/proc`).
//!
//! Sending: [`send`] is `pidfd_send_signal(2)` made as a raw system call with
//! the engine's own [`Signal`] ([`crate::sigraw::int_call`]): rustix's
//! `Signal` may not carry 32 or 33, which the tools send, forward and
//! re-raise like any other signal. The same holds for `kill(2)`
//! ([`crate::signal::kill`]).

use crate::procfs::Proc;
use crate::signal::Signal;
use rustix::process::{Pid, PidfdFlags};
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd};

/// `pidfd_open(2)`: a close-on-exec descriptor that keeps naming `pid`.
pub fn open(pid: Pid) -> io::Result<OwnedFd> {
    Ok(rustix::process::pidfd_open(pid, PidfdFlags::empty())?)
}

/// `p`'s pidfd, and `p` as read again once it is open: the same start time
/// means the pidfd names the process a walk saw, not a later owner of its
/// pid. `None` if it cannot be opened, or `p` is gone or a zombie.
pub fn pin(p: &Proc) -> Option<(OwnedFd, Proc)> {
    let fd = open(crate::typed_pid(p.pid)?).ok()?;
    let now = crate::procfs::stat(p.pid).filter(|now| now.start == p.start && !now.is_zombie())?;
    Some((fd, now))
}

/// Whether an error of a pidfd call means "no pidfds here": the kernel is
/// older than the call (ENOSYS), or a container's seccomp profile refuses it
/// (EPERM, as Docker's default profile answers for calls it does not know).
pub fn unsupported(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::ENOSYS | libc::EPERM))
}

/// `pidfd_send_signal(2)` with no siginfo (as `kill(2)` would send).
pub fn send(fd: BorrowedFd<'_>, sig: Signal) -> io::Result<()> {
    crate::sigraw::int_call(crate::sigraw::IntCall::PidfdSend(fd.as_raw_fd(), sig)).map(drop)
}

/// Whether a failed signal was refused (a seccomp profile's EPERM or
/// ENOSYS, EINVAL), not "no such process": the signal was not delivered
/// though its target is there.
pub fn refusal(e: &io::Error) -> bool {
    e.raw_os_error() != Some(libc::ESRCH)
}

/// Signal the process `fd` names, or `pid` with `kill(2)` where there is no
/// pidfd or the call is refused. Only for a `pid` that cannot have been
/// reused meanwhile (the caller's unreaped child, or a process just checked
/// in `/proc`).
pub fn send_or_kill(fd: Option<BorrowedFd<'_>>, pid: Pid, sig: Signal) -> io::Result<()> {
    match fd.map(|fd| send(fd, sig)) {
        // Refused (ENOSYS, EPERM, or a filter's EINVAL), or no pidfd: kill.
        // ESRCH is the process's end, which kill would only repeat.
        Some(r) if !r.as_ref().is_err_and(refusal) => r,
        _ => crate::signal::kill(pid.as_raw_nonzero().get(), sig),
    }
}

/// Whether the process `fd` names has ended (its pidfd is readable), asked
/// without waiting.
pub fn readable(fd: BorrowedFd<'_>) -> io::Result<bool> {
    use rustix::event::{PollFd, PollFlags, Timespec};
    let mut pfd = [PollFd::from_borrowed_fd(fd, PollFlags::IN)];
    let now = Timespec::default();
    Ok(rustix::event::poll(&mut pfd, Some(&now))? > 0)
}
