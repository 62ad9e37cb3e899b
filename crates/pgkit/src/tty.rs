//! The controlling terminal (on stdin): who is in the foreground, handing it
//! to COMMAND's group and taking it back.
//!
//! The tool keeps SIGTTOU blocked, so `tcsetpgrp` from a background group
//! succeeds instead of stopping the tool.

use rustix::process::getpid;
use rustix::stdio::stdin;
use rustix::termios::{isatty, tcsetpgrp};

/// Whether COMMAND gets the terminal (`--foreground`, `--no-foreground`,
/// or neither).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Foreground {
    /// Hand it over at start when stdin is a terminal and the tool is in its
    /// foreground group, as tini does.
    Auto,
    /// As `Auto`, and also later, when the shell brings the job to the
    /// foreground (`fg`). Never from the background: the terminal is the
    /// shell's then.
    On,
    /// Never.
    Off,
}

impl Foreground {
    /// Whether to hand the terminal over now. Only a job in the foreground
    /// hands it over, whatever the option: a background job that took the
    /// terminal would take it from the shell (which then reads end of file
    /// and exits).
    pub fn hand_over(self) -> bool {
        self != Foreground::Off && we_are_foreground()
    }

    /// Whether to hand it over when the job is continued in the foreground.
    pub fn follows_fg(self) -> bool {
        self == Foreground::On
    }
}

/// The stop signals a terminal sends (or a shell, for its jobs): TSTP
/// (Ctrl-Z), TTIN and TTOU (background read and write).
pub fn is_job_stop(sig: crate::Signal) -> bool {
    sig == crate::Signal::TSTP || is_background_io(sig)
}

/// The stops of a process that read from (TTIN) or wrote to (TTOU) the
/// terminal while in the background.
pub fn is_background_io(sig: crate::Signal) -> bool {
    sig == crate::Signal::TTIN || sig == crate::Signal::TTOU
}

/// Whether stdin is a terminal.
pub fn is_tty() -> bool {
    isatty(stdin())
}

/// Whether stdin is a terminal and this process's group is its foreground
/// group (the case in which tini and the `auto` default hand it over).
///
/// Inside a PID namespace whose terminal's foreground group lies outside
/// it, the foreground group and (if it lies outside too) our own read 0:
/// two zeros say nothing, so the kernel is asked instead ([`may_read`]).
/// Not a terminal: its foreground group cannot be read (ENOTTY).
pub fn we_are_foreground() -> bool {
    match (foreground_raw(), own_group()) {
        (Some(fg), own) if fg > 0 => fg == own,
        (Some(0), 0) => may_read(),
        _ => false,
    }
}

/// The terminal's foreground group, if stdin is our controlling terminal
/// and the group is visible in our PID namespace.
pub fn foreground_group() -> Option<i32> {
    foreground_raw().filter(|&pgid| pgid > 0)
}

/// The terminal's foreground group as our PID namespace numbers it: 0 when
/// it lies outside; `None` when stdin is not our controlling terminal.
fn foreground_raw() -> Option<i32> {
    // rustix answers a group of 0 with EOPNOTSUPP (the ioctl itself never
    // does: a descriptor that is no terminal of ours gives ENOTTY).
    match rustix::termios::tcgetpgrp(stdin()) {
        Ok(pgid) => Some(pgid.as_raw_pid()),
        Err(rustix::io::Errno::OPNOTSUPP) => Some(0),
        Err(_) => None,
    }
}

/// Whether the kernel lets this process's group read the terminal on stdin
/// (our controlling terminal): a read of zero bytes with SIGTTIN blocked
/// returns 0 to the foreground group and fails with EIO for any other (the
/// kernel compares the groups themselves, not their numbers). Nothing is
/// read, nothing is sent.
fn may_read() -> bool {
    use crate::{SigSet, Signal};
    let old = crate::sigraw::block(SigSet::of(&[Signal::TTIN]));
    let got = rustix::io::read(stdin(), &mut [0u8; 0]);
    crate::sigraw::set_mask(old);
    got.is_ok()
}

/// Make `pgid` the foreground group of the terminal on stdin.
pub fn give_to(pgid: i32) -> std::io::Result<()> {
    let pgid = crate::typed_pid(pgid).ok_or(rustix::io::Errno::INVAL)?;
    Ok(tcsetpgrp(stdin(), pgid)?)
}

/// Take the terminal back for this process's group, but only from `from`:
/// if someone else holds it now (a shell after a stop), leave it.
pub fn take_back_from(from: i32) {
    if foreground_group() == Some(from) {
        let _ = give_to(own_group());
    }
}

/// This process's session id (0 where its leader is in an ancestor PID
/// namespace: raw, as rustix's `getsid` assumes an id above 0).
pub fn own_session() -> i32 {
    crate::sigraw::int_call(crate::sigraw::IntCall::OwnSession).unwrap_or(0)
}

/// This process's group id (0 where its leader is in an ancestor PID
/// namespace, as after `nsenter --pid`: raw, as rustix's `getpgrp` assumes
/// an id above 0).
pub fn own_group() -> i32 {
    crate::sigraw::int_call(crate::sigraw::IntCall::Group(0)).unwrap_or(0)
}

/// Stop this process with `sig` (TSTP, TTIN or TTOU, default action), the way
/// a job stops, and return once it is continued: `true`. In an orphaned
/// process group the kernel discards such a stop and this returns at once:
/// `false`. (A stop takes any pending SIGCONT away; the CONT that ends it
/// stays pending, blocked, so it tells the two apart.)
pub fn stop_self(sig: crate::Signal) -> bool {
    let old = crate::sigraw::unblock(crate::SigSet::of(&[sig]));
    // An unblocked signal sent to oneself is delivered before kill returns,
    // so the stop happens inside this call.
    let _ = crate::signal::kill(getpid().as_raw_pid(), sig);
    crate::sigraw::set_mask(old);
    crate::sigraw::pending().contains(crate::Signal::CONT)
}

/// Job control, the same in every tool and mode: the shell's job is the
/// tool and COMMAND together.
///
/// - The tool is stopped from the terminal (it receives TSTP, TTIN or TTOU,
///   which it catches): COMMAND's group is stopped first (SIGSTOP, which
///   nothing can ignore), then the tool stops itself with the same signal,
///   so the shell sees its job stopped and COMMAND is not left running.
/// - COMMAND is stopped from the terminal (it has the terminal, Ctrl-Z
///   reached it): the tool takes the terminal back and stops the same way.
/// - Either way, once the shell continues the job (`fg`, `bg`), the tool
///   hands the terminal back to COMMAND if the job is in the foreground,
///   and continues COMMAND's group.
/// - Without the terminal, a COMMAND stopped for reading from (or writing
///   to) it gets a one-line hint instead of a silent hang.
/// - With `--foreground`, a job started in the background hands the
///   terminal over when the shell brings it to the foreground: a COMMAND
///   stopped by TTIN or TTOU meanwhile stops the tool with the same signal
///   (the shell then sees its job stopped, and `fg` continues it), the hint
///   saying so once.
///
/// In an orphaned process group (or as PID 1) the kernel discards the
/// tool's own stop: it carries on at once and continues COMMAND, rather
/// than leave it stopped for ever.
#[derive(Default)]
pub struct JobControl {
    /// COMMAND's group has (or was given) the terminal.
    pub handed_over: bool,
    /// Hand the terminal over when the job comes to the foreground.
    pub follows_fg: bool,
    /// COMMAND was seen stopped, or stopped by the tool, and not continued
    /// since by the tool (nor, where the caller says so, seen continued).
    stopped: bool,
    /// The line for a background read or write was said.
    hinted: bool,
}

impl JobControl {
    pub fn new(handed_over: bool, mode: Foreground) -> JobControl {
        JobControl {
            handed_over,
            follows_fg: mode.follows_fg(),
            ..JobControl::default()
        }
    }

    /// Act on a stop of COMMAND (`child` is its pid and group id).
    pub fn on_stop(&mut self, child: &crate::Child, sig: crate::Signal) {
        self.stopped = true;
        let background_io = is_background_io(sig);
        if !self.handed_over && background_io && self.follows_fg && we_are_foreground() {
            // --foreground, started in the background and brought to the
            // foreground since: COMMAND gets the terminal it asked for.
            return self.continue_command(child);
        }
        if !self.handed_over {
            if background_io {
                self.hint(child.pid(), sig);
            }
            if background_io && self.follows_fg {
                // --foreground in the background: the job stops as COMMAND
                // did, and `fg` hands the terminal over.
                crate::verbose!("COMMAND stopped by {sig}; stopping too");
                if stop_self(sig) {
                    self.continue_command(child);
                }
                // Else an orphaned group, where the stop is discarded:
                // continuing COMMAND would only stop it again, so it stays
                // stopped, as the line said.
            }
            return;
        }
        if is_job_stop(sig) {
            crate::verbose!("COMMAND stopped by {sig}; stopping too");
            self.stop_job(child, sig);
        }
    }

    /// Whether COMMAND is stopped, as far as job control knows: seen
    /// stopped, or stopped by the tool, and neither continued by the tool
    /// nor seen continued since.
    pub fn is_stopped(&self) -> bool {
        self.stopped
    }

    /// COMMAND was stopped (seen so, or by the tool's own signal) where the
    /// caller handles the stop itself (reap's back, which has a front).
    pub fn mark_stopped(&mut self) {
        self.stopped = true;
    }

    /// COMMAND was seen continued, whoever continued it.
    pub fn continued(&mut self) {
        self.stopped = false;
    }

    /// Say once that COMMAND is stopped by `sig` (TTIN or TTOU) for reading
    /// from or writing to the terminal while it does not have it. With
    /// `--foreground` the job stops too, and `fg` hands the terminal over;
    /// else `--foreground` is what would have given it the terminal.
    pub fn hint(&mut self, pid: i32, sig: crate::Signal) {
        if std::mem::replace(&mut self.hinted, true) {
            return crate::verbose!("COMMAND stopped by {sig} again");
        }
        let what = if sig == crate::Signal::TTIN {
            "read from"
        } else {
            "wrote to"
        };
        let next = if self.follows_fg {
            "the job stops with it; `fg` gives it the terminal (--foreground)"
        } else {
            "run with --foreground to give it the terminal"
        };
        crate::warn!(
            "COMMAND (pid {pid}) is stopped by SIG{sig}: it {what} the terminal while in the \
             background; {next}"
        );
    }

    /// The tool itself received `sig` (TSTP, TTIN or TTOU): stop COMMAND's
    /// group first, then the tool; continue both when continued.
    pub fn on_tool_stop(&mut self, child: &crate::Child, sig: crate::Signal) {
        if child.exit_status().is_some() || child.is_reaped() {
            crate::verbose!("received {sig}: stopping (COMMAND has exited)");
            stop_self(sig);
            return;
        }
        crate::verbose!("received {sig}: stopping COMMAND's group, then stopping too");
        let _ = child.signal(crate::Target::Group, crate::Signal::STOP);
        self.stopped = true;
        self.stop_job(child, sig);
    }

    /// The tool received CONT without having stopped itself: a background
    /// job brought to the foreground with `fg`, or `bg` after a stop the
    /// tool did not make. If COMMAND is stopped, it gets the terminal if it
    /// should have it now, and is continued; returns whether it was.
    pub fn on_continue(&mut self, child: &crate::Child) -> bool {
        if !self.stopped || child.exit_status().is_some() || child.is_reaped() {
            return false;
        }
        self.continue_command(child);
        true
    }

    fn continue_command(&mut self, child: &crate::Child) {
        if (self.handed_over || self.follows_fg) && we_are_foreground() {
            if give_to(child.pid()).is_ok() && !self.handed_over {
                crate::verbose!("in the foreground now: terminal handed over");
            }
            self.handed_over = true;
        }
        crate::verbose!("continuing COMMAND");
        self.stopped = false;
        let _ = child.signal(crate::Target::Group, crate::Signal::CONT);
    }

    fn stop_job(&mut self, child: &crate::Child, sig: crate::Signal) {
        take_back_from(child.pid());
        stop_self(sig);
        // Continued (or the stop was discarded in an orphaned group).
        self.continue_command(child);
    }

    /// Act on what [`crate::Child::poll_job`] has to tell: COMMAND stopped
    /// or continued.
    pub fn follow(&mut self, child: &mut crate::Child) {
        match child.poll_job() {
            Some(crate::child::Job::Stopped(sig)) => {
                crate::verbose!("COMMAND stopped by {sig}");
                self.on_stop(child, sig);
            }
            Some(crate::child::Job::Continued) => self.continued(),
            None => {}
        }
    }

    /// A signal the tool's options leave alone, taken by job control if it
    /// is one of its own (the tool's stop, a CONT that continues COMMAND),
    /// with its `job-control` event; false for any other.
    pub fn on_signal(&mut self, child: &crate::Child, sig: crate::Signal, from: i32) -> bool {
        let stop = is_job_stop(sig);
        if !(stop || sig == crate::Signal::CONT && self.on_continue(child)) {
            return false;
        }
        crate::events::signal(sig, from, "job-control", None);
        if stop {
            self.on_tool_stop(child, sig);
        }
        true
    }

    /// COMMAND is gone: take the terminal back if it still has it.
    pub fn release(&self, child_pgid: i32) {
        if self.handed_over {
            take_back_from(child_pgid);
        }
    }
}
