//! Reaping what a subreaper (or PID 1) adopts.
//!
//! SIGCHLD does not queue: one signal may stand for many exits, so each wake
//! reaps in a loop until `waitid` finds nothing. The main COMMAND is never
//! reaped here (its `Child` reaps it), so its pid and group stay pinned.

use crate::child::{exit_status, waitid, Status};
use std::io;

/// Every child of this process, from `/proc/self/task/TID/children`
/// (zombies included). `None` where that file cannot be read.
pub fn children() -> Option<Vec<i32>> {
    crate::procfs::own_children()
}

/// Reap every exited child except `keep` (the unreaped COMMAND). Returns the
/// reaped pids with their statuses. `keep = None` reaps everything.
pub fn reap_except(keep: Option<i32>) -> io::Result<Vec<(i32, Status)>> {
    let mut reaped = Vec::new();
    loop {
        // Peek first (WNOWAIT): the exited child waitid names may be `keep`.
        let info = match waitid(libc::P_ALL, 0, libc::WEXITED | libc::WNOWAIT) {
            Ok(Some(info)) => info,
            Ok(None) => break,
            Err(e) if e.raw_os_error() == Some(libc::ECHILD) => break,
            Err(e) => return Err(e),
        };
        if Some(info.pid) != keep {
            if waitid(libc::P_PID, info.pid as libc::id_t, libc::WEXITED)?.is_some() {
                reaped.push((info.pid, exit_status(&info)));
            }
            continue;
        }
        // `keep` is a zombie and waitid(P_ALL) will keep naming it first:
        // reap the others by pid, found in /proc.
        for pid in children().unwrap_or_default() {
            if pid == info.pid {
                continue;
            }
            if let Ok(Some(other)) = waitid(libc::P_PID, pid as libc::id_t, libc::WEXITED) {
                reaped.push((pid, exit_status(&other)));
            }
        }
        break;
    }
    Ok(reaped)
}

/// `prctl(PR_SET_CHILD_SUBREAPER)`: orphans among our descendants are
/// re-parented to us (not to init), so we see their exits and can reap them.
pub fn become_subreaper() -> io::Result<()> {
    // SAFETY: prctl with PR_SET_CHILD_SUBREAPER takes one integer argument.
    if unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1 as libc::c_ulong, 0, 0, 0) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Whether this process is PID 1 of its PID namespace (init: no default
/// signal actions, and every orphan of the namespace is ours).
pub fn is_pid1() -> bool {
    std::process::id() == 1
}
