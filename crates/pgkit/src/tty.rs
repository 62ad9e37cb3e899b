//! The controlling terminal (on stdin): who is in the foreground, handing it
//! to COMMAND's group and taking it back.
//!
//! The tool keeps SIGTTOU blocked, so `tcsetpgrp` from a background group
//! succeeds instead of stopping the tool.

/// Whether COMMAND gets the terminal (`--foreground`, `--no-foreground`,
/// or neither).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Foreground {
    /// Hand it over when stdin is a terminal and the tool is in its
    /// foreground group, as tini does.
    Auto,
    /// Hand it over whenever stdin is a terminal.
    On,
    /// Never.
    Off,
}

impl Foreground {
    /// Whether to hand the terminal over now.
    pub fn hand_over(self) -> bool {
        match self {
            Foreground::Auto => we_are_foreground(),
            Foreground::On => is_tty(),
            Foreground::Off => false,
        }
    }
}

/// Whether stdin is a terminal.
pub fn is_tty() -> bool {
    // SAFETY: isatty only inspects the descriptor.
    unsafe { libc::isatty(0) == 1 }
}

/// Whether stdin is a terminal and this process's group is its foreground
/// group (the case in which tini and the `auto` default hand it over).
pub fn we_are_foreground() -> bool {
    // SAFETY: tcgetpgrp and getpgrp have no memory arguments.
    is_tty() && unsafe { libc::tcgetpgrp(0) == libc::getpgrp() }
}

/// The terminal's foreground group, if stdin is a terminal.
pub fn foreground_group() -> Option<i32> {
    // SAFETY: tcgetpgrp has no memory arguments.
    let pgid = unsafe { libc::tcgetpgrp(0) };
    (pgid > 0).then_some(pgid)
}

/// Make `pgid` the foreground group of the terminal on stdin.
pub fn give_to(pgid: i32) -> std::io::Result<()> {
    // SAFETY: tcsetpgrp has no memory arguments.
    if unsafe { libc::tcsetpgrp(0, pgid) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Take the terminal back for this process's group, but only from `from`:
/// if someone else holds it now (a shell after a stop), leave it.
pub fn take_back_from(from: i32) {
    if foreground_group() == Some(from) {
        // SAFETY: getpgrp has no preconditions.
        let _ = give_to(unsafe { libc::getpgrp() });
    }
}

/// This process's group id.
pub fn own_group() -> i32 {
    // SAFETY: getpgrp has no preconditions.
    unsafe { libc::getpgrp() }
}

/// Stop this process with `sig` (TSTP, TTIN or TTOU, default action), the way
/// a job stops, and return once it is continued. In an orphaned process group
/// the kernel discards such a stop and this returns at once: the caller
/// carries on rather than leave COMMAND stopped for ever.
pub fn stop_self(sig: crate::Signal) {
    let old = crate::sigraw::unblock(crate::SigSet::of(&[sig]));
    // An unblocked signal sent to oneself is delivered before kill returns,
    // so the stop happens inside this call.
    // SAFETY: kill on our own pid.
    unsafe { libc::kill(libc::getpid(), sig.raw()) };
    crate::sigraw::set_mask(old);
}

/// What the tool does when COMMAND stops: with the terminal handed over, a
/// stop from the terminal (TSTP, TTIN, TTOU) is followed — the tool takes the
/// terminal back and stops itself the same way, so the shell sees the job
/// stopped; when the shell continues it (`fg`), the tool hands the terminal
/// back and continues COMMAND. Without the terminal, a COMMAND stopped for
/// reading from (or writing to) it gets a one-line hint instead of a silent
/// hang.
pub struct JobControl {
    /// The terminal was handed to COMMAND's group.
    pub handed_over: bool,
}

impl JobControl {
    /// Act on a stop of COMMAND (`child` is its pid and group id).
    pub fn on_stop(&self, child: &crate::Child, sig: crate::Signal) {
        use crate::Signal;
        let from_tty = sig == Signal::TSTP || sig == Signal::TTIN || sig == Signal::TTOU;
        if !self.handed_over {
            if sig == Signal::TTIN || sig == Signal::TTOU {
                let what = if sig == Signal::TTIN {
                    "read from"
                } else {
                    "wrote to"
                };
                crate::warn!(
                    "COMMAND (pid {}) is stopped by SIG{sig}: it {what} the terminal while in the \
                     background; run with --foreground to give it the terminal",
                    child.pid()
                );
            }
            return;
        }
        if !from_tty {
            return;
        }
        crate::verbose!("COMMAND stopped by {sig}; stopping too");
        take_back_from(child.pid());
        stop_self(sig);
        // Continued (or the stop was discarded in an orphaned group).
        if we_are_foreground() {
            let _ = give_to(child.pid());
        }
        crate::verbose!("continued; continuing COMMAND");
        let _ = child.signal(crate::Target::Group, Signal::CONT);
    }

    /// COMMAND is gone: take the terminal back if it still has it.
    pub fn release(&self, child_pgid: i32) {
        if self.handed_over {
            take_back_from(child_pgid);
        }
    }
}
