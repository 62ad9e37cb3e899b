//! The one way a tool ends once COMMAND has run: COMMAND's exit code, or
//! COMMAND's death signal re-raised on the tool itself, so whoever waits for
//! the tool (a shell, systemd, a CI agent) sees exactly what it would have
//! seen without the wrapper.

use crate::child::Status;
use crate::signal::{SigSet, Signal};
use rustix::process::{DumpableBehavior, Resource, Rlimit};

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
    let me = rustix::process::getpid();
    if !me.is_init() {
        let none = Rlimit {
            current: Some(0),
            maximum: Some(0),
        };
        let _ = rustix::process::setrlimit(Resource::Core, none);
        let _ = rustix::process::set_dumpable_behavior(DumpableBehavior::NotDumpable);
        let _ = crate::sigraw::set_disposition(sig, false);
        crate::startup::unblock(SigSet::of(&[sig]));
        let _ = crate::signal::kill(me.as_raw_pid(), sig);
    }
    exit_code(128 + sig.raw())
}
