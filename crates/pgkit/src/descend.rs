//! Every descendant of this process — also those that called `setsid()` or
//! double-forked to escape — found and signalled without ever hitting a
//! stranger, for the sweep a subreaper (or PID 1) makes once COMMAND is done.
//!
//! Finding: the tree is walked down from this process through each
//! process's `/proc/PID/task/TID/children` (one read per thread), and each
//! process found is read in `/proc/PID/stat`; it counts only if its parent
//! there is the process it was listed under, so a pid reused in between is
//! never taken for a descendant. The cost follows the size of the tree, not
//! of the system: with no leftovers, one read of our own children. Where
//! the kernel has no `children` files (CONFIG_PROC_CHILDREN off), one pass
//! over `/proc/*/stat` gives each process's parent instead. As a subreaper,
//! orphans of the tree are re-parented to us, so nothing inside the tree
//! can leave it.
//!
//! Signalling, race-free:
//! - a direct child stays ours until we reap it, so its pid cannot be given
//!   to another process meanwhile: plain `kill(pid)` (the caller must not
//!   reap between the walk and the signal — one thread, so it is easy);
//! - a deeper descendant is opened as a pidfd (`pidfd_open`), then read
//!   again in `/proc`: if the start time is the one the walk saw and its
//!   parent is still in the tree, the pidfd names that very process, and
//!   `pidfd_send_signal` cannot reach whoever gets the pid later.
//!
//! `/proc` must belong to this PID namespace: [`usable`] checks it by
//! `NSpid` (a container or `unshare --pid` without its own `/proc` shows the
//! parent namespace's pids, which we must not signal). Its files are read
//! and parsed, as bytes, in [`crate::procfs`].
//! Without a usable `/proc` the walk returns `None` and the caller falls
//! back (COMMAND's group, or `kill(-1)` as PID 1).

use crate::pidfd;
use crate::procfs::{self, own_pid};
use crate::signal::{self, Signal};
use crate::sorted::{Map, Set};
use rustix::process::{WaitId, WaitIdOptions};
use std::io;
use std::os::fd::{AsFd, OwnedFd};

pub use crate::procfs::{children_of, stat, usable, Proc};

/// Every descendant of this process (children first, then theirs, ...),
/// zombies included. `None` if `/proc` is not usable.
pub fn descendants() -> Option<Vec<Proc>> {
    usable().then(|| walk().or_else(scan)).flatten()
}

/// Down the `children` files, level by level; `None` without them (or
/// where our own children file cannot be read).
///
/// A process that dies during a walk hands its children to us before it
/// becomes a zombie: if the walk saw it a zombie (or not at all), they are
/// in neither its children file nor our list read first, so a walk is
/// trusted only once that list, read again, shows no newcomer. A walk that
/// keeps meeting newcomers (an orphan storm) gives its last walk
/// ([`WALKS`]) as it is, so a storm that never pauses cannot hold the tool in its walk (chaos
/// seed 20269727: graceful's look at what holds the stop up missed a member
/// re-parented to it during the walk, and graceful left it running).
fn walk() -> Option<Vec<Proc>> {
    let me = own_pid();
    let mut before = children_of(me)?;
    for _ in 1..WALKS {
        let out = walk_from(me, before.clone());
        let after = children_of(me)?;
        if after.iter().all(|pid| before.contains(pid)) {
            return Some(out);
        }
        before = after;
    }
    Some(walk_from(me, before))
}

/// The most walks one look at the tree makes while newcomers keep coming.
pub const WALKS: usize = 8;

/// One walk down from `children` (ours, as read).
fn walk_from(me: i32, children: Vec<i32>) -> Vec<Proc> {
    let mut out = Vec::new();
    let mut next = vec![(me, children)];
    while !next.is_empty() {
        let mut deeper = Vec::new();
        for (parent, kids) in next {
            for pid in kids {
                // Listed under `parent` a moment ago. Its parent now is
                // that one, or us (the parent died and, as the subreaper,
                // we adopted it); any other means the pid was reused.
                let Some(p) = stat(pid).filter(|p| p.ppid == parent || p.ppid == me) else {
                    continue;
                };
                out.push(p);
                // A zombie's children were re-parented when it exited.
                if !p.is_zombie() {
                    deeper.push((pid, children_of(pid).unwrap_or_default()));
                }
            }
        }
        next = deeper;
    }
    out
}

/// Every process of the system read once, the tree built from the parents.
fn scan() -> Option<Vec<Proc>> {
    let mut by_parent: Map<i32, Vec<Proc>> = Map::new();
    for p in procfs::all()? {
        by_parent.get_or_insert_with(p.ppid, Vec::new).push(p);
    }
    // Level by level: each process's children are added after every
    // process found before it.
    let mut out = by_parent.remove(&own_pid()).unwrap_or_default();
    let mut at = 0;
    while let Some(parent) = out.get(at).map(|p| p.pid) {
        out.extend(by_parent.remove(&parent).unwrap_or_default());
        at += 1;
    }
    Some(out)
}

/// A live member of a process group, with a pidfd that becomes readable
/// when it exits (`None` on kernels without `pidfd_open`).
pub struct Member {
    pub pid: i32,
    pub pidfd: Option<std::os::fd::OwnedFd>,
}

/// Who is left of COMMAND's group `pgid` once COMMAND, its `leader`, has
/// exited: the leader stays an unreaped zombie so that the id cannot be
/// given to anyone else, so `kill(-pgid, 0)` cannot tell. Every process
/// forked inside the group descends from COMMAND and, the tool being a
/// subreaper, stays in its tree: the first live member other than `leader`
/// among [`descendants`] (a process that joins the group from outside with
/// `setpgid(2)` is not seen). `None` when the group holds nothing but the
/// leader, and without a usable `/proc`, where the caller can only go by the
/// leader. The caller learns of the next change without polling: SIGCHLD
/// for one of its children, the pidfd for anyone else.
pub fn live_member(pgid: i32, leader: i32) -> Option<Member> {
    let live = |p: &Proc| p.pgid == pgid && !p.is_zombie();
    descendants()?
        .into_iter()
        .filter(|p| live(p) && p.pid != leader)
        .find_map(|seen| {
            let pidfd = crate::typed_pid(seen.pid).and_then(|pid| pidfd::open(pid).ok());
            // Read again after opening: the same start time means the pidfd
            // names the process the walk saw, not a later owner of the pid.
            let now = stat(seen.pid).filter(|p| p.start == seen.start && live(p));
            now.map(|p| Member { pid: p.pid, pidfd })
        })
}

/// This process's children (zombies included), from
/// `/proc/self/task/TID/children`. `None` if `/proc` is not usable.
pub fn children() -> Option<Vec<i32>> {
    usable().then(procfs::own_children).flatten()
}

/// Whether this process has any child at all, running or exited
/// (`waitid` answers `ECHILD` when it has none).
///
/// Where `waitid` itself is refused (a seccomp profile), no zombie can ever
/// be reaped: then only a child still running counts (from `/proc`), or a
/// sweep would wait for ever on zombies that stay.
pub fn has_children() -> bool {
    let options = WaitIdOptions::EXITED | WaitIdOptions::NOWAIT | WaitIdOptions::NOHANG;
    match rustix::process::waitid(WaitId::All, options) {
        Err(rustix::io::Errno::CHILD) => false,
        Ok(_) | Err(rustix::io::Errno::INTR) => true,
        Err(_) => {
            (children().into_iter().flatten()).any(|p| stat(p).is_some_and(|s| !s.is_zombie()))
        }
    }
}

/// What became of a signal meant for a descendant.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sent {
    /// The process the walk saw got it.
    Delivered,
    /// That process is gone (or has left the tree): nothing was sent.
    Gone,
}

/// Send `sig` to `p`, a descendant found by [`descendants`], without any
/// chance of reaching another process that reused its pid. `tree` holds
/// this process's pid and every pid of the walk `p` came from.
pub fn signal(p: &Proc, sig: Signal, tree: &Set<i32>) -> io::Result<Sent> {
    let esrch = |e: &io::Error| e.raw_os_error() == Some(libc::ESRCH);
    let gone_or = |r: io::Result<()>| match r {
        Ok(()) => Ok(Sent::Delivered),
        Err(e) if esrch(&e) => Ok(Sent::Gone),
        Err(e) => Err(e),
    };
    if p.ppid == own_pid() {
        // Our own unreaped child: the pid is pinned until we reap it.
        return gone_or(signal::kill(p.pid, sig));
    }
    let Some(pid) = crate::typed_pid(p.pid) else {
        return Ok(Sent::Gone);
    };
    let fd = match pidfd::open(pid) {
        Ok(fd) => Some(fd),
        Err(e) if esrch(&e) => return Ok(Sent::Gone),
        // No pidfd_open (kernel before 5.3, or refused by seccomp): the
        // check below then narrows the race to the instants between the
        // read and the kill.
        Err(e) if pidfd::unsupported(&e) => None,
        Err(e) => return Err(e),
    };
    match stat(p.pid) {
        Some(now)
            if now.start == p.start && (now.ppid == own_pid() || tree.contains(&now.ppid)) => {}
        _ => return Ok(Sent::Gone),
    }
    // The pidfd names the walked process; without one, the pid was just
    // checked to be it.
    let fd = fd.as_ref().map(|fd| fd.as_fd());
    gone_or(pidfd::send_or_kill(fd, pid, sig))
}

/// Wait until every process of `procs` (found by [`descendants`], sent a
/// fatal signal) has exited — a zombie counts: its descriptors are closed,
/// so whoever read a pipe from it has seen its end — or `bound` has passed.
/// By pidfd: a process opened and then read again in `/proc` with the start
/// time the walk saw is that very process. Without pidfds it waits for
/// nothing (the caller then goes on at once).
pub fn await_exit(procs: &[Proc], bound: std::time::Duration) {
    let live = procs.iter().filter(|p| !p.is_zombie());
    let mut fds: Vec<OwnedFd> = live.filter_map(|p| Some(pidfd::pin(p)?.0)).collect();
    let deadline = std::time::Instant::now().checked_add(bound);
    while !fds.is_empty() {
        let borrowed: Vec<_> = fds.iter().map(|fd| fd.as_fd()).collect();
        let ready = crate::poll::wait(&borrowed, deadline);
        if ready.is_empty() && deadline.map_or(true, |d| std::time::Instant::now() >= d) {
            return;
        }
        // The indices are in order: removed from the last.
        for at in ready.into_iter().rev() {
            fds.remove(at);
        }
    }
}

/// `kill(-1, sig)`: as PID 1 of a PID namespace, every other process of the
/// namespace — exactly our descendants. Only for PID 1: anywhere else it
/// would reach every process the user may signal.
pub fn signal_namespace(sig: Signal) -> io::Result<()> {
    if !crate::reap::is_pid1() {
        return Err(io::Error::from_raw_os_error(libc::EPERM));
    }
    // From PID 1, kill(-1) reaches only its own namespace.
    match signal::kill(-1, sig) {
        Err(e) if e.raw_os_error() != Some(libc::ESRCH) => Err(e),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::CommandExt;
    use std::process::Command;

    #[test]
    fn own_tree() {
        assert!(usable());
        assert!(descendants().is_some());
    }

    #[test]
    fn the_scan_finds_what_the_walk_finds() {
        let mut child = Command::new("sh")
            .args(["-c", "sleep 30 & wait"])
            .spawn()
            .unwrap();
        let pid = child.id() as i32;
        let below = |procs: Vec<Proc>| {
            let mut mine: Vec<(i32, i32)> = (procs.iter())
                .filter(|p| p.pid == pid || p.ppid == pid)
                .map(|p| (p.pid, p.ppid))
                .collect();
            mine.sort();
            mine
        };
        let mut found = Vec::new();
        for _ in 0..200 {
            found = walk().map(below).unwrap_or_default();
            if found.len() == 2 {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let scanned = scan().map(below);
        // The sleep first (by its pid, as the walk found it), then sh.
        for &(p, _) in found.iter().filter(|(p, _)| *p != pid) {
            let _ = signal::kill(p, Signal::KILL);
        }
        child.kill().unwrap();
        child.wait().unwrap();
        assert_eq!(found.len(), 2, "sh and its sleep: {found:?}");
        assert_eq!(scanned, Some(found));
    }

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
        while stat(pid).is_some_and(|p| !p.is_zombie()) {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert!(live_member(pid, -1).is_none());
        child.wait().unwrap();
        assert!(live_member(pid, -1).is_none());
    }
}
