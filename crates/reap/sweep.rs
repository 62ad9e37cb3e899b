//! The leftovers: every descendant still there once COMMAND (or the
//! cleanup) has exited, signalled round by round.
//!
//! A round walks the whole tree (`pgkit::descend`) and signals each live
//! process not yet signalled in this stage. Between rounds the back sleeps
//! until SIGCHLD: when a process of the tree dies, its children are
//! re-parented to us (we are the subreaper), and each wake only compares our
//! direct children with the processes already signalled — a new one (forked
//! after the walk, or re-parented from deeper down than the walk could see)
//! calls for another round. So the sweep ends, and reap with it, only when
//! `waitid` reports no child at all.
//!
//! Without a usable `/proc` (not mounted, or another PID namespace's) the
//! tree cannot be listed. reap then says so on stderr and does what is still
//! safe: as PID 1, `kill(-1)` reaches exactly its namespace; otherwise
//! COMMAND's group is signalled while COMMAND is kept unreaped (so the
//! group's id cannot be reused), and any other descendant is waited for.
//! A lack of descriptors is the one reason that passes: `/proc` is looked at
//! again on every later wake while it is the reason.
//!
//! With `--cgroup` the tree is COMMAND's cgroup instead (pgkit's `cgroup`):
//! the stop signal goes to every member listed in `cgroup.procs`, KILL is
//! one write to `cgroup.kill`, and nothing is walked. Only a child of ours
//! left once the cgroup is empty (a process that moved itself out of it)
//! sends the sweep back to the walk.

use pgkit::cgroup::Cgroup;
use pgkit::descend::{self, Proc, Sent};
use pgkit::guard::Spare;
use pgkit::{reap, verbose, Child, Signal, Target};
// Sorted, not hashed: no random seed (a getrandom call) at start, and
// the same order on every run.
use pgkit::sorted::{Map, Set};

/// How the tree is found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Finder {
    /// `/proc` walk: every descendant.
    Proc,
    /// No `/proc`: as PID 1, `kill(-1)`; else COMMAND's group only.
    Blind,
    /// `--cgroup`: the members of COMMAND's cgroup.
    Cgroup,
}

/// A process signalled in the current stage.
struct Mark {
    start: u64,
    /// Our own child when marked (or checked since).
    direct: bool,
}

#[derive(Default)]
pub struct Sweeper {
    /// Decided at first use, after COMMAND has started: the check reads
    /// `/proc/self/status`, which need not delay COMMAND.
    found: Option<Finder>,
    marks: Map<i32, Mark>,
    /// Every process (pid, start time) a round sent KILL to.
    pub killed: Set<(i32, u64)>,
    warned: bool,
    /// Why `/proc` could not be used, as found when that was decided (a
    /// lack of descriptors may have passed by the time it is reported).
    why: Option<pgkit::procfs::Unusable>,
    /// `--cgroup`: COMMAND's cgroup, until it is removed.
    pub cgroup: Option<Cgroup>,
    /// The members signalled in this stage (`--cgroup`).
    members: Set<i32>,
    /// A child of ours outlived the cgroup's last member: the walk
    /// finds the rest.
    escaped: bool,
    /// What an inner reap guards is left to it (pgkit::guard): its
    /// subreaper process, and its cleanup with all below it.
    spare: Option<Spare>,
    /// When this stage's first walk was made (boot ticks).
    round_at: Option<u64>,
}

impl Sweeper {
    /// `--cgroup`: leftovers are the members of `cgroup`.
    pub fn new(mut cgroup: Option<Cgroup>) -> Sweeper {
        // The front taking over from a back that had removed it already.
        if let Some(cg) = cgroup.as_mut() {
            cg.notice_removal();
        }
        Sweeper {
            cgroup,
            spare: Spare::new(),
            ..Default::default()
        }
    }

    /// GRACEFUL_GUARD for COMMAND, so an inner reap marks itself for us.
    pub fn guard_env(&self) -> Option<std::ffi::OsString> {
        self.spare.as_ref().map(Spare::export)
    }

    /// The processes of `tree` an inner reap guards.
    fn guarded(&mut self, tree: &[Proc]) -> Set<i32> {
        (self.spare.as_mut()).map_or_else(Set::new, |spare| spare.guarded(tree))
    }

    /// COMMAND's cgroup (`--cgroup`), until it is removed.
    pub fn cgroup(&self) -> Option<&Cgroup> {
        self.cgroup.as_ref().filter(|c| !c.is_removed())
    }

    /// The cgroup is empty, yet a child of ours lives on (it moved itself
    /// out): the walk finds the rest from now on.
    pub fn escaped(&mut self) {
        if self.cgroup().is_some() && !self.escaped {
            self.escaped = true;
            verbose!("COMMAND's cgroup is empty but a child of reap lives on: walking /proc for the rest");
        }
    }

    /// How the tree is found: decided on the first call, and looked at
    /// again on every later call while the reason not to walk `/proc` is a
    /// lack of descriptors, which passes (COMMAND's reaping closes one). A
    /// missing or foreign `/proc` is for good.
    pub fn finder(&mut self) -> Finder {
        // Once COMMAND's cgroup is removed (the cleanup's sweep), the walk.
        if self.cgroup().is_some() && !self.escaped {
            return Finder::Cgroup;
        }
        let passing = self.why == Some(pgkit::procfs::Unusable::NoDescriptor);
        if let Some(finder) = self.found.filter(|_| !passing) {
            return finder;
        }
        let blind = self.found.is_some();
        self.why = pgkit::procfs::check().err();
        let finder = if self.why.is_none() {
            if blind {
                verbose!("/proc is usable again: every descendant can be found");
            }
            Finder::Proc
        } else {
            Finder::Blind
        };
        self.found = Some(finder);
        finder
    }

    /// A new stage (stop signal, then KILL): nobody is marked yet.
    pub fn reset(&mut self) {
        self.marks.clear();
        self.members.clear();
        self.round_at = None;
    }

    /// A child of ours was reaped: its pid may be reused from now on.
    pub fn forget(&mut self, pid: i32) {
        self.marks.remove(&pid);
        self.members.remove(&pid);
    }

    /// Send `sig` to every live descendant not yet marked in this stage
    /// (a stopped one also gets CONT, so it can act on a stop signal).
    /// `pinned` is COMMAND or the cleanup, when still unreaped. Returns
    /// how many processes got it (1 where they cannot be counted).
    pub fn round(&mut self, sig: Signal, pinned: Option<&Child>) -> usize {
        // Known already: nothing is left (a cgroup may also hold what was
        // moved into it).
        if self.cgroup().is_none() && pinned.is_some_and(Child::nothing_below) {
            return 0;
        }
        let finder = self.finder();
        if finder == Finder::Cgroup {
            return self.cgroup_round(sig);
        }
        // Our one child the pinned process, exited, or no child at all:
        // there is nothing to signal, however the tree would be found. One
        // read of our children file, which names exactly our children
        // whatever PID namespace /proc shows (another's has no task of ours
        // under our own pid).
        if let Some(children) = pgkit::procfs::own_children() {
            let leader = pinned
                .filter(|c| !c.is_reaped() && c.exit_status().is_some())
                .map(|c| c.pid());
            if children.iter().all(|&c| Some(c) == leader) {
                return 0;
            }
        }
        if finder == Finder::Proc {
            return self.proc_round(sig);
        }
        // No /proc: as PID 1, kill(-1) reaches exactly the namespace; else
        // COMMAND's group, while its leader is pinned.
        let pid1 = reap::is_pid1();
        self.warn_once(if pid1 {
            "signalling every process of the PID namespace instead"
        } else {
            "only COMMAND's process group can be signalled; other leftovers are waited for"
        });
        let (to, send): (String, &dyn Fn(Signal) -> std::io::Result<()>) = match pinned {
            _ if pid1 => (
                "every process of the namespace".into(),
                &descend::signal_namespace,
            ),
            Some(c) if !c.is_reaped() => (format!("group {}", c.pid()), &|s| {
                c.signal(Target::Group, s)
            }),
            _ => return 0,
        };
        match send(sig) {
            Ok(()) => verbose!("sent {sig} to {to}"),
            Err(e) => pgkit::warn!("unable to send {sig} to {to}: {e}"),
        }
        if sig != Signal::KILL {
            let _ = send(Signal::CONT);
        }
        1
    }

    /// `--cgroup`: `sig` to every member not signalled in this stage; KILL
    /// to all at once.
    fn cgroup_round(&mut self, sig: Signal) -> usize {
        // An inner reap in the cgroup: what it guards stays out of this
        // stage (as marked), and KILL goes member by member.
        let (guarded, walked) = self.cgroup_guarded();
        if sig == Signal::KILL {
            // KILL again to every member but what is guarded, on each
            // round: a second KILL is harmless, and a member that came
            // since (or took a killed one's pid) is not skipped.
            self.members.clear();
        }
        self.members.extend(guarded.iter().copied());
        let Some(cg) = self.cgroup.as_ref() else {
            return 0;
        };
        let path = cg.path().display();
        if sig == Signal::KILL && guarded.is_empty() {
            return match cg.kill() {
                Ok(0) => 0,
                Ok(n) => {
                    verbose!("sent KILL to the {n} process(es) of cgroup {path} (cgroup.kill)");
                    n
                }
                Err(e) => {
                    pgkit::warn!("unable to kill cgroup {path}: {e}");
                    cg.signal_members(sig, &mut self.members, walked.as_ref())
                }
            };
        }
        let sent = cg.signal_members(sig, &mut self.members, walked.as_ref());
        if sent > 0 {
            verbose!("sent {sig} to {sent} process(es) of cgroup {path}");
        }
        sent
    }

    /// `--cgroup`: what an inner reap guards. Nothing is read unless a
    /// process holds one of our marks (one `poll`); then the tree is walked
    /// as without `--cgroup`.
    /// With the pids the walk found, if it was made: a member it did not
    /// find (started since, maybe an inner reap's new cleanup) waits for
    /// the next round.
    fn cgroup_guarded(&mut self) -> (Set<i32>, Option<Set<i32>>) {
        if !self.spare.as_ref().is_some_and(Spare::any_held) {
            return (Set::new(), None);
        }
        match descend::descendants() {
            Some(tree) => (
                self.guarded(&tree),
                Some(tree.iter().map(|p| p.pid).collect()),
            ),
            None => {
                verbose!("an inner reap is marked, but /proc cannot be walked: it is not spared");
                (Set::new(), None)
            }
        }
    }

    fn warn_once(&mut self, what: &str) {
        if !self.warned {
            self.warned = true;
            let why = self.why.map_or_else(
                || "not mounted, or another PID namespace's".to_string(),
                |e| e.to_string(),
            );
            pgkit::warn!("/proc is not usable ({why}): {what}");
        }
    }

    fn proc_round(&mut self, sig: Signal) -> usize {
        let Some(tree) = descend::descendants() else {
            self.why = Some(pgkit::procfs::diagnose());
            self.found = Some(Finder::Blind);
            return 0;
        };
        // Before the signals: a process started later (in a tick after
        // this one) cannot have been found by this walk or signalled by
        // anything before it in the stage.
        if self.round_at.is_none() {
            self.round_at = pgkit::procfs::uptime_ticks();
        }
        let me = std::process::id() as i32;
        let (live, pids) = self.live(&tree);
        let mut sent = 0;
        for p in live {
            if self.marks.get(&p.pid).is_some_and(|m| m.start == p.start) {
                continue;
            }
            let delivered = self.send(p, sig, &pids);
            sent += usize::from(delivered);
            if delivered && sig == Signal::KILL {
                self.killed.insert((p.pid, p.start));
            }
            let mark = Mark {
                start: p.start,
                direct: p.ppid == me,
            };
            self.marks.insert(p.pid, mark);
        }
        sent
    }

    /// The live processes of `tree` that no inner reap guards, and the
    /// pids a signal to one of them is checked against (pgkit's `descend`).
    fn live<'t>(&mut self, tree: &'t [Proc]) -> (Vec<&'t Proc>, Set<i32>) {
        let me = std::process::id() as i32;
        let guarded = self.guarded(tree);
        let live = (tree.iter())
            .filter(|p| !p.is_zombie() && !guarded.contains(&p.pid))
            .collect();
        (live, tree.iter().map(|p| p.pid).chain([me]).collect())
    }

    /// Whether the walked process got `sig`.
    fn send(&self, p: &Proc, sig: Signal, tree: &Set<i32>) -> bool {
        match descend::signal(p, sig, tree) {
            Ok(Sent::Delivered) => {
                // Named as the survivor lines name it.
                let Proc {
                    pid,
                    name,
                    ppid,
                    pgid,
                    ..
                } = p;
                verbose!("sent {sig} to pid {pid} ({name}; parent {ppid}, group {pgid})");
                if p.is_stopped() && sig != Signal::KILL && sig != Signal::CONT {
                    let _ = descend::signal(p, Signal::CONT, tree);
                }
                true
            }
            Ok(Sent::Gone) => false,
            Err(e) => {
                pgkit::warn!("unable to send {sig} to pid {}: {e}", p.pid);
                false
            }
        }
    }

    /// `--stop-all`: `sig` at once to every live descendant outside
    /// `group` (COMMAND's, which got it from the forward). Where the tree
    /// cannot be walked, COMMAND's group is all that can be reached.
    pub fn stop_all(&mut self, sig: Signal, group: i32) {
        let tree = match self.finder() {
            Finder::Cgroup => {
                let (guarded, _) = self.cgroup_guarded();
                if let Some(cg) = self.cgroup.as_ref() {
                    // COMMAND's group got it already: only the members outside it.
                    cg.signal_outside(sig, group, &guarded);
                }
                return;
            }
            Finder::Proc => descend::descendants(),
            _ => return self.warn_once("--stop-all reaches COMMAND's process group only"),
        };
        let Some(tree) = tree else {
            return;
        };
        let (live, pids) = self.live(&tree);
        for p in live.into_iter().filter(|p| p.pgid != group) {
            self.send(p, sig, &pids);
        }
    }

    /// The descendants, for the survivors' lines: with `--cgroup`, what is
    /// in COMMAND's cgroup (none where the tree cannot be walked).
    pub fn tree(&mut self) -> Vec<descend::Proc> {
        if let (Finder::Cgroup, Some(cg)) = (self.finder(), self.cgroup.as_ref()) {
            return cg.members().into_iter().filter_map(descend::stat).collect();
        }
        descend::descendants().unwrap_or_default()
    }

    /// For a process started since this stage's first walk (so nothing
    /// before the rounds can have signalled it), whether a round sent it
    /// the stage's signal: a process forked after the last walk by one
    /// that outlived the signal was not, since no wake comes of a
    /// grandchild's fork. `None` for the others, where the tree is not
    /// walked, or before the stage's first walk.
    pub fn sent_by_rounds(&self, p: &Proc) -> Option<bool> {
        let at = self.round_at.filter(|_| self.found == Some(Finder::Proc))?;
        (p.start >= at).then(|| self.marks.get(&p.pid).is_some_and(|m| m.start == p.start))
    }

    /// Whether a child of ours has appeared that this stage has not
    /// signalled (forked after the last walk, or re-parented to us from a
    /// depth the walk did not see). Cheap: one read of our children list,
    /// and a start-time check only for a process first seen deeper down.
    pub fn new_children(&mut self, except: i32) -> bool {
        let children = match self.finder() {
            // The KILL stage: a member is left (forked since the last
            // round, or moved in); those guarded make the round a walk
            // (`cgroup_round`), the others get KILL again. No /proc read.
            Finder::Cgroup => return self.cgroup().is_some_and(|cg| !cg.members().is_empty()),
            Finder::Proc => descend::children(),
            _ => None,
        };
        let Some(children) = children else {
            return false;
        };
        let mut new = false;
        for pid in children.into_iter().filter(|&p| p != except) {
            match self.marks.get_mut(&pid) {
                Some(m) if m.direct => {}
                Some(m) => match descend::stat(pid) {
                    Some(p) if p.start == m.start => m.direct = true,
                    Some(p) if p.is_zombie() => {}
                    _ => new = true,
                },
                None => new = new || descend::stat(pid).is_some_and(|p| !p.is_zombie()),
            }
        }
        new
    }
}
