//! The one way a tool ends once COMMAND has run: COMMAND's exit code, or
//! COMMAND's death signal re-raised on the tool itself, so whoever waits for
//! the tool (a shell, systemd, a CI agent) sees exactly what it would have
//! seen without the wrapper.

use crate::child::Status;
use crate::signal::{SigSet, Signal};

/// Exit with `code` (the low 8 bits, as the kernel keeps them).
pub fn exit_code(code: i32) -> ! {
    std::process::exit(code)
}

/// End the way COMMAND ended: `exit(N)`, or die of the same signal.
pub fn finish(status: Status) -> ! {
    match status {
        Status::Exited(n) => exit_code(n),
        Status::Signaled(sig) => die_of(sig),
    }
}

/// Die of `sig`: core dumps off (COMMAND already dumped, if it was going to),
/// default action, unblocked, then raised. A process that cannot die of a
/// signal this way — PID 1, which the kernel shields from default actions —
/// exits with 128+S instead, as a shell would report it.
///
/// "Core dumps off" takes two calls: `RLIMIT_CORE` 0 stops a core file, but
/// a piped `core_pattern` (systemd-coredump, apport) runs whatever the
/// limit; a process that is not dumpable (`PR_SET_DUMPABLE` 0) gets no dump
/// of either kind, so no core handler runs on the tool's behalf.
pub fn die_of(sig: Signal) -> ! {
    // SAFETY: getpid has no preconditions.
    if unsafe { libc::getpid() } != 1 {
        // SAFETY: plain system calls on this process with valid arguments.
        unsafe {
            let none = libc::rlimit {
                rlim_cur: 0,
                rlim_max: 0,
            };
            libc::setrlimit(libc::RLIMIT_CORE, &none);
            libc::prctl(libc::PR_SET_DUMPABLE, 0 as libc::c_ulong, 0, 0, 0);
        }
        let _ = crate::sigraw::set_disposition(sig, false);
        crate::startup::unblock(SigSet::of(&[sig]));
        // SAFETY: kill on our own pid.
        unsafe { libc::kill(libc::getpid(), sig.raw()) };
    }
    exit_code(128 + sig.raw())
}
