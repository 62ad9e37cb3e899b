//! Reaping what a subreaper (or PID 1) adopts.
//!
//! SIGCHLD does not queue: one signal may stand for many exits, so each wake
//! reaps in a loop until `waitid` finds nothing. The main COMMAND is never
//! reaped here (its `Child` reaps it), so its pid and group stay pinned.

use crate::child::{exit_status, waitid, Status};
use rustix::process::{set_child_subreaper, Pid, WaitIdOptions};
use std::io;

/// Reap every exited child except `keep` (the unreaped COMMAND). Returns the
/// reaped pids with their statuses, and whether `keep` has exited and is now
/// our only child: then nothing below us is left.
///
/// Outside PID 1 that answer holds until `keep` is reaped: a zombie has no
/// children, and only a live descendant's orphan can become our child. As
/// PID 1 an orphan of a process that entered the namespace from outside
/// (`docker exec`) becomes ours too. `keep = None` reaps everything.
pub fn reap_except(keep: Option<i32>) -> io::Result<(Vec<(i32, Status)>, bool)> {
    let mut reaped = Vec::new();
    let mut reap = |pid: Pid| -> io::Result<bool> {
        let Some(s) = waitid(pid, WaitIdOptions::EXITED)? else {
            return Ok(false);
        };
        reaped.push((pid.as_raw_pid(), exit_status(&s)));
        Ok(true)
    };
    loop {
        // Peek first (WNOWAIT): the exited child waitid names may be `keep`.
        let pid = match exited_child() {
            Ok(Some(pid)) => pid,
            Ok(None) => break,
            Err(e) if e.raw_os_error() == Some(libc::ECHILD) => break,
            Err(e) => return Err(e),
        };
        if Some(pid.as_raw_pid()) != keep {
            reap(pid)?;
            continue;
        }
        // `keep` is a zombie and waitid(P_ALL) will keep naming it first:
        // reap the others by pid, found in /proc. Alone if each was a zombie.
        let others = crate::procfs::own_children();
        let mut alone = others.is_some();
        for other in others.into_iter().flatten().filter_map(crate::typed_pid) {
            alone &= other == pid || matches!(reap(other), Ok(true));
        }
        return Ok((reaped, alone));
    }
    Ok((reaped, false))
}

/// The pid of an exited child, left unreaped
/// (`waitid(P_ALL, WEXITED | WNOWAIT | WNOHANG)`); `None` if no child has
/// exited.
///
/// The one `waitid` left on libc: it must say which child, and rustix's
/// `WaitIdStatus` has no accessor for `si_pid` (nor does its `wait`, which
/// has the pid, have WNOWAIT: it would reap `keep`).
fn exited_child() -> io::Result<Option<Pid>> {
    loop {
        let options = libc::WEXITED | libc::WNOWAIT | libc::WNOHANG;
        // SAFETY: siginfo_t is plain data, valid all zero, and waitid writes
        // it; its si_pid is the child's after a successful call, and stays 0
        // where WNOHANG found none or the call failed.
        let (r, pid) = unsafe {
            let mut info: libc::siginfo_t = std::mem::zeroed();
            let r = libc::waitid(libc::P_ALL, 0, &mut info, options);
            (r, info.si_pid())
        };
        if r < 0 {
            let err = io::Error::last_os_error();
            if err.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(err);
        }
        return Ok(crate::typed_pid(pid));
    }
}

/// `prctl(PR_SET_CHILD_SUBREAPER)`: orphans among our descendants are
/// re-parented to us (not to init), so we see their exits and can reap them.
pub fn become_subreaper() -> io::Result<()> {
    // rustix passes the pid as the prctl argument: any pid (non-zero) sets
    // the attribute, `None` clears it; 1, not ours, saves a `getpid`.
    Ok(set_child_subreaper(Some(Pid::INIT))?)
}

/// Whether this process is PID 1 of its PID namespace (init: no default
/// signal actions, and every orphan of the namespace is ours).
pub fn is_pid1() -> bool {
    std::process::id() == 1
}
