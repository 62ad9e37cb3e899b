//! The back's life, always in the same order:
//!
//! 1. Run: COMMAND runs; signals are passed on to its group; adopted
//!    zombies are reaped as they appear. A stop request (TERM, INT, HUP or
//!    QUIT, passed on) starts the grace: COMMAND's whole tree is killed if
//!    COMMAND has not exited when it is over.
//! 2. COMMAND exits (or could not be started).
//! 3. Sweep: every remaining descendant gets the stop signal, then KILL
//!    after the grace, until reap has no child left (`--keep-orphans`: they
//!    are waited for instead). After a stop request the grace is the one
//!    that started then: a stop request gives the whole tree `--grace`.
//! 4. Cleanup: `/bin/sh -c CMD` in a new process group with `REAP_STATUS`,
//!    `REAP_SIGNAL` and `REAP_CAUSE`; signals are logged, not passed on; only
//!    `--cleanup-timeout` stops it. Its leftovers are swept in turn.
//! 5. The final status: COMMAND's, or the cleanup's if COMMAND succeeded
//!    and the cleanup failed.
//!
//! If the front dies (its pipe reaches end of file) during 1 or 3, COMMAND's
//! tree is killed at once and the cleanup runs with `REAP_CAUSE=lost`; if it
//! is already gone before COMMAND could start, COMMAND is not started at all.
//!
//! The back tells the front how far it got (COMMAND's pid, its status, the
//! cleanup's pid) and, right before it exits or becomes the cleanup, that it
//! finished. If the back dies before that, the front takes over with the
//! same code ([`Back::recover`]): COMMAND's tree, re-parented to the front
//! (a subreaper too), is killed at once, and the cleanup runs there unless
//! the back had started it.
//!
//! One thread; each wait is one `ppoll` on the signalfd, the front's pipe
//! and (while it runs) the pidfd of COMMAND or the cleanup, with a deadline
//! only while a grace or the cleanup's timeout runs.

use crate::config::{stop_requests, Config};
use crate::guardian::{BackLink, LostBack, ToFront};
use crate::outcome::{cleanup_env, final_status, Cause, CLEANUP_TIMED_OUT};
use crate::sweep::{Finder, Sweeper};
use crate::terminal::Terminal;
use pgkit::child::Job;
use pgkit::sigfd::{Received, SignalFd};
use pgkit::spawn::{Isolation, Spawn};
use pgkit::startup::Startup;
use pgkit::{descend, poll, reap, tty, verbose, Child, Signal, Status, Target};
use std::collections::HashSet;
use std::ffi::OsString;
use std::os::fd::{AsFd, BorrowedFd};
use std::time::Instant;

/// Something that happened to the back.
enum Event {
    /// A signal for reap: received by the back itself, or by the front and
    /// handed over.
    Signal(Received),
    /// The front is gone.
    FrontLost,
}

/// Where events come from: the back's own signalfd and the front's pipe.
pub struct Inbox {
    signals: SignalFd,
    front: Option<BackLink>,
    /// The last wait found the front's pipe readable (or none was made).
    front_ready: bool,
    /// The last wait found its `extra` descriptor readable (or none was made).
    extra_ready: bool,
    /// Events read before COMMAND existed, for the first look after.
    held: Vec<Event>,
}

impl Inbox {
    pub fn new(signals: SignalFd, front: Option<BackLink>) -> Inbox {
        Inbox {
            signals,
            front,
            front_ready: true,
            extra_ready: true,
            held: Vec::new(),
        }
    }

    /// Everything that happened since the last call (drained, not waited for).
    fn take(&mut self) -> Vec<Event> {
        let mut events = std::mem::take(&mut self.held);
        events.extend(self.signals.drain().into_iter().map(Event::Signal));
        if let Some(front) = self.front.as_mut().filter(|_| self.front_ready) {
            let got = front.read();
            events.extend(got.signals.into_iter().map(Event::Signal));
            if got.lost {
                events.push(Event::FrontLost);
                self.front = None;
            }
        }
        events
    }

    /// Before COMMAND starts: whether the front is gone already. The
    /// signals read meanwhile are kept for the next [`Inbox::take`], so
    /// they are passed on once COMMAND exists.
    fn front_lost_before_start(&mut self) -> bool {
        let events = self.take();
        let lost = events.iter().any(|e| matches!(e, Event::FrontLost));
        self.held = events
            .into_iter()
            .filter(|e| !matches!(e, Event::FrontLost))
            .collect();
        lost
    }

    /// Sleep until a signal, a word from the front, `extra` (the pidfd of
    /// COMMAND or the cleanup) readable, or `deadline`. What was found
    /// readable is remembered, so the next look skips the system calls that
    /// have nothing to report: when many orphans exit one by one, reap
    /// wakes once per exit.
    fn wait(&mut self, extra: Option<BorrowedFd<'_>>, deadline: Option<Instant>) {
        let mut fds = vec![self.signals.as_fd()];
        let front = self.front.as_ref().and_then(|f| f.fd());
        let front_at = front.map(|_| fds.len());
        fds.extend(front);
        let extra_at = extra.map(|_| fds.len());
        fds.extend(extra);
        match poll::wait(&fds, deadline) {
            Ok(ready) => {
                self.front_ready = front_at.is_some_and(|i| ready.contains(&i));
                self.extra_ready = extra_at.map_or(true, |i| ready.contains(&i));
            }
            Err(e) => {
                pgkit::warn!("poll failed: {e}");
                (self.front_ready, self.extra_ready) = (true, true);
            }
        }
    }

    /// Whether the last wait found `extra` readable: without that, COMMAND
    /// (or the cleanup) has not exited and need not be asked.
    fn extra_ready(&self) -> bool {
        self.extra_ready
    }
}

/// How the sweep starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stage {
    /// `--keep-orphans`: wait for leftovers to exit on their own.
    Wait,
    /// Stop signal sent; KILL at the deadline (`None`: grace is `inf`).
    Stop(Option<Instant>),
    /// KILL to everything, until nothing is left.
    Kill,
}

/// How phase 1 ended.
enum RunEnd {
    Exited,
    GraceOver,
    Lost,
}

pub struct Back<'a> {
    config: &'a Config,
    startup: &'a Startup,
    inbox: Inbox,
    terminal: Terminal,
    sweeper: Sweeper,
    handed_over: bool,
    /// A stop request was passed on to COMMAND.
    cancel: bool,
    /// When the grace that a stop request started is over.
    stop_deadline: Option<Instant>,
    /// The front died.
    lost: bool,
    /// The way to the front (the back of a split reap only).
    to_front: Option<ToFront>,
    /// `--exec-cleanup` applies (not in the front, which must say what it
    /// did once the cleanup is over).
    may_exec: bool,
}

impl<'a> Back<'a> {
    pub fn new(
        config: &'a Config,
        startup: &'a Startup,
        inbox: Inbox,
        terminal: Terminal,
        handed_over: bool,
        to_front: Option<ToFront>,
    ) -> Back<'a> {
        Back {
            config,
            startup,
            inbox,
            terminal,
            sweeper: Sweeper::new(),
            handed_over,
            cancel: false,
            stop_deadline: None,
            lost: false,
            to_front,
            may_exec: config.exec_cleanup,
        }
    }

    /// Phases 1 to 5; returns reap's final status.
    pub fn run(mut self) -> Status {
        // A front already gone (its group SIGKILLed right after the start):
        // starting COMMAND now would only be to kill it.
        let started = if self.inbox.front_lost_before_start() {
            self.lost = true;
            verbose!("the front process is gone before COMMAND started: not starting it");
            None
        } else {
            Some(
                Spawn::new(&self.config.command)
                    .isolation(Isolation::Group)
                    .foreground(self.handed_over)
                    .spawn(self.startup),
            )
        };
        let status = match started {
            // Never started: for the cleanup, as if killed at once (what a
            // COMMAND started a moment earlier would have become).
            None => Status::Signaled(Signal::KILL),
            Some(Ok(mut child)) => {
                if let Some(front) = &self.to_front {
                    front.command_started(child.pid());
                }
                verbose!(
                    "started pid {} in a new process group{}",
                    child.pid(),
                    if self.handed_over {
                        ", terminal handed over"
                    } else {
                        ""
                    }
                );
                let start = match self.watch(&mut child) {
                    RunEnd::Exited if self.cancel => Stage::Stop(self.stop_deadline),
                    RunEnd::Exited if self.config.keep_orphans => Stage::Wait,
                    RunEnd::Exited => Stage::Stop(self.grace_from_now()),
                    RunEnd::GraceOver | RunEnd::Lost => Stage::Kill,
                };
                // While COMMAND is unreaped, its group's id is still its own.
                self.terminal.release(&child);
                self.sweep(Some(&mut child), start, true);
                child
                    .exit_status()
                    .unwrap_or(Status::Exited(pgkit::error::TOOL_FAILED))
            }
            Some(Err(e)) => {
                pgkit::warn!("{}", e.msg);
                Status::Exited(e.code)
            }
        };
        if let Some(front) = &self.to_front {
            front.command_status(status);
        }
        // Signals that arrived meanwhile still count (a stop request or the
        // front's death before COMMAND could be started).
        self.note_late_events();
        let cause = Cause::of(self.cancel, self.lost, status);
        verbose!(
            "COMMAND {status}; every descendant is gone; cause: {}",
            cause.name()
        );
        let cleanup = self.cleanup(status, cause);
        let last = final_status(status, cleanup);
        verbose!("exiting: {last}");
        if let Some(front) = &self.to_front {
            front.finished();
        }
        last
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
        self.lost = true;
        self.may_exec = false;
        let news = back.news;
        verbose!(
            "the subreaper process (pid {}) {} before it finished: taking over",
            back.pid,
            ended(back.status)
        );
        // At most one of the two is left: the back reaps COMMAND before it
        // starts the cleanup.
        let (role, known) = match news.cleanup {
            Some(pid) => ("the cleanup", Some(pid)),
            None => ("COMMAND", news.command),
        };
        let mut pinned = known.and_then(Child::adopt);
        let running = pinned.as_mut().is_some_and(|c| c.poll_exit().is_none());
        // Counted before the KILL: a process the group's KILL ends may be
        // gone before the sweep's walk sees it.
        let mut killed: HashSet<(i32, u64)> = descend::descendants()
            .unwrap_or_default()
            .into_iter()
            .filter(|p| !p.is_zombie())
            .map(|p| (p.pid, p.start))
            .collect();
        if let Some(child) = pinned.as_ref() {
            // While COMMAND is unreaped, its group's id is still its own.
            self.terminal.release(child);
        }
        if let Some(child) = pinned.as_ref().filter(|_| running) {
            match child.signal(Target::Group, Signal::KILL) {
                Ok(()) => verbose!("sent KILL to group {}", child.pid()),
                Err(e) => verbose!("unable to send KILL to group {}: {e}", child.pid()),
            }
        }
        self.sweep(pinned.as_mut(), Stage::Kill, true);
        killed.extend(self.sweeper.killed().iter().copied());
        let adopted = pinned.as_ref().map(|c| c.pid());
        let others = killed.iter().filter(|&&(p, _)| Some(p) != adopted).count();
        let what = match known {
            Some(pid) if running => {
                format!("killed {role} (pid {pid}) and {others} other process(es)")
            }
            Some(pid) => {
                format!("{role} (pid {pid}) had already exited; killed {others} other process(es)")
            }
            None if others == 0 => "COMMAND had not been started".to_string(),
            None => format!("killed {others} process(es) (COMMAND's pid was not known yet)"),
        };
        let head = format!(
            "the subreaper process (pid {}) {}",
            back.pid,
            ended(back.status)
        );
        if news.cleanup.is_some() {
            return format!("{head} during the cleanup: {what}; the cleanup is not run again");
        }
        let status = pinned
            .as_ref()
            .and_then(|c| c.exit_status())
            .or(news.status)
            .unwrap_or(Status::Signaled(Signal::KILL));
        self.note_late_events();
        let cause = Cause::Lost;
        verbose!(
            "COMMAND {status}; every descendant is gone; cause: {}",
            cause.name()
        );
        match self.cleanup(status, cause) {
            Some(done) => format!(
                "{head}: {what}; cleanup ran (REAP_CAUSE={}) and {}",
                cause.name(),
                ended(done)
            ),
            None => format!("{head}: {what}"),
        }
    }

    fn grace_from_now(&self) -> Option<Instant> {
        self.config.grace().map(|g| Instant::now() + g)
    }

    /// Phase 1: until COMMAND exits, the grace after a stop request is
    /// over, or the front is lost.
    fn watch(&mut self, child: &mut Child) -> RunEnd {
        loop {
            for event in self.inbox.take() {
                match event {
                    Event::FrontLost => {
                        self.lost = true;
                        verbose!("the front process is gone: killing COMMAND's tree at once");
                        return RunEnd::Lost;
                    }
                    Event::Signal(r) => self.pass_on(child, r),
                }
            }
            self.reap_adopted(Some(child.pid()));
            let exited = if self.inbox.extra_ready() {
                child.poll_exit()
            } else {
                None
            };
            if let Some(status) = exited {
                verbose!("COMMAND (pid {}) {status}", child.pid());
                self.terminal.release(child);
                return RunEnd::Exited;
            }
            match child.poll_job() {
                Some(Job::Stopped(sig)) => self.terminal.on_stop(child, sig),
                Some(Job::Continued) => self.terminal.stopped = false,
                None => {}
            }
            if self.stop_deadline.is_some_and(|d| Instant::now() >= d) {
                verbose!("grace over: killing COMMAND's tree");
                return RunEnd::GraceOver;
            }
            self.inbox.wait(child.pidfd(), self.stop_deadline);
        }
    }

    /// A signal received while COMMAND runs: pass it on, or drop it.
    fn pass_on(&mut self, child: &Child, r: Received) {
        let Received {
            signal: sig, from, ..
        } = r;
        if sig == Signal::CHLD {
            return;
        }
        if sig == Signal::CONT {
            self.terminal.on_continue(child);
        }
        if !self.config.forwards(sig) && tty::is_job_stop(sig) {
            return self.terminal.on_tool_stop(child, sig);
        }
        if !self.config.forwards(sig) {
            if sig != Signal::CONT {
                verbose!("received {sig} from pid {from}: dropped");
            }
            return;
        }
        match child.signal(Target::Group, sig) {
            Ok(()) => verbose!(
                "received {sig} from pid {from}: forwarded to group {}",
                child.pid()
            ),
            Err(e) => verbose!("received {sig} from pid {from}: cannot forward: {e}"),
        }
        if self.config.is_stop_request(sig) {
            if !self.cancel {
                self.cancel = true;
                self.stop_deadline = self.grace_from_now();
                verbose!(
                    "stop requested: COMMAND's tree has {} to exit",
                    self.config.grace
                );
            }
            // A stopped process acts on nothing but KILL until continued.
            if self.terminal.stopped {
                let _ = child.signal(Target::Group, Signal::CONT);
            }
        }
    }

    /// Reap every exited child but `keep` (COMMAND or the cleanup, kept
    /// unreaped while its group may be signalled).
    fn reap_adopted(&mut self, keep: Option<i32>) {
        match reap::reap_except(keep) {
            Ok(reaped) => {
                for (pid, status) in reaped {
                    verbose!("reaped pid {pid} ({status})");
                    self.sweeper.forget(pid);
                }
            }
            Err(e) => pgkit::warn!("unable to reap: {e}"),
        }
    }

    /// Phase 3 (and the cleanup's own leftovers): signal the tree stage by
    /// stage until no child is left. `pinned` is COMMAND or the cleanup;
    /// it is reaped here. `for_command`: COMMAND's leftovers (phase 3),
    /// where the front's death kills at once and a stop request ends a
    /// `--keep-orphans` wait; the cleanup's leftovers are not interrupted.
    fn sweep(&mut self, mut pinned: Option<&mut Child>, start: Stage, for_command: bool) {
        let mut stage = start;
        self.sweeper.reset();
        let pinned_ref = pinned.as_deref();
        match stage {
            Stage::Wait => verbose!("waiting for leftovers to exit (--keep-orphans)"),
            Stage::Stop(_) => self.sweeper.round(self.config.signal, pinned_ref),
            Stage::Kill => self.sweeper.round(Signal::KILL, pinned_ref),
        }
        let mut group_killed = stage == Stage::Kill;
        loop {
            for event in self.inbox.take() {
                match event {
                    Event::FrontLost => {
                        self.lost = true;
                        if for_command && stage != Stage::Kill {
                            verbose!("the front process is gone: killing every descendant at once");
                            stage = Stage::Kill;
                            self.sweeper.reset();
                            self.sweeper.round(Signal::KILL, pinned.as_deref());
                            group_killed = true;
                        }
                    }
                    Event::Signal(r) if r.signal == Signal::CHLD => {}
                    Event::Signal(r)
                        if for_command
                            && stage == Stage::Wait
                            && stop_requests().contains(r.signal) =>
                    {
                        verbose!(
                            "received {} from pid {}: stopping the leftovers",
                            r.signal,
                            r.from
                        );
                        self.cancel = true;
                        stage = Stage::Stop(self.grace_from_now());
                        self.sweeper.round(self.config.signal, pinned.as_deref());
                    }
                    Event::Signal(r) => {
                        verbose!("received {} from pid {}: not passed on", r.signal, r.from)
                    }
                }
            }
            let keep = pinned.as_ref().filter(|c| !c.is_reaped()).map(|c| c.pid());
            self.reap_adopted(keep);
            if let Some(child) = pinned.as_deref_mut() {
                // The leader stays pinned only while its group is how
                // leftovers are reached, and until the group got its KILL.
                let hold = self.sweeper.needs_pin()
                    && !group_killed
                    && matches!(stage, Stage::Stop(Some(_)));
                if child.poll_exit().is_some() && !hold {
                    child.reap();
                    self.sweeper.forget(child.pid());
                    pinned = None;
                    // Without /proc, waitid could not get past the leader's
                    // zombie to the others: reap them now, or their SIGCHLD,
                    // already read, would never wake us again.
                    self.reap_adopted(None);
                }
            }
            if pinned.is_none() && !descend::has_children() {
                return;
            }
            let keep = pinned.as_ref().map(|c| c.pid());
            match stage {
                Stage::Stop(Some(deadline)) if Instant::now() >= deadline => {
                    verbose!("grace over: killing every descendant left");
                    stage = Stage::Kill;
                    self.sweeper.reset();
                    self.sweeper.round(Signal::KILL, pinned.as_deref());
                    group_killed = true;
                    continue;
                }
                // The whole tree again on every wake of the stop stage, not
                // only our direct children: a process that ignores the stop
                // signal may have forked since the last walk, and its child
                // is not ours (it has a live parent). Marked processes are
                // not signalled twice.
                Stage::Stop(_) if self.sweeper.finder == Finder::Proc => {
                    self.sweeper.round(self.config.signal, pinned.as_deref())
                }
                Stage::Kill if self.sweeper.new_children(keep) => {
                    self.sweeper.round(Signal::KILL, pinned.as_deref())
                }
                _ => {}
            }
            let deadline = match stage {
                Stage::Stop(d) => d,
                _ => None,
            };
            let running = pinned.as_ref().filter(|c| c.exit_status().is_none());
            self.inbox.wait(running.and_then(|c| c.pidfd()), deadline);
        }
    }

    /// Events that came after the last look (before the cleanup starts).
    fn note_late_events(&mut self) {
        for event in self.inbox.take() {
            match event {
                Event::FrontLost => self.lost = true,
                Event::Signal(r) if r.signal == Signal::CHLD => {}
                Event::Signal(r) => {
                    verbose!("received {} from pid {}: not passed on", r.signal, r.from)
                }
            }
        }
    }

    /// Phase 4: the cleanup, with its leftovers swept after it. Returns its
    /// status (`None` without `--cleanup`).
    fn cleanup(&mut self, status: Status, cause: Cause) -> Option<Status> {
        let argv: Vec<OsString> = self.config.cleanup_argv()?;
        let mut spawn = Spawn::new(&argv);
        spawn.isolation(Isolation::Group);
        for (key, value) in cleanup_env(status, cause) {
            spawn.env(key, value);
        }
        if self.may_exec {
            verbose!("cleanup: executing in place (pid {})", std::process::id());
            // From now on the cleanup's end is reap's end (the exec closes
            // the pipe to the front).
            if let Some(front) = &self.to_front {
                front.finished();
            }
            // Signals read now are not left pending for the cleanup's image:
            // among them the SIGPIPE of that write when the front is gone,
            // which would kill the cleanup as its mask is restored.
            self.note_late_events();
            let e = spawn.exec(self.startup);
            pgkit::warn!("cleanup: {}", e.msg);
            return Some(Status::Exited(e.code));
        }
        let mut child = match spawn.spawn(self.startup) {
            Ok(child) => child,
            Err(e) => {
                pgkit::warn!("cleanup: {}", e.msg);
                return Some(Status::Exited(e.code));
            }
        };
        verbose!("cleanup started: pid {}", child.pid());
        if let Some(front) = &self.to_front {
            front.cleanup_started(child.pid());
        }
        let deadline = self
            .config
            .cleanup_timeout
            .duration()
            .map(|d| Instant::now() + d);
        let mut timed_out = false;
        let mut hinted = false;
        loop {
            for event in self.inbox.take() {
                match event {
                    Event::FrontLost => {
                        self.lost = true;
                        verbose!("the front process is gone; the cleanup goes on");
                    }
                    Event::Signal(r) if r.signal == Signal::CHLD => {}
                    Event::Signal(r) => verbose!(
                        "received {} from pid {} during the cleanup: not passed on",
                        r.signal,
                        r.from
                    ),
                }
            }
            self.reap_adopted(Some(child.pid()));
            if child.poll_exit().is_some() {
                break;
            }
            if let Some(Job::Stopped(sig)) = child.poll_job() {
                if !hinted && (sig == Signal::TTIN || sig == Signal::TTOU) {
                    hinted = true;
                    pgkit::warn!(
                        "the cleanup (pid {}) is stopped by SIG{sig}: it used the terminal from the \
                         background; give it other input and output (e.g. < /dev/null)",
                        child.pid()
                    );
                }
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                timed_out = true;
                pgkit::warn!(
                    "the cleanup ran longer than --cleanup-timeout {}: stopping it (status 124)",
                    self.config.cleanup_timeout
                );
                break;
            }
            self.inbox.wait(child.pidfd(), deadline);
        }
        let start = match () {
            _ if timed_out => Stage::Stop(self.grace_from_now()),
            _ if self.config.keep_orphans => Stage::Wait,
            _ => Stage::Stop(self.grace_from_now()),
        };
        self.sweep(Some(&mut child), start, false);
        let result = if timed_out {
            CLEANUP_TIMED_OUT
        } else {
            child.exit_status()?
        };
        verbose!("cleanup {result}");
        Some(result)
    }
}

/// How a process ended, as a verb phrase: "exited with 3", "was killed by KILL".
fn ended(status: Status) -> String {
    match status {
        Status::Exited(_) => status.to_string(),
        Status::Signaled(_) => format!("was {status}"),
    }
}
