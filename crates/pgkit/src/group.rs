//! Who is left of COMMAND's process group once COMMAND itself has exited.
//!
//! COMMAND, the group's leader, stays an unreaped zombie so that the group's
//! id cannot be given to anyone else; but a zombie still counts as a member,
//! so `kill(-pgid, 0)` keeps succeeding and cannot tell whether anyone else
//! is left. A child subreaper finds the others among its own descendants:
//! every process forked inside the group descends from COMMAND, and when one
//! dies its children are re-parented to the nearest subreaper above it, so
//! none leaves the subreaper's tree. (A process that joins the group from
//! outside with `setpgid(2)` is not seen.)
//!
//! The caller learns of the next change without polling: the exit of one of
//! its own children arrives as SIGCHLD, and [`live_member`] hands back a pidfd
//! on the member it found, readable once that member exits even when it is
//! someone else's child. A member that dies during the walk either was the
//! caller's child (SIGCHLD follows) or had a live parent in the tree, which
//! the walk then finds.

use std::collections::VecDeque;
use std::os::fd::{FromRawFd, OwnedFd};

/// A live member of the group, with a pidfd that becomes readable when it
/// exits (`None` on kernels without `pidfd_open`).
pub struct Member {
    pub pid: i32,
    pub pidfd: Option<OwnedFd>,
}

/// A process of group `pgid` other than `leader` that has not exited, found
/// among this process's descendants (breadth first, so its own children come
/// first). `None` when the group holds nothing but the leader, and also
/// without a `/proc` of this PID namespace (its pids would not be ours to
/// open), where the caller can only go by the leader.
pub fn live_member(pgid: i32, leader: i32) -> Option<Member> {
    let own = std::fs::read_link("/proc/self").ok()?;
    if own.to_str()?.parse::<u32>().ok()? != std::process::id() {
        return None;
    }
    let mut queue: VecDeque<i32> = children_of("self").into();
    while let Some(pid) = queue.pop_front() {
        if pid != leader && is_live_member(pid, pgid) {
            let pidfd = pidfd_open(pid);
            // Checked again after opening: if `pid` died and was reused in
            // between, the pidfd would watch a stranger.
            if is_live_member(pid, pgid) {
                return Some(Member { pid, pidfd });
            }
        }
        queue.extend(children_of(&pid.to_string()));
    }
    None
}

/// `/proc/PID/stat` says the process runs (not a zombie) in group `pgid`.
fn is_live_member(pid: i32, pgid: i32) -> bool {
    let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    // The command name may hold spaces and parentheses: fields start after
    // the last ')'. Then: state, ppid, pgrp.
    let Some(rest) = text.rfind(')').map(|i| &text[i + 1..]) else {
        return false;
    };
    let mut fields = rest.split_ascii_whitespace();
    let state = fields.next().unwrap_or("Z");
    let group = fields.nth(1).and_then(|g| g.parse::<i32>().ok());
    !matches!(state, "Z" | "X" | "x") && group == Some(pgid)
}

/// The children of every thread of `pid` (`self` or a number), from
/// `/proc/PID/task/TID/children`; empty when the process is gone.
fn children_of(pid: &str) -> Vec<i32> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    let mut kids = Vec::new();
    for task in tasks.flatten() {
        if let Ok(text) = std::fs::read_to_string(task.path().join("children")) {
            kids.extend(
                text.split_ascii_whitespace()
                    .filter_map(|p| p.parse::<i32>().ok()),
            );
        }
    }
    kids
}

/// `pidfd_open(2)` on any process (not only a child).
fn pidfd_open(pid: i32) -> Option<OwnedFd> {
    // SAFETY: pidfd_open takes a pid and flags; the result is a new
    // close-on-exec descriptor or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) } as i32;
    // SAFETY: a new descriptor nothing else owns.
    (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd) })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    #[test]
    fn finds_a_child_in_the_group_and_not_after_it_exited() {
        // SAFETY: getpgrp has no preconditions.
        let own_group = unsafe { libc::getpgrp() };
        let mut child = Command::new("sleep").arg("30").spawn().unwrap();
        let pid = child.id() as i32;
        let found = live_member(own_group, -1).expect("the sleeping child is a member");
        // Other tests of this binary may have children too; ours is one of them.
        assert!(found.pidfd.is_some());
        assert!(is_live_member(pid, own_group));
        assert!(!is_live_member(pid, own_group + 1_000_000));
        child.kill().unwrap();
        // A zombie no longer counts.
        while std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .map(|s| !s.contains(") Z "))
            .unwrap_or(false)
        {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert!(!is_live_member(pid, own_group));
        child.wait().unwrap();
        assert!(!is_live_member(pid, own_group));
    }
}
