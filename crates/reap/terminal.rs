//! The terminal and job control of COMMAND, seen from the process that owns
//! COMMAND (the back, or reap itself as PID 1).
//!
//! Split in two, the shell knows only the front (its job is the front's
//! group). When the terminal stops COMMAND (Ctrl-Z, or a read or write in
//! the background), the back gives the terminal back to the front's group
//! and asks the front to stop the same way; the shell sees its job stopped.
//! When the shell continues the job (`fg`, `bg`), the front tells the back,
//! which hands the terminal to COMMAND again if the front's group has it
//! (`fg`) and continues COMMAND's group. As PID 1 there is no front: pgkit's
//! [`JobControl`] rules apply as in pgwrap.

use crate::guardian::ToFront;
use pgkit::tty::{self, JobControl};
use pgkit::{verbose, Child, Signal, Target};

pub struct Terminal {
    /// COMMAND's group was given the terminal.
    handed_over: bool,
    /// The front, when reap is split in two.
    front: Option<ToFront>,
    /// COMMAND is stopped (job control).
    pub stopped: bool,
}

fn from_tty(sig: Signal) -> bool {
    sig == Signal::TSTP || sig == Signal::TTIN || sig == Signal::TTOU
}

impl Terminal {
    pub fn new(handed_over: bool, front: Option<ToFront>) -> Terminal {
        Terminal {
            handed_over,
            front,
            stopped: false,
        }
    }

    /// COMMAND was stopped by `sig`.
    pub fn on_stop(&mut self, child: &Child, sig: Signal) {
        self.stopped = true;
        verbose!("COMMAND stopped by {sig}");
        match self.front.as_ref() {
            Some(front) if self.handed_over && from_tty(sig) => {
                if tty::foreground_group() == Some(child.pid()) {
                    let _ = tty::give_to(front.front_pgid);
                }
                if !front.stop_front(sig) {
                    // No front to follow: do not leave COMMAND stopped.
                    let _ = child.signal(Target::Group, Signal::CONT);
                }
            }
            _ => JobControl {
                handed_over: self.handed_over,
            }
            .on_stop(child, sig),
        }
    }

    /// The front was continued (or reap received CONT): continue COMMAND
    /// if it is stopped, with the terminal if the front's group has it.
    pub fn on_continue(&mut self, child: &Child) {
        if !self.stopped {
            return;
        }
        if let Some(front) = &self.front {
            if self.handed_over && tty::foreground_group() == Some(front.front_pgid) {
                let _ = tty::give_to(child.pid());
            }
        }
        verbose!("continuing COMMAND");
        let _ = child.signal(Target::Group, Signal::CONT);
    }

    /// COMMAND is gone: the terminal goes back to the shell's job.
    pub fn release(&self, child_pgid: i32) {
        if !self.handed_over {
            return;
        }
        match &self.front {
            Some(front) if tty::foreground_group() == Some(child_pgid) => {
                let _ = tty::give_to(front.front_pgid);
            }
            Some(_) => {}
            None => tty::take_back_from(child_pgid),
        }
    }
}
