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

use crate::{pidfd, procfs};
use std::collections::VecDeque;
use std::os::fd::OwnedFd;

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
    if !procfs::usable() {
        return None;
    }
    // A walk that finds nothing is trusted only once our children list
    // reads no newcomer after it (seed 1402269 of the chaos harness: a
    // member re-parented to us after the first read was missed, and
    // graceful left it running); as many walks as that takes, up to the
    // walk's bound (an orphan storm that never pauses would hold graceful
    // here, deaf to signals and to its deadline).
    crate::descend::until_no_newcomer(
        crate::descend::WALKS,
        |children| walk_for(pgid, leader, children),
        Option::is_some,
    )
    .flatten()
}

/// One walk down from `children` (this process's, as read).
fn walk_for(pgid: i32, leader: i32, children: &[i32]) -> Option<Member> {
    let mut queue: VecDeque<i32> = children.iter().copied().collect();
    while let Some(pid) = queue.pop_front() {
        let Some(seen) = procfs::stat(pid) else {
            continue;
        };
        // A zombie neither counts nor has children (they were re-parented
        // when it exited).
        if seen.is_zombie() {
            continue;
        }
        if seen.pgid == pgid && pid != leader {
            let pidfd = crate::typed_pid(pid).and_then(|pid| pidfd::open(pid).ok());
            // Read again after opening: the same start time means the pidfd
            // names the process the walk saw, not a later owner of the pid.
            let now = procfs::stat(pid);
            if now.is_some_and(|p| p.start == seen.start && p.pgid == pgid && !p.is_zombie()) {
                return Some(Member { pid, pidfd });
            }
        }
        queue.extend(procfs::children_of(pid).unwrap_or_default());
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::CommandExt;
    use std::process::Command;

    #[test]
    fn finds_a_live_member_and_not_a_zombie_or_the_leader() {
        let mut child = Command::new("sleep")
            .arg("30")
            .process_group(0)
            .spawn()
            .unwrap();
        let pid = child.id() as i32;
        let found = live_member(pid, -1).expect("the sleeping child is a member");
        assert_eq!(found.pid, pid);
        assert!(found.pidfd.is_some());
        assert!(live_member(pid, pid).is_none(), "the leader is left out");
        child.kill().unwrap();
        // A zombie no longer counts.
        while procfs::stat(pid).is_some_and(|p| !p.is_zombie()) {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert!(live_member(pid, -1).is_none());
        child.wait().unwrap();
        assert!(live_member(pid, -1).is_none());
    }
}
