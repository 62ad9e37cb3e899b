//! The loop: one blocking call, then feed what happened to the ladder and
//! carry out its actions.
//!
//! COMMAND, the group's leader, is kept unreaped until the whole group is
//! gone, so the group's id stays COMMAND's and `kill(-pgid)` can never reach
//! a stranger. Every wake-up has a cause: a signal (SIGCHLD included, which
//! stands for the exit of a child or an adopted member), COMMAND's pidfd, a
//! member's pidfd, or the machine's next deadline (kept by `poll::wait` on
//! a timerfd, exact where a poll timeout may run 0.1% late); with no
//! deadline the loop sleeps without a timeout.

use crate::below::Below;
use crate::config::Config;
use crate::machine::{Action, Event, Machine};
use pgkit::events;
use pgkit::notify::{Extension, Relay};
use pgkit::sigfd::{Received, SignalFd};
use pgkit::tty::JobControl;
use pgkit::{descend, poll, reap, verbose, Child, Signal, Status, Target};
use std::os::fd::AsFd;
use std::time::{Duration, Instant};

pub struct Supervisor<'a> {
    /// The signals read before COMMAND started, acted on first.
    pub received: Vec<Received>,
    pub config: &'a Config,
    pub child: Child,
    pub machine: Machine,
    pub signals: SignalFd,
    pub jobs: JobControl,
    /// Once COMMAND has exited: a live member of its group, watched by pidfd.
    pub member: Option<descend::Member>,
    /// Without a pidfd of that member (no pidfds here) and with another
    /// parent than graceful, no signal says when it exits: the group is
    /// looked at again after this long, doubling up to a second.
    pub recheck: Option<Duration>,
    /// Said once that, without `/proc`, the group is watched blind.
    pub blind_warned: bool,
    /// Said once that graceful waits for what is left below it.
    pub waiting_below: bool,
    /// COMMAND's notification socket, relayed to systemd's.
    pub relay: Option<Relay>,
    /// The unit's stop timeout, extended while graceful stops.
    pub extension: Extension,
    /// Everything below graceful, which the kill signal reaches.
    pub below: Below,
}

impl Supervisor<'_> {
    /// Run the ladder until the group is gone; COMMAND's status.
    pub fn run(&mut self) -> Status {
        loop {
            // Drain first, then look at COMMAND: a stop that came before a
            // stop request is known by the time the request is acted on.
            // Only a wake that may tell of a child's change looks at the
            // children. (A read that fails now waits a while, see
            // drain_into: no spin.)
            let mut received = std::mem::take(&mut self.received);
            let _ = self.signals.drain_into(&mut received);
            let look = self.signals.children_may_have_changed(&received);
            self.watch_command(look);
            for got in received.into_iter().filter(|r| r.signal != Signal::CHLD) {
                self.on_signal(got);
            }
            self.relay.iter_mut().for_each(Relay::relay);
            let now = Instant::now();
            if let Some(event) = self.machine.due(now) {
                let what = match event {
                    Event::Timeout => "--timeout reached",
                    Event::DelayOver => "stop delay over",
                    _ => "grace over",
                };
                verbose!("{what}");
                if event == Event::GraceExpired {
                    self.name_survivors();
                }
                let actions = self.machine.on(event, now);
                self.act(&actions);
            }
            let children = look.then(|| reap::reap_except(Some(self.child.pid())));
            let (reaped, alone) = children.and_then(Result::ok).unwrap_or_default();
            // Orphans die in bursts: the next ones are reaped together
            // (pgkit's `hold_children`); COMMAND's exit still comes at once,
            // by its pidfd (without one, nothing is held).
            if !reaped.is_empty() && self.child.pidfd().is_some() {
                self.signals.hold_children(now);
            }
            for (pid, status) in reaped {
                verbose!("reaped adopted pid {pid}, {status}");
            }
            // After the kill signal: whatever appeared below since gets it.
            if self.machine.killed() && !self.machine.is_done() {
                self.kill_below();
            }
            if let Some(status) = self.child.exit_status() {
                self.watch_group(now, alone);
                if self.machine.is_done() {
                    return status;
                }
            }
            self.wait();
        }
    }

    /// Reap COMMAND and anything left to reap, give the terminal back;
    /// whether `--timeout` fired.
    pub fn finish(mut self) -> bool {
        self.jobs.release(self.child.pid());
        if let Some(status) = self.child.reap() {
            events::exited("reaped", self.child.pid(), status);
        }
        let _ = reap::reap_except(None);
        // What COMMAND's group said last is sent on; then the socket goes.
        self.relay.take().iter_mut().for_each(Relay::relay);
        self.machine.timed_out()
    }

    /// COMMAND's exit (left unreaped) and its stops, if the wake may tell
    /// of one (`look`, see `children_may_have_changed`).
    fn watch_command(&mut self, look: bool) {
        if !look || self.child.exit_status().is_some() {
            return;
        }
        if let Some(status) = self.child.peek_exit() {
            verbose!("COMMAND {status}");
            self.machine.on(Event::LeaderExited, Instant::now());
            return;
        }
        self.jobs.follow(&mut self.child);
    }

    /// After COMMAND's exit: is anyone of its group left? `alone`: COMMAND
    /// (exited, unreaped) was our one child when the adopted were reaped.
    fn watch_group(&mut self, now: Instant, alone: bool) {
        // Then no descendant is left, so none of its group either. That
        // came from one read of our children file, which names exactly our
        // children whatever PID namespace /proc shows; the walk below (and
        // its check of /proc) is for the other cases.
        if alone {
            verbose!("group {} is gone", self.child.pid());
            self.machine.on(Event::GroupGone, now);
            return;
        }
        // After the kill signal (or --stop-all's stop signal) graceful waits
        // for everything below it (an inner reap's cleanup included); after
        // the stop signal, for what holds the stop up (below.rs): what
        // outlives an inner pgwrap is not left behind. A live descendant
        // means a live child (the others were re-parented to graceful): each
        // exit of one arrives as SIGCHLD; the deadline's timer wakes
        // graceful in any case.
        let stop_all = self.config.stop_all && self.machine.stop_signal().is_some();
        if (self.machine.killed() || stop_all) && descend::usable() {
            if !std::mem::replace(&mut self.waiting_below, true) {
                verbose!("waiting for every process below graceful to end");
            }
            return;
        }
        if self.machine.stop_signal().is_some() {
            match self.below.held_up(self.child.pid()) {
                Some(true) => {
                    if !std::mem::replace(&mut self.waiting_below, true) {
                        verbose!("waiting for what holds the stop up below graceful");
                    }
                    return;
                }
                Some(false) => {
                    verbose!("nothing below graceful holds the stop up");
                    self.machine.on(Event::GroupGone, now);
                    return;
                }
                None => {}
            }
        }
        if !descend::usable() {
            return self.watch_group_blind(now);
        }
        let before = self.member.as_ref().map(|m| m.pid);
        let pgid = self.child.pid();
        self.member = descend::live_member(pgid, pgid);
        let me = std::process::id() as i32;
        let blind = self.member.as_ref().is_some_and(|m| {
            m.pidfd.is_none() && pgkit::procfs::stat(m.pid).is_some_and(|p| p.ppid != me)
        });
        self.recheck = match (blind, self.recheck) {
            (false, _) => None,
            (true, None) => Some(RECHECK_FIRST),
            (true, Some(step)) => Some((step * 2).min(RECHECK_MOST)),
        };
        match &self.member {
            None => {
                verbose!("group {pgid} is gone");
                self.machine.on(Event::GroupGone, now);
            }
            Some(m) if before != Some(m.pid) => {
                verbose!("waiting for pid {} and the rest of group {pgid}", m.pid);
                if blind {
                    verbose!(
                        "no pidfd of pid {} (not our child): looking again for what is left of \
                         group {pgid} every second at most",
                        m.pid
                    );
                }
            }
            Some(_) => {}
        }
    }

    /// Without a usable `/proc` (not mounted, or another PID namespace's)
    /// the members left after COMMAND cannot be seen. During the grace the
    /// group stays pinned until the deadline, and the kill signal goes to it
    /// then, so a member that ignores the stop signal is still killed; with
    /// no grace running graceful cannot know, says so, and leaves with
    /// COMMAND.
    fn watch_group_blind(&mut self, now: Instant) {
        let pgid = self.child.pid();
        if self.machine.grace_deadline().is_some() {
            if !std::mem::replace(&mut self.blind_warned, true) {
                pgkit::warn!(
                    "/proc is not usable ({}): cannot see what is left of group {pgid}; \
                     it gets {} at the end of the grace period",
                    proc_problem(),
                    self.config.kill_signal
                );
            }
            return;
        }
        if !self.machine.killed() {
            pgkit::warn!(
                "/proc is not usable ({}): cannot see what is left of group {pgid} \
                 after COMMAND exited; leaving with COMMAND",
                proc_problem()
            );
        }
        self.machine.on(Event::GroupGone, now);
    }

    /// A signal received by graceful: a stop trigger, passed on, or dropped.
    fn on_signal(&mut self, got: Received) {
        let Received { signal, from, .. } = got;
        let group = self.child.pid();
        let routed = self.config.on.contains(signal) || self.config.forward.contains(signal);
        if !routed && self.jobs.on_signal(&self.child, signal, from) {
            return;
        }
        if self.config.on.contains(signal) {
            events::signal(signal, from, "trigger", None);
            let actions = self.machine.on(Event::Trigger(signal), Instant::now());
            verbose!("received {signal} from pid {from}: stop trigger");
            if actions.is_empty() {
                verbose!("the kill signal was already sent: nothing to add");
            }
            self.act(&actions);
        } else if self.config.forward.contains(signal) {
            let sent = self.child.signal(Target::Group, signal);
            events::signal(signal, from, "forwarded", Some(signal));
            match sent {
                Ok(()) => verbose!("received {signal} from pid {from}: forwarded to group {group}"),
                Err(e) if pgkit::child::refusal(&e) => self.refused(signal, &e),
                Err(e) => verbose!("received {signal} from pid {from}: cannot forward: {e}"),
            }
        } else {
            events::signal(signal, from, "dropped", None);
            verbose!("received {signal} from pid {from}: dropped");
        }
    }

    /// Every way of sending `sig` to COMMAND's group was refused (a seccomp
    /// profile): graceful says so and exits (pgkit's `cannot_signal`).
    fn refused(&self, sig: Signal, e: &std::io::Error) -> ! {
        (self.child).cannot_signal(Target::Group, sig, e, self.config.pdeathsig)
    }

    /// The grace is over: name every process still below graceful that
    /// the kill signal is about to reach, and why the stop signal has not
    /// ended it, on stderr even without -v (one line each), before the
    /// kill signal. The suite's own tools are seen through.
    fn name_survivors(&mut self) {
        let pgid = self.child.pid();
        let stop = self.machine.stop_signal().unwrap_or(Signal::TERM);
        let alive = self.child.exit_status().is_none();
        let found = match self.below.walk() {
            Some(walk) => {
                let m = &self.machine;
                let stopped = m
                    .grace_deadline()
                    .zip(m.grace())
                    .and_then(|(d, g)| d.checked_sub(g));
                pgkit::survivors::below(
                    &walk.tree,
                    pgid,
                    false,
                    stopped,
                    stop,
                    &walk.guarded,
                    |_| self.config.stop_all.then_some(true),
                )
            }
            // Without /proc: COMMAND alone, if it still runs.
            None => alive
                .then(|| pgkit::survivors::survivor(pgid, stop))
                .flatten()
                .into_iter()
                .collect(),
        };
        for s in found {
            pgkit::warn!("{}", s.line(stop));
            events::survivor(&s);
        }
    }

    /// The kill signal to every process below graceful but what an inner
    /// reap guards (below.rs); COMMAND's group has had it already.
    fn kill_below(&mut self) {
        let sig = self.config.kill_signal;
        if let Some(walk) = self.below.walk() {
            self.below.kill(&walk, self.child.pid(), sig);
        }
    }

    /// Carry out the ladder's actions, in order.
    fn act(&mut self, actions: &[Action]) {
        let group = self.child.pid();
        // The grace in ms for the event log (-1 for inf).
        let grace = self.machine.grace();
        let grace_ms = grace.map_or(-1, |g| i64::try_from(g.as_millis()).unwrap_or(i64::MAX));
        // The kill signal is the last one sent of a batch that ends in the
        // kill: with no grace the stop signal comes first in the same batch.
        let kill_at = (self.machine.killed())
            .then(|| (actions.iter()).rposition(|a| matches!(a, Action::SendGroup(_))))
            .flatten();
        for (at, &action) in actions.iter().enumerate() {
            match action {
                Action::SendGroup(sig) => {
                    let sent = self.child.signal(Target::Group, sig);
                    let kill = kill_at == Some(at);
                    let kind = if kill { "kill" } else { "stop" };
                    events::sent(kind, sig, "group", group, grace_ms);
                    match sent {
                        Ok(()) => verbose!("sent {sig} to group {group}"),
                        Err(e) if pgkit::child::refusal(&e) => self.refused(sig, &e),
                        Err(e) => verbose!("cannot send {sig} to group {group}: {e}"),
                    }
                    // The deadline reaches everything below graceful, once
                    // COMMAND's group has had the kill signal: what is above
                    // an inner reap's back (its front, in that group) dies
                    // first (below.rs).
                    if kill {
                        self.kill_below();
                    } else if self.config.stop_all {
                        self.below.stop_all(group, sig);
                    }
                }
                // A stopped process acts on nothing but KILL until continued.
                Action::ContinueIfStopped if self.jobs.is_stopped() => {
                    let _ = self.child.signal(Target::Group, Signal::CONT);
                    verbose!("COMMAND is stopped: sent CONT to group {group}");
                }
                Action::ContinueIfStopped => {}
                // The durations as the user gave them (not what is left of
                // them by now, which reads "999 ms" for 1s).
                Action::ArmDelay(_) => verbose!(
                    "stop delay: the stop signal goes out in {} (or at the next trigger)",
                    pgkit::Timeout::After(self.config.stop_delay)
                ),
                Action::ArmDeadline(_) => verbose!(
                    "grace period started: {} in {}",
                    self.config.kill_signal,
                    self.machine
                        .grace()
                        .map_or(pgkit::Timeout::Never, pgkit::Timeout::After)
                ),
            }
        }
    }

    /// The one blocking call.
    fn wait(&mut self) {
        let now = Instant::now();
        // Where no descriptor and no signal can tell of a member's exit
        // (kernels without pidfds), a look again later: the one bounded
        // exception to "no wake-up unless something happened".
        let mut recheck = self.recheck.and_then(|step| now.checked_add(step));
        // Under a service manager, while stopping: the unit's stop timeout
        // extended to the grace (pgkit's Extension), slice by slice with
        // none (`inf`, the kill being waited for).
        if let Some(relay) = self.relay.as_ref().filter(|_| self.machine.stopping()) {
            let (by, again) = self.extension.next(self.machine.deadline(), now);
            if let Some(by) = by {
                relay.extend(u64::try_from(by.as_millis()).unwrap_or(u64::MAX));
            }
            recheck = recheck.into_iter().chain(again).min();
        }
        let due = recheck.into_iter().chain(self.machine.deadline()).min();
        let deadline = self.signals.wake_by(due, || now);
        let mut fds = vec![self.signals.as_fd()];
        if self.child.exit_status().is_none() {
            // Readable for good once COMMAND has exited: then left out.
            fds.extend(self.child.pidfd());
        }
        let member = self.member.as_ref().and_then(|m| m.pidfd.as_ref());
        fds.extend(member.map(|fd| fd.as_fd()));
        fds.extend(self.relay.as_ref().map(|r| r.as_fd()));
        fds.extend(self.below.news().filter(|_| self.machine.killed()));
        poll::wait(&fds, deadline);
    }
}

/// The first and the longest wait between two looks at a group whose
/// last members no pidfd watches (see `Supervisor::recheck`).
const RECHECK_FIRST: Duration = Duration::from_millis(10);
const RECHECK_MOST: Duration = Duration::from_secs(1);

/// Why `/proc` cannot be used, for a warning.
fn proc_problem() -> String {
    pgkit::procfs::check()
        .err()
        .map_or_else(|| "not mounted".to_string(), |e| e.to_string())
}
