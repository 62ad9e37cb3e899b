//! Everything below graceful at the deadline: what the kill signal reaches
//! besides COMMAND's group, what an inner reap guards from it, and who is
//! named as a survivor (seen through the suite's own tools).
//!
//! graceful is a child subreaper, so every process COMMAND started is
//! still below it, whichever group or session it went to and whichever
//! parent died. At the deadline each live one gets the kill signal, but:
//! - an inner reap's subreaper process (it holds graceful's back mark,
//!   pgkit::guard), and
//! - a process holding the cleanup mark (a reap about to run its cleanup)
//!   with everything below it, and the cleanup that reap wrote into the
//!   mark with its tree while it runs (re-parented to graceful when its
//!   reap died included), not what remains of it once it has ended.
//!
//! After the kill signal the walk is repeated on every wake-up, so a
//! process forked in between gets it too; none gets it twice. The first
//! walk that finds something spared says so, once, even without -v.

use pgkit::descend::{self, Proc, Sent};
use pgkit::guard::Spare;
use pgkit::sorted::{Map, Set};
use pgkit::survivors;
use pgkit::{verbose, Signal};
use std::time::Duration;

/// One walk of the tree below graceful.
pub struct Walk {
    /// Every process found, zombies included.
    pub tree: Vec<Proc>,
    /// Guarded by an inner reap: not killed, not named.
    pub guarded: Set<i32>,
}

#[derive(Default)]
pub struct Below {
    spare: Option<Spare>,
    /// Processes the kill signal was sent to (pid, start time).
    killed: Set<(i32, u64)>,
    /// Processes above an inner reap's back waited for (pid, start time).
    awaited: Set<(i32, u64)>,
    /// Said what the deadline spares, that graceful waits for.
    said_spared: bool,
}

impl Below {
    pub fn new(spare: Option<Spare>) -> Below {
        Below {
            spare,
            ..Below::default()
        }
    }

    /// What wakes graceful past its deadline: an inner reap's cleanup
    /// has ended (see pgkit's `guard`).
    pub fn news(&self) -> Option<std::os::fd::BorrowedFd<'_>> {
        self.spare.as_ref().and_then(Spare::news)
    }

    /// Walk the tree and mark what an inner reap guards. `None` without a
    /// usable `/proc`.
    pub fn walk(&mut self) -> Option<Walk> {
        let tree = descend::descendants()?;
        let guarded = (self.spare.as_mut()).map_or_else(Set::new, |s| s.guarded(&tree));
        Some(Walk { tree, guarded })
    }

    /// After the stop signal, before the kill: whether a live process below
    /// graceful still holds the stop up. That is every one but those that
    /// left for a group of their own led by a live process that is not one
    /// of the suite's tools nor a tool's COMMAND (a `setsid` escapee, a
    /// sub-group: the stop signal never went to them, as it would not under
    /// `graceful -- JOB`; under a reap its sweep stops them). A member whose
    /// leader is gone (the COMMAND of an inner pgwrap that has left) holds
    /// it up, and the deadline kills it. `None` without a usable `/proc`.
    pub fn held_up(&mut self, group: i32) -> Option<bool> {
        let walk = self.walk()?;
        let me = std::process::id() as i32;
        let tools = survivors::Tools::find();
        let mut is_tool = Map::new();
        let mut tool = |pid: i32| *is_tool.get_or_insert_with(pid, || tools.is_tool(pid));
        let live: Map<i32, &Proc> = walk
            .tree
            .iter()
            .filter(|p| !p.is_zombie())
            .map(|p| (p.pid, p))
            .collect();
        let left = |p: &&Proc| {
            p.pgid != group
                && live.get(&p.pgid).is_some_and(|l| {
                    !tool(l.pid) && (l.ppid == me || !live.contains_key(&l.ppid) || !tool(l.ppid))
                })
        };
        Some(!live.values().all(left))
    }

    /// Send `sig` to every live process of `walk` outside COMMAND's group
    /// `group` (which got it already) and not guarded, once each.
    ///
    /// Top down where an inner reap guards: first what is above its back
    /// (its front, a pgwrap in between), then, once those are gone, what is
    /// below it (COMMAND's tree). The back fixes REAP_CAUSE by what it saw
    /// end first; the deadline killed its front, so it must see `lost`
    /// (the front's end of file) before COMMAND's death — a kill sent
    /// first is not a death seen first. The wait is bounded
    /// ([`AWAIT_ABOVE`]): a front that cannot die holds nothing up longer.
    pub fn kill(&mut self, walk: &Walk, group: i32, sig: Signal) {
        let me = std::process::id() as i32;
        let pids: Set<i32> = walk.tree.iter().map(|p| p.pid).chain([me]).collect();
        let above = above_guarded(walk);
        for p in walk.tree.iter().filter(|p| above.contains(&p.pid)) {
            self.send(p, walk, group, sig, &pids);
        }
        if sig == Signal::KILL {
            let wait: Vec<Proc> = (walk.tree.iter())
                .filter(|p| above.contains(&p.pid) && !p.is_zombie())
                .filter(|p| self.awaited.insert((p.pid, p.start)))
                .copied()
                .collect();
            if !wait.is_empty() {
                descend::await_exit(&wait, AWAIT_ABOVE);
                verbose!("what is above an inner reap's back is gone: now below it");
            }
        }
        for p in walk.tree.iter().filter(|p| !above.contains(&p.pid)) {
            self.send(p, walk, group, sig, &pids);
        }
        let spared: Vec<String> = (walk.tree.iter())
            .filter(|p| walk.guarded.contains(&p.pid) && !walk.guarded.contains(&p.ppid))
            .map(|p| format!("pid {}", p.pid))
            .collect();
        if !spared.is_empty() && !std::mem::replace(&mut self.said_spared, true) {
            pgkit::log::notice(&format!(
                "past the deadline, waiting for an inner reap and its cleanup: {}",
                spared.join(", ")
            ));
        }
    }

    /// `--stop-all`: the stop signal `sig` at once to every live process
    /// below graceful that [`Below::kill`] would reach (not COMMAND's group,
    /// which has it; not what an inner reap guards), which the kill signal
    /// still reaches after. Without `/proc`, COMMAND's group is all it is.
    pub fn stop_all(&mut self, group: i32, sig: Signal) {
        let Some(walk) = self.walk() else {
            return pgkit::warn!("/proc is not usable: --stop-all reaches COMMAND's group only");
        };
        let (killed, said) = (std::mem::take(&mut self.killed), self.said_spared);
        self.said_spared = true;
        self.kill(&walk, group, sig);
        (self.killed, self.said_spared) = (killed, said);
    }

    fn send(&mut self, p: &Proc, walk: &Walk, group: i32, sig: Signal, pids: &Set<i32>) {
        if p.is_zombie() || p.pgid == group || walk.guarded.contains(&p.pid) {
            return;
        }
        if !self.killed.insert((p.pid, p.start)) {
            return;
        }
        match descend::signal(p, sig, pids) {
            Ok(Sent::Delivered) => verbose!("sent {sig} to pid {} ({}) below", p.pid, p.name),
            Ok(Sent::Gone) => {}
            Err(e) => verbose!("cannot send {sig} to pid {}: {e}", p.pid),
        }
    }
}

/// How long the deadline waits for what is above an inner reap's back to
/// die of the kill signal before it goes on below (a process in an
/// uninterruptible sleep may take longer; the kill then goes on anyway).
const AWAIT_ABOVE: Duration = Duration::from_secs(1);

/// The processes of `walk` above a guarded one (its ancestors below
/// graceful), not guarded themselves.
fn above_guarded(walk: &Walk) -> Set<i32> {
    let parent: Map<i32, i32> = walk.tree.iter().map(|p| (p.pid, p.ppid)).collect();
    let mut above = Set::new();
    for &g in &walk.guarded {
        let mut at = parent.get(&g).copied();
        while let Some(pid) = at.filter(|pid| parent.contains_key(pid)) {
            if !walk.guarded.contains(&pid) && !above.insert(pid) {
                break;
            }
            at = parent.get(&pid).copied();
        }
    }
    above
}
