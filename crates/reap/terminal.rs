//! The terminal and job control of COMMAND, seen from the process that owns
//! COMMAND (the back, or reap itself as PID 1).
//!
//! Split in two, the shell knows only the front (its job is the front's
//! group). When the terminal stops COMMAND (Ctrl-Z, or a read or write in
//! the background), the back gives the terminal back to the front's group
//! and asks the front to stop the same way; the shell sees its job stopped.
//! When the shell continues the job (`fg`, `bg`), the front tells the back,
//! which hands the terminal to COMMAND again if the front's group has it
//! (`fg`) and continues COMMAND's group. With `--foreground`, a COMMAND of a
//! background job stopped by TTIN or TTOU stops the front the same way, and
//! `fg` hands the terminal over. As PID 1 there is no front: pgkit's
//! [`JobControl`] rules apply as in pgwrap.

use crate::guardian::{Link, STOPPED};
use pgkit::tty::{self, JobControl};
use pgkit::{verbose, Child, Signal, Target};

/// COMMAND was stopped by `sig`. `front`: the front, when reap is
/// split in two (so for each call below).
pub fn on_stop(jobs: &mut JobControl, front: Option<&Link>, child: &Child, sig: Signal) {
    jobs.mark_stopped();
    verbose!("COMMAND stopped by {sig}");
    match front {
        Some(link) if !jobs.handed_over && tty::is_background_io(sig) && jobs.follows_fg => {
            if tty::foreground_group() == Some(link.front_pgid) {
                // Brought to the foreground since it started: COMMAND
                // gets the terminal it asked for.
                return on_continue(jobs, front, child);
            }
            // --foreground in the background: the front stops as
            // COMMAND did, and `fg` (the front's CONT) hands over.
            jobs.hint(child.pid(), sig);
            link.send(STOPPED, sig.raw().into());
        }
        Some(front) if jobs.handed_over && tty::is_job_stop(sig) => stop_front(front, child, sig),
        _ => jobs.on_stop(child, sig),
    }
}

/// reap (the front, or reap itself as PID 1) was stopped from the
/// terminal: COMMAND's group is stopped first, then the front the same
/// way, so the shell's whole job stops.
pub fn on_tool_stop(jobs: &mut JobControl, front: Option<&Link>, child: &Child, sig: Signal) {
    let Some(front) = front else {
        return jobs.on_tool_stop(child, sig);
    };
    verbose!("received {sig}: stopping COMMAND's group, then the front");
    let _ = child.signal(Target::Group, Signal::STOP);
    jobs.mark_stopped();
    stop_front(front, child, sig)
}

/// The front was continued (or reap received CONT): continue COMMAND
/// if it is stopped, with the terminal if the front's group has it.
pub fn on_continue(jobs: &mut JobControl, front: Option<&Link>, child: &Child) {
    if !jobs.is_stopped() {
        return;
    }
    let Some(front) = front else {
        jobs.on_continue(child);
        return;
    };
    let wants = jobs.handed_over || jobs.follows_fg;
    if wants && tty::foreground_group() == Some(front.front_pgid) {
        if tty::give_to(child.pid()).is_ok() && !jobs.handed_over {
            verbose!("in the foreground now: terminal handed over");
        }
        jobs.handed_over = true;
    }
    verbose!("continuing COMMAND");
    let _ = child.signal(Target::Group, Signal::CONT);
}

/// COMMAND is gone: the terminal goes back to the shell's job. Once
/// only, and only while COMMAND is unreaped: after that its group's id
/// may belong to a stranger's group, which must keep the terminal.
pub fn release(jobs: &mut JobControl, front: Option<&Link>, child: &Child) {
    if !jobs.handed_over || child.is_reaped() {
        return;
    }
    jobs.handed_over = false;
    let child_pgid = child.pid();
    match front {
        Some(front) if tty::foreground_group() == Some(child_pgid) => {
            let _ = tty::give_to(front.front_pgid);
        }
        Some(_) => {}
        None => tty::take_back_from(child_pgid),
    }
}

/// COMMAND stopped: the terminal back to the front's group if COMMAND's
/// had it, and the front stopped by `sig` too.
fn stop_front(front: &Link, child: &Child, sig: Signal) {
    if tty::foreground_group() == Some(child.pid()) {
        let _ = tty::give_to(front.front_pgid);
    }
    if !front.send(STOPPED, sig.raw().into()) {
        // No front to follow: do not leave COMMAND stopped.
        let _ = child.signal(Target::Group, Signal::CONT);
    }
}
