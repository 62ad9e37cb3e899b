//! The back's driver: it turns what the kernel says into events for the
//! state machine (machine.rs, where the order of events lives) and carries
//! out its actions. One loop, one wait ([`Inbox::wait`]).
//!
//! The back tells the front how far it got (COMMAND's pid, its status, the
//! cleanup's pid) and, right before it exits or becomes the cleanup, that it
//! finished. If the back dies before that, the front takes over with the
//! same machine ([`Back::recover`]): COMMAND's tree, re-parented to the
//! front (a subreaper too), is killed at once, and the cleanup runs there
//! unless the back had started it.
//!
//! One thread; each wait is one `ppoll` on the signalfd, the front's pipe
//! and (while it runs) the pidfd of COMMAND or the cleanup, with a deadline
//! only while a grace or the cleanup's timeout runs. Each phase begins with
//! a look at the inbox, then at the kernel (the process watched, the
//! tree), in that order, and the wait comes only when a look changed
//! nothing. A wake that brought signals alone while COMMAND runs goes from
//! passing them on straight back to the wait: what the kernel has to say
//! (an exit, a stop, a deadline) makes that wait return at once.

use crate::config::Config;
use crate::guardian::{BackNews, Link, LostBack, CLEANUP, COMMAND, FINISHED, STATUS};
use crate::machine::{Action, Env, Event, Machine, Note, Phase};
use crate::outcome::CLEANUP_TIMED_OUT;
use crate::sweep::{Finder, Sweeper};
use crate::terminal;
use pgkit::child::Job;
use pgkit::error::TOOL_FAILED;
use pgkit::notify::{Extension, Relay, Service};
use pgkit::outlet::Outlet;
use pgkit::sigfd::{Received, SignalFd};
use pgkit::sorted::Set;
use pgkit::spawn::{Isolation, Spawn};
use pgkit::startup::Startup;
use pgkit::tty::JobControl;
use pgkit::{descend, events, poll, reap, verbose, Child, Signal, Status, Target};
use std::os::fd::{AsFd, BorrowedFd};
use std::time::{Duration, Instant};

/// Where events come from: the back's own signalfd and the front's pipe.
pub struct Inbox {
    signals: SignalFd,
    /// The link to the front (a split reap's back only), kept once the
    /// front is gone: its pid names it.
    front: Option<Link>,
    /// The last wait found the signalfd readable, and it was not read
    /// since (or no wait was made yet).
    signals_ready: bool,
    /// The same for the front's pipe.
    front_ready: bool,
    /// The last wait found its `extra` descriptor readable (or none was made).
    extra_ready: bool,
    /// COMMAND's notification socket, where this process relays it (the
    /// front, or reap as PID 1).
    relay: Option<Relay>,
    /// The cleanup's stdout and stderr where they are relayed (see pgkit's
    /// `outlet`; nothing is relayed before the cleanup's start).
    outlet: Option<Outlet>,
    /// Signals read before COMMAND started, taken first.
    early: Vec<Received>,
}

impl Inbox {
    /// The inbox of the back (`front`: its link), or of reap as PID 1, or
    /// of the front that took over: COMMAND's notifications relayed here
    /// (see pgkit's `notify`), the cleanup's streams made before the split,
    /// and signals read before COMMAND started, taken first.
    pub fn new(
        signals: SignalFd,
        front: Option<Link>,
        relay: Option<Relay>,
        outlet: Option<Outlet>,
        early: Vec<Received>,
    ) -> Inbox {
        Inbox {
            signals,
            front,
            signals_ready: true,
            front_ready: true,
            extra_ready: true,
            relay,
            outlet,
            early,
        }
    }

    /// Tell the front, where there is one (see guardian.rs).
    fn tell<R>(&self, f: impl FnOnce(&Link) -> R) {
        if let Some(front) = &self.front {
            f(front);
        }
    }

    /// Everything that happened since the last call (drained, not waited
    /// for), into `events`. Only what the last wait found readable is
    /// read, once: what came since is for the next wait to find (it
    /// returns at once), so a signal handed over by the front costs the
    /// back one read, not a read of its own empty signalfd first.
    fn take_into(&mut self, events: &mut Vec<Event>) {
        if std::mem::take(&mut self.signals_ready) {
            let mut handed = std::mem::take(&mut self.early);
            // A read that fails waits a while (see drain_into): no spin.
            let _ = self.signals.drain_into(&mut handed);
            events.extend(handed.into_iter().map(|r| Event::Signal(r.signal, r.from)));
        }
        if let Some(relay) = self.relay.as_mut() {
            relay.relay();
        }
        if let Some(outlet) = self.outlet.as_mut() {
            outlet.pump();
        }
        let ready = std::mem::take(&mut self.front_ready);
        if let Some(front) = self.front.as_mut().filter(|_| ready) {
            front.read_into(events);
        }
    }

    /// Everything pending now, whatever the last wait found.
    fn take_all(&mut self) -> Vec<Event> {
        let mut events = Vec::new();
        (self.signals_ready, self.front_ready) = (true, true);
        self.take_into(&mut events);
        events
    }

    /// Sleep until a signal, a word from the front, `extra` (the pidfd of
    /// COMMAND or the cleanup) readable, or `deadline`. What was found
    /// readable is remembered, so the next look skips the system calls that
    /// have nothing to report: when many orphans exit one by one, reap
    /// wakes once per exit.
    /// `cgroup` (`--cgroup`'s `cgroup.events`, while a sweep waits for it
    /// to empty) wakes it with POLLPRI.
    fn wait(
        &mut self,
        extra: Option<BorrowedFd<'_>>,
        cgroup: Option<BorrowedFd<'_>>,
        deadline: Option<Instant>,
    ) {
        let deadline = self.signals.wake_by(deadline, Instant::now);
        let mut fds = poll::Fds::default();
        fds.push(self.signals.as_fd());
        let front_at = (self.front.as_ref().and_then(|f| f.fd())).map(|fd| fds.push(fd));
        let extra_at = extra.map(|fd| fds.push(fd));
        if let Some(r) = self.relay.as_ref() {
            fds.push(r.as_fd());
        }
        let mut writable = Vec::new();
        if let Some(outlet) = self.outlet.as_ref() {
            outlet.watch(&mut fds, &mut writable);
        }
        let pri = cgroup.as_slice();
        let ready = poll::wait_all(&fds, &writable, pri, deadline);
        self.signals_ready = ready.contains(&0);
        self.front_ready = front_at.is_some_and(|i| ready.contains(&i));
        self.extra_ready = extra_at.map_or(true, |i| ready.contains(&i));
    }
}

pub struct Back<'a> {
    config: &'a Config,
    startup: &'a Startup,
    inbox: Inbox,
    /// Job control of COMMAND across the split (terminal.rs).
    jobs: JobControl,
    sweeper: Sweeper,
    machine: Machine<'a>,
    /// COMMAND, then the cleanup: kept unreaped while its group may be
    /// signalled.
    leader: Option<Child>,
    /// Said once that the cleanup is stopped by the terminal.
    hinted: bool,
    /// Said once that waitid failed.
    unreaped_said: bool,
    /// The cleanup mark of the outer gracefuls (pgkit::guard), held while
    /// the cleanup runs.
    cleanup_mark: pgkit::guard::Marked,
    /// This process's back marks, held while it lives.
    back_marks: pgkit::guard::Marked,
    /// The final status, once the machine said it.
    exit: Option<Status>,
    /// What systemd's variables become for COMMAND and the cleanup.
    service: Service,
    /// The `kill` event of the current KILL stage was written.
    kill_logged: bool,
    /// The stop request held by `--stop-delay`, already logged.
    held_logged: Option<Signal>,
    /// What COMMAND's cgroup used (`--cgroup`), read as it was removed.
    usage: Option<pgkit::cgroup::Usage>,
    /// The unit's stop timeout, extended while reap stops.
    extension: Extension,
}

impl<'a> Back<'a> {
    pub fn new(
        config: &'a Config,
        startup: &'a Startup,
        inbox: Inbox,
        handed_over: bool,
        cgroup: Option<pgkit::cgroup::Cgroup>,
        service: Service,
    ) -> Back<'a> {
        // A front answers before the cause is fixed (see guardian.rs).
        let front = inbox.front.is_some();
        // The back, before COMMAND exists: an outer graceful's deadline
        // spares this process while it lives (pgkit::guard; --exec-cleanup's
        // exec closes the marks).
        let back_marks = match front {
            true => pgkit::guard::mark(pgkit::guard::Role::Back),
            false => Default::default(),
        };
        if back_marks.count() > 0 {
            let n = back_marks.count();
            verbose!("marked as reap's subreaper process for {n} outer graceful(s)");
        }
        Back {
            config,
            startup,
            inbox,
            jobs: JobControl::new(handed_over, config.foreground),
            // `--cgroup`: COMMAND starts in this cgroup, and leftovers are
            // what is still in it.
            sweeper: Sweeper::new(cgroup),
            machine: Machine::new(config, front),
            leader: None,
            hinted: false,
            unreaped_said: false,
            cleanup_mark: Default::default(),
            back_marks,
            exit: None,
            service,
            held_logged: None,
            kill_logged: false,
            usage: None,
            extension: Extension::default(),
        }
    }

    /// `--cgroup`: COMMAND's tree is gone, so its cgroup goes before the
    /// cleanup starts (the cleanup runs outside it). What it used is said
    /// with -v and kept for the `exit` event.
    fn remove_cgroup(&mut self) {
        let Some(cg) = self.sweeper.cgroup.as_mut().filter(|c| !c.is_removed()) else {
            return;
        };
        let usage = cg.usage();
        verbose!("cgroup {}: {}", cg.path().display(), usage.line());
        self.usage = Some(usage);
        match cg.remove() {
            Ok(()) => verbose!("removed cgroup {}", cg.path().display()),
            Err(e) => pgkit::warn!("unable to remove cgroup {}: {e}", cg.path().display()),
        }
    }

    /// Under a service manager (`NOTIFY_SOCKET`), while reap stops: the
    /// unit's stop timeout extended to reap's own budget (pgkit's
    /// [`Extension`]), sent by the front (the unit's main process) or,
    /// without one, by this process. Returns when to extend again.
    fn extend(&mut self) -> Option<Instant> {
        // Split, the front relays; else this process, where it does.
        let relays = self.inbox.front.as_ref().map(|f| f.leftover.is_some());
        if !relays.unwrap_or(self.inbox.relay.is_some()) || !self.machine.stopping() {
            return None;
        }
        let (by, again) = (self.extension).next(self.machine.deadline(), Instant::now());
        let ms = by.map(|by| u64::try_from(by.as_millis()).unwrap_or(u64::MAX));
        match (ms, &self.inbox.front, &self.inbox.relay) {
            (Some(ms), Some(front), _) => front.extend(ms),
            (Some(ms), None, Some(relay)) => relay.extend(ms),
            _ => {}
        }
        again
    }

    /// The front was lost (the process the supervisor started was killed)
    /// and its loss cut COMMAND's grace: one line even without -v.
    fn front_lost(&self) {
        let pid = self.inbox.front.as_ref().map_or(0, |f| f.front_pid);
        let when = match self.machine.stop_at() {
            Some(at) => {
                // Tenths, rounded, in integers: `{:.1}` of an f64 links in
                // the float formatting (8.5 KB of the static binary).
                let tenths = (at.elapsed().as_millis() as u64).saturating_add(50) / 100;
                let (s, t, grace) = (tenths / 10, tenths % 10, self.config.grace);
                format!("{s}.{t}s after the stop request, before the grace ({grace}) ran out")
            }
            None => "with no stop request before it".to_string(),
        };
        let then = (self.config.cleanup.is_some()).then_some(", then the cleanup runs");
        pgkit::warn!(
            "the process the supervisor started (pid {pid}) was killed {when}: COMMAND's tree \
             is killed at once{}",
            then.unwrap_or_default()
        );
    }

    /// From COMMAND's start to the cleanup's end; returns reap's final
    /// status.
    pub fn run(mut self) -> Status {
        self.drive_to_end();
        self.exit.unwrap_or(Status::Exited(TOOL_FAILED))
    }

    /// The front's side of the guarantee, once the back ended without
    /// saying it finished (killed, or crashed). COMMAND's tree — COMMAND
    /// and the back's other orphans, re-parented to the front, a subreaper
    /// too — is killed at once, with no grace: COMMAND's group while
    /// COMMAND is unreaped, and every descendant, until no child is left.
    /// Then the cleanup runs with `REAP_CAUSE=lost` (COMMAND's status if
    /// known, else as killed by KILL), never in place, unless the back had
    /// started it: then it is the cleanup's group and leftovers that are
    /// killed, and the cleanup is not run again (it runs once). Signals
    /// meanwhile are logged, not passed on. Returns the one line that says
    /// what happened.
    pub fn recover(mut self, back: &LostBack) -> String {
        let news = back.news;
        let (pid, how) = (back.pid, ended(back.status));
        let head = format!("the subreaper process (pid {pid}) {how}");
        verbose!("{head} before it finished: taking over");
        if let Some(pid) = news.cleanup.or_else(|| spawned_unnoted(&news)) {
            return self.let_cleanup_finish(news, &head, pid);
        }
        let known = news.command;
        self.leader = known.and_then(Child::adopt);
        let adopted = self.leader.as_ref().map(|c| c.pid());
        let running = self.leader.as_mut().map(Child::peek_exit) == Some(None);
        // Counted before the KILL: a process the group's KILL ends may be
        // gone before the sweep's walk sees it.
        let tree = descend::descendants().unwrap_or_default();
        let live = tree.iter().filter(|p| !p.is_zombie());
        let mut killed: Set<(i32, u64)> = live.map(|p| (p.pid, p.start)).collect();
        for action in self.machine.take_over(news.status, running) {
            self.act(action);
        }
        self.drive(|phase| phase == Phase::Settle);
        killed.extend(self.sweeper.killed.iter().copied());
        let others = killed.iter().filter(|&&(p, _)| Some(p) != adopted).count();
        let what = match known {
            Some(pid) if running => {
                format!("killed COMMAND (pid {pid}) and {others} other process(es)")
            }
            Some(pid) => {
                format!("COMMAND (pid {pid}) had already exited; killed {others} other process(es)")
            }
            None if others == 0 => "COMMAND had not been started".to_string(),
            None => format!("killed {others} process(es) (COMMAND's pid was not known yet)"),
        };
        self.drive_to_end();
        match self.machine.cleanup_result().map(ended) {
            Some(done) => format!("{head}: {what}; cleanup ran (REAP_CAUSE=lost) and {done}"),
            None => format!("{head}: {what}"),
        }
    }

    /// [`Back::recover`] when the back was lost during the cleanup: the
    /// cleanup, re-parented to this process, is not interrupted. It runs
    /// on until it ends or its `--cleanup-timeout` (counted from its start)
    /// runs out; what it left is swept as after any cleanup; the line says
    /// what happened.
    fn let_cleanup_finish(&mut self, news: BackNews, head: &str, pid: i32) -> String {
        let head = format!("{head} during the cleanup");
        let ms = pgkit::deadline::monotonic_ms();
        let ran = Duration::from_millis(news.cleanup_at_ms.map_or(0, |at| ms.saturating_sub(at)));
        let (now, timeout) = (Instant::now(), self.config.cleanup_timeout.duration());
        let end = timeout.map(|t| now.checked_add(t.saturating_sub(ran)).unwrap_or(now));
        self.machine.adopt_cleanup(news.status, news.cause, end);
        self.leader = Child::adopt(pid);
        if self.leader.is_none() {
            // Not re-parented to us (this process could not become a
            // subreaper): nothing to wait for; its leftovers still go.
            self.feed(Event::Exited(Status::Exited(TOOL_FAILED)));
            self.drive(|_| false);
            return format!(
                "{head}: the cleanup (pid {pid}) was not this process's to wait for; what is \
                 left of it was swept"
            );
        }
        verbose!("the cleanup (pid {pid}) goes on: waiting for it");
        // Its output goes on reaching the caller (the back copied it).
        if let Some(outlet) = self.inbox.outlet.as_mut() {
            outlet.start();
            outlet.started();
        }
        self.drive_to_end();
        let how = match self.machine.cleanup_result() {
            Some(result) if result == CLEANUP_TIMED_OUT => {
                "was stopped at its --cleanup-timeout".to_string()
            }
            Some(result) => ended(result),
            None => "ended".to_string(),
        };
        format!("{head}: the cleanup (pid {pid}) went on and {how}; what it left was swept")
    }

    /// The one loop: read the inbox, look at the kernel, and wait only
    /// when neither changed the phase; until the machine is done, or
    /// `until` its phase.
    fn drive(&mut self, until: impl Fn(Phase) -> bool) {
        // This wake brought signals and nothing else a look would act on:
        // signals only, none of them SIGCHLD, with COMMAND's pidfd not
        // readable, while COMMAND runs.
        let mut signals_only = false;
        loop {
            let phase = self.machine.phase();
            if self.machine.is_done() || until(phase) {
                return;
            }
            let mut events = Vec::new();
            self.inbox.take_into(&mut events);
            if !events.is_empty() {
                let signal = |e: &Event| matches!(e, Event::Signal(sig, _) if *sig != Signal::CHLD);
                signals_only = matches!(phase, Phase::Run(_))
                    && !self.inbox.extra_ready
                    && events.iter().all(signal);
            }
            for event in events {
                self.feed(event);
            }
            if self.machine.phase() != phase {
                continue;
            }
            // A signal just passed on to COMMAND's group: on a busy CPU the
            // process signalled runs once this one sleeps, so the wait comes
            // next, with no look first. That look would find nothing new:
            // an exit or a stop raises SIGCHLD, and COMMAND's pidfd stays
            // readable, so the wait returns at once for either, and then
            // the look comes; a deadline due makes it return at once too.
            let skip = signals_only && matches!(self.machine.phase(), Phase::Run(_));
            if !skip {
                self.look();
                if self.machine.phase() != phase {
                    continue;
                }
            }
            let resend = self.extend();
            let deadline = self.machine.deadline().into_iter().chain(resend).min();
            let watched = self.leader.as_ref().filter(|c| c.exit_status().is_none());
            let cgroup = (self.sweeper.cgroup())
                .filter(|_| matches!(self.machine.phase(), Phase::Sweep(..)))
                .map(|c| c.events_fd());
            self.inbox
                .wait(watched.and_then(|c| c.pidfd()), cgroup, deadline);
            signals_only = false;
        }
    }

    /// Feed one event to the machine and carry out what it says, then
    /// the result of a start the actions made (COMMAND's, the cleanup's).
    fn feed(&mut self, event: Event) {
        let mut next = Some(event);
        while let Some(event) = next.take() {
            let mut actions = Vec::new();
            self.machine.on_into(event, Instant::now, &mut actions);
            for action in actions {
                next = self.act(action).or(next);
            }
            // A grace that a stop request started counts from here, the
            // stop signal sent: its clock is read after the kill, not before.
            self.machine.sent(Instant::now);
        }
    }

    /// The deadline, if it is reached.
    fn tick(&mut self) {
        if let Some(event) = self.machine.due(Instant::now()) {
            self.feed(event);
        }
    }

    /// What the kernel says, as the phase needs it.
    fn look(&mut self) {
        match self.machine.phase() {
            Phase::Start => self.feed(Event::Drained),
            // REAP_CAUSE is fixed now, once the front has answered (the
            // machine waits for it): with what the front's pipe holds, not
            // only what the last wait found. The front's end of file may
            // have come after that wait (after COMMAND's death, which the
            // wait found): the front died before the cleanup, it counts.
            Phase::Settle => {
                for event in self.inbox.take_all() {
                    self.feed(event);
                }
                if self.machine.phase() == Phase::Settle {
                    self.feed(Event::Drained);
                }
            }
            Phase::Run(_) => self.look_at_leader(true),
            Phase::Sweep(..) => self.look_at_tree(),
            Phase::Cleanup(_) => self.look_at_leader(false),
            Phase::Done => {}
        }
    }

    /// While COMMAND (`command`) or the cleanup runs: adopted zombies, its
    /// exit, its stops, its deadline.
    fn look_at_leader(&mut self, command: bool) {
        self.reap_adopted(self.leader.as_ref().map(|c| c.pid()));
        let Some(child) = self.leader.as_mut() else {
            return;
        };
        // Without its pidfd readable, it has not exited (and a refused
        // waitid is not taken for the cleanup's end while it runs).
        let exited = self.inbox.extra_ready.then(|| child.peek_exit()).flatten();
        if let Some(status) = exited {
            if command {
                verbose!("COMMAND (pid {}) {status}", child.pid());
            } else {
                // What the cleanup left is not spared (pgkit::guard).
                self.cleanup_mark = Default::default();
                self.back_marks.cleanup_ended();
                events::exited("cleanup_exited", child.pid(), status);
            }
            return self.feed(Event::Exited(status));
        }
        match child.poll_job() {
            Some(Job::Stopped(sig)) if command => {
                terminal::on_stop(&mut self.jobs, self.inbox.front.as_ref(), child, sig)
            }
            Some(Job::Continued) if command => self.jobs.continued(),
            Some(Job::Stopped(sig)) if !self.hinted && pgkit::tty::is_background_io(sig) => {
                self.hinted = true;
                pgkit::warn!(
                    "the cleanup (pid {}) is stopped by SIG{sig}: it used the terminal from the \
                     background; give it other input and output (e.g. < /dev/null)",
                    child.pid()
                );
            }
            _ => {}
        }
        self.tick();
    }

    /// During a sweep: adopted zombies, the pinned process's exit, whether
    /// anything is left, the end of the grace, then a new walk.
    fn look_at_tree(&mut self) {
        let keep = self.leader.as_ref().filter(|c| !c.is_reaped());
        self.reap_adopted(keep.map(|c| c.pid()));
        if let Some(status) = self.leader.as_mut().and_then(|c| c.peek_exit()) {
            if self.machine.timed_out_unseen() {
                events::exited("cleanup_exited", self.leader_pid(), status);
            }
            // Its group stays pinned (the leader unreaped) only where the
            // group is how leftovers are reached.
            let below = self.leader.as_ref().is_some_and(Child::nothing_below);
            let pin = !below && self.sweeper.finder() == Finder::Blind && !reap::is_pid1();
            self.feed(Event::LeaderExited { status, pin });
        }
        // With --cgroup: its members are the tree; a child of ours outside
        // it (moved out) is found by the walk.
        // One read of `cgroup.events`, which also re-arms its wake.
        let empty = self.sweeper.cgroup().map(|c| !c.populated());
        if self.leader.is_none() && empty != Some(false) {
            if !descend::has_children() {
                return self.feed(Event::TreeEmpty);
            }
            if empty == Some(true) {
                self.sweeper.escaped();
            }
        }
        let phase = self.machine.phase();
        self.tick();
        if self.machine.phase() == phase {
            self.feed(Event::TreeRemains);
        }
    }

    /// The grace in ms for the event log (-1 for inf).
    fn grace_ms(&self) -> i64 {
        (self.config.grace.duration())
            .map_or(-1, |g| i64::try_from(g.as_millis()).unwrap_or(i64::MAX))
    }

    /// COMMAND's (or the cleanup's) pid, 0 when none.
    fn leader_pid(&self) -> i32 {
        self.leader.as_ref().map_or(0, |c| c.pid())
    }

    /// A sweep's round, and its `stop` or `kill` event if it reached
    /// someone: the stage's first round (`first`), or the first KILL of the
    /// stage that reached a newcomer.
    fn sweep_round(&mut self, sig: Signal, first: bool) {
        let sent = self.sweeper.round(sig, self.leader.as_ref());
        let kill = sig == Signal::KILL;
        if first {
            self.kill_logged = false;
        }
        if sent == 0 || !first && (!kill || self.kill_logged) || !events::enabled() {
            return;
        }
        self.kill_logged = kill;
        let target = match self.machine.phase() {
            Phase::Sweep(_, false) => "cleanup",
            _ => "leftovers",
        };
        let (kind, grace) = if kill {
            ("kill", 0)
        } else {
            ("stop", self.grace_ms())
        };
        events::sent(kind, sig, target, self.leader_pid(), grace);
    }

    /// Carry out one action of the machine, then write its event (never
    /// between a signal and its passing on); the result of a start, for
    /// the machine.
    fn act(&mut self, action: Action) -> Option<Event> {
        match action {
            Action::Say(note) => self.say(note),
            Action::StartCommand => return Some(self.start_command()),
            Action::Forward(sig, from) => self.forward(sig, from),
            Action::StopAll(sig) => {
                let group = self.leader_pid();
                verbose!("--stop-all: sending {sig} to every descendant");
                self.sweeper.stop_all(sig, group);
            }
            Action::NameSurvivors(sig) => self.name_survivors(sig),
            Action::Sweep(sig) => {
                self.sweeper.reset();
                self.sweep_round(sig, true);
            }
            // Marked processes are not signalled twice.
            Action::Rewalk(sig)
                if matches!(self.sweeper.finder(), Finder::Proc | Finder::Cgroup) =>
            {
                self.sweep_round(sig, false)
            }
            Action::KillNewcomers if self.sweeper.new_children(self.leader_pid()) => {
                self.sweep_round(Signal::KILL, false)
            }
            Action::Rewalk(_) | Action::KillNewcomers => {}
            Action::ReapLeader => self.reap_leader(),
            Action::ReportStatus(status) => self.inbox.tell(|f| f.status(STATUS, Some(status))),
            Action::StartCleanup(env, in_place) => return Some(self.start_cleanup(env, in_place)),
            Action::Exit(status) => {
                self.remove_cgroup();
                let usage = self.usage.unwrap_or_default();
                let ms = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
                let lost = self.machine.lost_after();
                let counts = [
                    ("stopping_ms", lost.flatten().map(ms)),
                    ("cpu_usec", usage.cpu_usec),
                    ("user_usec", usage.user_usec),
                    ("system_usec", usage.system_usec),
                    ("memory_peak", usage.memory_peak),
                ];
                let cause = self.machine.cause().name();
                events::exit_with(status.shell_code(), cause, lost.is_some(), &counts);
                self.inbox.tell(|f| f.status(FINISHED, Some(status)));
                self.exit = Some(status);
            }
            // Job control, and the group's KILL.
            on_command => self.on_command(on_command),
        }
        None
    }

    /// The grace is over: every descendant still there, named on stderr
    /// (even without -v) with why `sig` has not ended it, before the KILL.
    fn name_survivors(&mut self, sig: Signal) {
        // While COMMAND runs the stop signal went to its group only (unless
        // --stop-all); the sweep sends it to every descendant.
        // (COMMAND still runs: the stop request's grace, not the sweep's.)
        let tree = self.sweeper.tree();
        let leader = self.leader_pid();
        let running = tree.iter().any(|p| p.pid == leader && !p.is_zombie());
        let all_sent = self.config.stop_all || !running;
        // The sweep's grace (not a stop request's): for a process started
        // since its first walk, the rounds know whether they reached it.
        let swept = matches!(self.machine.phase(), Phase::Sweep(..));
        let sent_to = |p: &_| swept.then(|| self.sweeper.sent_by_rounds(p)).flatten();
        let skip = Default::default();
        for s in pgkit::survivors::below(
            &tree,
            leader,
            all_sent,
            self.machine.signalled_at(),
            sig,
            &skip,
            sent_to,
        ) {
            pgkit::warn!("{}", s.line(sig));
            events::survivor(&s);
        }
    }

    /// Pass a signal on to COMMAND's group (or, `--to child`, to COMMAND
    /// alone), as itself or as what `--map` makes it (pgkit's `route`).
    fn forward(&mut self, sig: Signal, from: i32) {
        let Some(child) = &self.leader else { return };
        let route = &self.config.route;
        let out = route.route(sig).unwrap_or(sig);
        let (to, calls) = route.to.words();
        let pid = child.pid();
        match child.signal(route.to, out) {
            Ok(()) if out == sig => {
                verbose!("received {sig} from pid {from}: forwarded to {to} {pid}")
            }
            Ok(()) => verbose!("received {sig} from pid {from}: passed on as {out} to {to} {pid}"),
            // Every way of sending refused (a seccomp profile): not dropped
            // in silence. reap stays COMMAND's subreaper and waits for its
            // end (leaving would leave COMMAND's tree unguarded).
            Err(e) if pgkit::child::refusal(&e) => pgkit::warn!(
                "received {sig} from pid {from}: unable to send {out} to {to} {pid}: {calls}: {}; \
                 COMMAND runs on until it ends",
                pgkit::error::describe(&e)
            ),
            Err(e) => verbose!("received {sig} from pid {from}: cannot forward: {e}"),
        }
        // The stop request held by --stop-delay was logged on receipt.
        if self.held_logged.take_if(|&mut s| s == sig).is_none() {
            let how = match out {
                _ if pgkit::SigSet::stop_requests().contains(sig) => "trigger",
                o if o != sig => "mapped",
                _ => "forwarded",
            };
            events::signal(sig, from, how, Some(out));
        }
    }

    /// Job control, and the group's KILL: nothing to do without COMMAND.
    fn on_command(&mut self, action: Action) {
        let (Some(child), front) = (&self.leader, self.inbox.front.as_ref()) else {
            return;
        };
        match action {
            Action::ContinueCommand => terminal::on_continue(&mut self.jobs, front, child),
            Action::StopWithTool(sig) => {
                terminal::on_tool_stop(&mut self.jobs, front, child, sig);
                events::signal(sig, 0, "job-control", None)
            }
            Action::ContinueIfStopped if self.jobs.is_stopped() => {
                let _ = child.signal(Target::Group, Signal::CONT);
            }
            // While COMMAND is unreaped, its group's id is still its own.
            Action::ReleaseTerminal => terminal::release(&mut self.jobs, front, child),
            Action::KillGroup => {
                match child.signal(Target::Group, Signal::KILL) {
                    Ok(()) => verbose!("sent KILL to group {}", child.pid()),
                    Err(e) => verbose!("unable to send KILL to group {}: {e}", child.pid()),
                }
                events::sent("kill", Signal::KILL, "group", child.pid(), 0)
            }
            _ => {}
        }
    }

    fn reap_leader(&mut self) {
        if let Some(mut child) = self.leader.take() {
            if let Some(status) = child.reap() {
                events::exited("reaped", child.pid(), status);
            }
            self.sweeper.forget(child.pid());
            // Without /proc, waitid could not get past the leader's zombie
            // to the others: reap them now, or their SIGCHLD, already read,
            // would never wake us again.
            self.reap_adopted(None);
        }
    }

    fn start_command(&mut self) -> Event {
        let mut spawn = Spawn::new(&self.config.command);
        spawn.isolation(Isolation::Group);
        spawn.foreground(self.jobs.handed_over);
        self.service.command(&mut spawn);
        if let Some(cg) = self.sweeper.cgroup() {
            spawn.cgroup(cg.procs_fd());
        }
        // An inner reap marks itself for this one too (pgkit::guard).
        if let Some(value) = self.sweeper.guard_env() {
            spawn.env(pgkit::guard::VAR, value);
        }
        // The budget along a chain: an inner graceful caps its grace to
        // this (and says so at start).
        pgkit::duration::export_grace(&mut spawn, self.config.grace.duration());
        match spawn.spawn(self.startup) {
            Ok(child) => {
                self.service.command_started();
                // The grace's timer, open before any stop signal goes out.
                poll::open_timer();
                let pid = child.pid();
                self.inbox.tell(|f| f.send(COMMAND, pid.into()));
                let cg = self.sweeper.cgroup().map(|c| c.path().display());
                let cg = cg.map(|p| format!(", in cgroup {p}")).unwrap_or_default();
                let tty = (self.jobs.handed_over).then_some(", terminal handed over");
                let tty = tty.unwrap_or_default();
                verbose!("started pid {pid} in a new process group{cg}{tty}");
                events::started(pid, pid, pgkit::tty::own_session());
                self.leader = Some(child);
                Event::Started
            }
            Err(e) => {
                pgkit::warn!("{}", e.msg);
                Event::StartFailed(e.code)
            }
        }
    }

    /// Drive the machine to its end; then what the cleanup (and what it
    /// left) wrote reaches a reader that is still there before reap ends.
    fn drive_to_end(&mut self) {
        self.drive(|_| false);
        if let Some(outlet) = self.inbox.outlet.as_mut() {
            outlet.finish();
        }
    }

    /// The cleanup (`/bin/sh -c CMD`, or `--cleanup-exec`'s vector) in a
    /// new process group, or (`in_place`, `--exec-cleanup`) this process
    /// replaced by it.
    fn start_cleanup(&mut self, env: Env, in_place: bool) -> Event {
        self.remove_cgroup();
        let mut spawn = Spawn::new(self.config.cleanup.as_deref().unwrap_or_default());
        spawn.isolation(Isolation::Group);
        Service::cleanup(&mut spawn);
        for (key, value) in env {
            spawn.env(key, value);
        }
        if in_place {
            verbose!("cleanup: executing in place (pid {})", std::process::id());
        }
        // `STOPPING=1` to the service manager, sent by this process where
        // it relays (as PID 1, or the front that took over); a front sends
        // it as it reads the cleanup's start.
        if let Some(relay) = &self.inbox.relay {
            relay.send("STOPPING=1");
        }
        // From now on an outer graceful's deadline spares everything below
        // this process, then the cleanup's tree while it runs (pgkit::guard).
        self.cleanup_mark = pgkit::guard::mark(pgkit::guard::Role::Cleanup);
        let started = if in_place {
            // The cleanup is this process: spared with its tree while it
            // runs. The exec closes the marks: none reaches the cleanup.
            let me = std::process::id() as i32;
            std::mem::take(&mut self.cleanup_mark).cleanup_is(me);
            // As PID 1 the relay is this process's: its socket goes now.
            // Split, the front's: nobody is left to use it (COMMAND's tree
            // is gone), and nobody would remove it if the front were killed
            // from now on.
            self.inbox.relay = None;
            if let Some(leftover) = self.inbox.front.as_mut().and_then(|f| f.leftover.take()) {
                leftover.remove();
            }
            // From now on the cleanup's end is reap's end (the exec closes
            // the pipe to the front).
            self.inbox.tell(|f| f.status(FINISHED, None));
            // Signals read now are not left pending for the cleanup's
            // image: among them the SIGPIPE of that write when the front is
            // gone, which would kill the cleanup as its mask is restored.
            for event in self.inbox.take_all() {
                self.feed(event);
            }
            events::cleanup_started(me, true);
            // No process of ours stays to relay its output: a reader
            // already gone is seen now, and the stream goes nowhere
            // (pgkit's `outlet`).
            pgkit::outlet::mute_unread();
            Err(spawn.exec(self.startup))
        } else {
            self.inbox
                .tell(|f| f.cleanup_starting(self.machine.cause()));
            // The cleanup's output relayed from now on.
            let ends = (self.inbox.outlet.as_mut()).map_or([None, None], Outlet::start);
            let started = spawn.spawn_with_output(self.startup, ends);
            if let Some(outlet) = self.inbox.outlet.as_mut() {
                outlet.started();
            }
            started
        };
        match started {
            Ok(child) => {
                self.cleanup_mark.cleanup_is(child.pid());
                self.inbox.tell(|f| f.send(CLEANUP, child.pid().into()));
                verbose!("cleanup started: pid {}", child.pid());
                events::cleanup_started(child.pid(), false);
                self.leader = Some(child);
                Event::Started
            }
            Err(e) => {
                pgkit::warn!("cleanup: {}", e.msg);
                Event::StartFailed(e.code)
            }
        }
    }

    /// Reap every exited child but `keep` (COMMAND or the cleanup, kept
    /// unreaped while its group may be signalled).
    fn reap_adopted(&mut self, keep: Option<i32>) {
        let leader = self.leader.as_mut().filter(|c| Some(c.pid()) == keep);
        if leader.as_ref().is_some_and(|c| c.nothing_below()) {
            return;
        }
        match reap::reap_except(keep) {
            Ok((reaped, alone)) => {
                if let Some(leader) = leader.filter(|_| alone) {
                    leader.found_alone();
                }
                // Orphans die in bursts: the next ones are reaped together
                // (pgkit's `hold_children`), unless the leader's exit
                // would then be late (it has no pidfd to tell it).
                let pidfd = self.leader.as_ref().map_or(true, |c| c.pidfd().is_some());
                if !reaped.is_empty() && pidfd {
                    self.inbox.signals.hold_children(Instant::now());
                }
                for (pid, status) in reaped {
                    verbose!("reaped pid {pid} ({status})");
                    events::exited("reaped", pid, status);
                    self.sweeper.forget(pid);
                }
            }
            // Said once (with -v): a refused waitid fails at every wake,
            // and the line that counts is COMMAND's, whose status it loses.
            Err(e) if !std::mem::replace(&mut self.unreaped_said, true) => {
                verbose!("unable to reap: waitid: {e}")
            }
            Err(_) => {}
        }
    }

    /// The line for a decision of the machine.
    fn say(&mut self, note: Note) {
        match note {
            Note::Line(line) => verbose!("{line}"),
            Note::Cut(what) => {
                verbose!("the front process is gone: killing {what} at once");
                self.front_lost()
            }
            Note::Dropped(sig, from, how) | Note::Trigger(sig, from, how) => {
                verbose!("received {sig} from pid {from}{how}");
                let dropped = matches!(note, Note::Dropped(..));
                events::signal(sig, from, if dropped { "dropped" } else { "trigger" }, None)
            }
            Note::StopDelayed(sig, from) => {
                verbose!(
                    "received {sig} from pid {from}: stop delay of {} before it is passed on \
                     (or at the next stop request)",
                    pgkit::Timeout::After(self.config.stop_delay)
                );
                events::signal(sig, from, "trigger", None);
                self.held_logged = Some(sig);
            }
            Note::StopRequested => {
                let grace = self.config.grace;
                verbose!("stop requested: COMMAND's tree has {grace} to exit");
                let sig = self.machine.stop_signal();
                let to = if self.config.stop_all { "all" } else { "group" };
                let out = self.config.route.route(sig).unwrap_or(sig);
                events::sent("stop", out, to, self.leader_pid(), self.grace_ms())
            }
            Note::CommandDone(status, cause) => {
                let cause = cause.name();
                verbose!("COMMAND {status}; every descendant is gone; cause: {cause}")
            }
            Note::CleanupTimedOut => pgkit::warn!(
                "the cleanup ran longer than --cleanup-timeout {}: stopping it (status 124)",
                self.config.cleanup_timeout
            ),
            // A failed or killed cleanup is said even without -v (as the
            // survivors are): a CI log must show why reap's status is not 0.
            Note::CleanupResult(result, true) => pgkit::warn!("cleanup {}", ended(result)),
            Note::CleanupResult(result, false) => verbose!("cleanup {}", ended(result)),
            Note::Exiting(last) => verbose!("exiting: {last}"),
        }
    }
}

/// The cleanup the back spawned in the instant before it noted its pid,
/// and was lost: the back had marked the start before the spawn, once
/// COMMAND's tree was gone, so a child of this process (the back reaped,
/// its orphans re-parented here) is that cleanup, running or exited; the
/// one in a group of its own, as the cleanup is started. None if the back
/// had not reached the cleanup, or no such child is there (the spawn did
/// not happen, or `/proc` cannot say, and the cleanup is run).
fn spawned_unnoted(news: &BackNews) -> Option<i32> {
    news.cleanup_at_ms?;
    let pid = descend::children()?
        .into_iter()
        .find(|&pid| pgkit::procfs::stat(pid).is_some_and(|p| p.pgid == pid))?;
    verbose!("the cleanup (pid {pid}) was started before the subreaper process was lost");
    Some(pid)
}

/// How a process ended, as a verb phrase: "exited with 3", "was killed by KILL".
fn ended(status: Status) -> String {
    match status {
        Status::Exited(_) => status.to_string(),
        Status::Signaled(_) => format!("was {status}"),
    }
}
