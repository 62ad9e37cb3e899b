//! The back's life as a pure state machine: Start -> Run -> Sweep ->
//! Settle -> Cleanup -> Sweep (of the cleanup's leftovers) -> Done.
//!
//! No system call, no `/proc`, no clock read here: the driver (phases.rs)
//! turns what the kernel says into [`Event`]s, passes the time in, and
//! carries out the [`Action`]s, in order; it sleeps until
//! [`Machine::deadline`]. So every row of reap(1)'s order of events, the
//! REAP_CAUSE rules and the guarantee are unit tests without processes
//! (below).
//!
//! - Start: signals read before COMMAND exists are held, and passed on
//!   once it does; a front already lost means COMMAND is never started.
//! - Run: signals are passed on; a stop request (TERM, INT, HUP or QUIT,
//!   passed on) starts the grace, and COMMAND's tree is killed when it runs
//!   out; the front's death kills the tree at once.
//! - Sweep: once COMMAND has exited, every descendant gets the stop signal,
//!   then KILL after the grace, until reap has no child left
//!   (`--keep-orphans`: waited for, until a stop request).
//! - Settle: COMMAND and its tree are gone; the events meanwhile still
//!   count (the front's death), then the cause is known and the cleanup
//!   starts (or replaces the back, `--exec-cleanup`).
//! - Cleanup: signals are logged, not passed on; only `--cleanup-timeout`
//!   stops it (status 124). Its leftovers are swept in turn, uninterrupted.
//! - Done: reap's final status.

use crate::config::Config;
use crate::outcome::{cleanup_env, final_status, Cause, CLEANUP_TIMED_OUT};
use pgkit::{tty, SigSet, Signal, Status, Timeout};
use std::time::{Duration, Instant};

/// The cleanup's environment: `REAP_STATUS`, `REAP_SIGNAL`, `REAP_CAUSE`.
pub type Env = [(&'static str, String); 3];

/// What the back is told.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// A signal for reap (received by the back, or handed over by the
    /// front), and its sender.
    Signal(Signal, i32),
    /// The front is gone (its pipe reached end of file).
    FrontLost,
    /// The front has read its signals since COMMAND's status was said: each
    /// one it had is in (see guardian.rs).
    Answered,
    /// Everything pending has been read since the phase began (Start,
    /// Settle): the machine may go on.
    Drained,
    /// What the phase starts (COMMAND, then the cleanup) was started.
    Started,
    /// It could not be started (or exec'd): 125, 126 or 127.
    StartFailed(i32),
    /// It exited while it ran (left unreaped).
    Exited(Status),
    /// During a sweep: the pinned process (COMMAND, or the cleanup) has
    /// exited, unreaped. `pin`: leftovers are reached through its group
    /// only (no usable `/proc`), so its group's id must stay its own.
    LeaderExited { status: Status, pin: bool },
    /// During a sweep: reap has no child left, and no pinned process.
    TreeEmpty,
    /// During a sweep: a look after a wake found the tree still there.
    TreeRemains,
    /// The deadline of [`Machine::deadline`] is reached (see [`Machine::due`]).
    DeadlinePassed,
}

/// What the driver must do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Write one line (see [`Note`]).
    Say(Note),
    /// Start COMMAND in a new process group.
    StartCommand,
    /// Pass this signal (from this sender) on to COMMAND's group.
    Forward(Signal, i32),
    /// `--stop-all`: right after the [`Action::Forward`] of a stop
    /// request, the same signal to every other descendant at once (the
    /// sweep's tree walk), not only COMMAND's group.
    StopAll(Signal),
    /// The grace ran out: name every descendant still there (stderr, even
    /// without -v), and why this stop signal has not ended it.
    NameSurvivors(Signal),
    /// Job control: reap received CONT; continue COMMAND if it is stopped.
    ContinueCommand,
    /// Job control: reap was stopped from the terminal by this signal.
    StopWithTool(Signal),
    /// If COMMAND is stopped, send CONT to its group so it can act on the
    /// stop request just passed on.
    ContinueIfStopped,
    /// COMMAND is gone or about to be: the terminal goes back to the shell.
    ReleaseTerminal,
    /// KILL to the pinned process's group at once (the front's takeover).
    KillGroup,
    /// A new stage of the sweep: every live descendant gets this signal
    /// (nobody is marked yet).
    Sweep(Signal),
    /// The same stage, after a wake: walk the tree again, where it can be
    /// walked, and signal whoever was not signalled yet.
    Rewalk(Signal),
    /// The KILL stage, after a wake: KILL whichever new child appeared.
    KillNewcomers,
    /// Reap the pinned process (it has exited; its group is not needed).
    ReapLeader,
    /// Tell the front COMMAND's status.
    ReportStatus(Status),
    /// Start the cleanup in a new process group with this environment, or
    /// (true) in place of the back (`--exec-cleanup`).
    StartCleanup(Env, bool),
    /// The back ends with this status (the front is told).
    Exit(Status),
}

/// The lines the machine's decisions are logged with (`-v`, but for
/// [`Note::CleanupTimedOut`] and a failed [`Note::CleanupResult`], always
/// said).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Note {
    /// A line of its own.
    Line(&'static str),
    /// The front is gone: COMMAND's tree (or what) is killed at once,
    /// cutting its grace.
    Cut(&'static str),
    /// "received SIG from pid N", then this: the signal is not passed on.
    Dropped(Signal, i32, &'static str),
    /// The same for a stop request that acts without being passed on now.
    Trigger(Signal, i32, &'static str),
    StopRequested,
    /// `--stop-delay`: this stop request is passed on when the delay ends
    /// (or at the next stop request).
    StopDelayed(Signal, i32),
    CommandDone(Status, Cause),
    CleanupTimedOut,
    /// The cleanup's result; said even without -v if it failed and no
    /// other line says so (the timeout's, or the front's after taking over).
    CleanupResult(Status, bool),
    Exiting(Status),
}

/// How a sweep goes on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    /// `--keep-orphans`: wait for leftovers to exit on their own.
    Wait,
    /// Stop signal sent; KILL at the deadline (`None`: grace is `inf`).
    Stop(Option<Instant>),
    /// KILL to everything, until nothing is left.
    Kill,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Phase {
    /// COMMAND is not started yet.
    #[default]
    Start,
    /// COMMAND runs; after a stop request, its tree is killed at
    /// `deadline` (`None`: none asked for, or a grace of `inf`).
    Run(Option<Instant>),
    /// Leftovers are swept at this stage: COMMAND's (true), or the
    /// cleanup's.
    Sweep(Stage, bool),
    /// COMMAND's tree is gone; the cleanup is next.
    Settle,
    /// The cleanup runs; stopped at `deadline` (`--cleanup-timeout`).
    Cleanup(Option<Instant>),
    Done,
}

#[derive(Debug)]
pub struct Machine<'a> {
    c: &'a Config,
    /// A front answers once COMMAND's status is said ([`Event::Answered`]);
    /// the cause waits for it.
    front: bool,
    s: State,
}

/// What the machine knows so far.
#[derive(Debug, Default)]
struct State {
    phase: Phase,
    /// Signals read before COMMAND was started.
    held: Vec<(Signal, i32)>,
    /// A stop request was passed on (or is held by `--stop-delay`).
    cancel: bool,
    /// `--stop-delay`: the stop request held until the delay ends (the
    /// Run phase's deadline meanwhile).
    delayed: Option<(Signal, i32)>,
    /// The stop request COMMAND's tree got, for the survivors' reasons
    /// (`None`: `--signal`).
    stop_sig: Option<Signal>,
    /// The front died.
    lost: bool,
    /// The front's loss, as the back saw it: `Some(None)` with no stop
    /// request before it, else how long after it.
    lost_after: Option<Option<Duration>>,
    /// The front answered.
    answered: bool,
    /// COMMAND's status, once known.
    command: Option<Status>,
    /// The cleanup's status, once known.
    cleanup: Option<Status>,
    /// `--cleanup-timeout` ran out.
    timed_out: bool,
    /// The front's takeover: it says what happened on a line of its own,
    /// and exits 125, whatever the final status.
    takeover: bool,
    /// COMMAND's status as last told to the front (`Action::ReportStatus`).
    reported: Option<Status>,
    /// The length of a Run deadline that counts from the moment the
    /// actions of the last event were carried out (the stop signal sent),
    /// not started yet: [`Machine::sent`] starts it.
    unstarted: Option<Duration>,
    /// When the first stop request came (`stop_unstarted`: at the moment
    /// the actions of the last event were carried out, not read yet).
    stop_at: Option<Instant>,
    stop_unstarted: bool,
    /// When the last Run deadline started: the stop signal sent.
    signalled_at: Option<Instant>,
}

impl<'a> Machine<'a> {
    /// The back at its start: COMMAND not started yet (`front`: split in
    /// two, this is the back).
    pub fn new(c: &'a Config, front: bool) -> Machine<'a> {
        Machine {
            c,
            front,
            s: State::default(),
        }
    }

    /// Whether `sig`, received, is a stop request (passed on, and a stop
    /// signal): COMMAND then gets `--grace` to exit.
    fn is_stop_request(&self, sig: Signal) -> bool {
        self.c.route.caught().contains(sig) && SigSet::stop_requests().contains(sig)
    }

    /// The front's takeover when the back was lost: COMMAND's tree is
    /// killed at once (`running`: COMMAND, or the cleanup, is known and
    /// still runs, and its group gets KILL first), then the cleanup runs
    /// with `REAP_CAUSE=lost`, never in place. `known`: COMMAND's status as
    /// the back reported it. Returns the actions to start with.
    pub fn take_over(&mut self, known: Option<Status>, running: bool) -> Vec<Action> {
        self.taking_over(known);
        self.s.lost = true;
        let mut actions = vec![Action::ReleaseTerminal];
        if running {
            actions.push(Action::KillGroup);
        }
        self.sweep(Stage::Kill, true, &mut actions);
        actions
    }

    /// The front's takeover when the back was lost while the cleanup ran:
    /// the cleanup is what reap guarantees, so it is not interrupted. The
    /// front, its parent now, waits for it until `at` (what was left
    /// of `--cleanup-timeout`), then sweeps what it left as the back would
    /// have, and exits 125. `command` and `cause`: COMMAND's status and the
    /// REAP_CAUSE the cleanup was started with, as the back reported them.
    pub fn adopt_cleanup(
        &mut self,
        command: Option<Status>,
        cause: Option<Cause>,
        at: Option<Instant>,
    ) {
        self.taking_over(command);
        self.s.cancel = cause == Some(Cause::Cancel);
        self.s.lost = cause.map_or(true, |c| c == Cause::Lost);
        self.s.phase = Phase::Cleanup(at);
    }

    /// The front's machine, never in place; COMMAND as killed by KILL
    /// where the back had not said its status.
    fn taking_over(&mut self, command: Option<Status>) {
        self.s.takeover = true;
        self.s.command = Some(command.unwrap_or(Status::Signaled(Signal::KILL)));
    }

    pub fn phase(&self) -> Phase {
        self.s.phase
    }

    pub fn is_done(&self) -> bool {
        self.s.phase == Phase::Done
    }

    /// COMMAND's status, once known.
    #[cfg(test)]
    pub fn command_status(&self) -> Option<Status> {
        self.s.command
    }

    /// REAP_CAUSE as it stands (final once COMMAND's tree is gone).
    pub fn cause(&self) -> Cause {
        Cause::of(self.s.cancel, self.s.lost, self.command())
    }

    /// COMMAND's status (125 before it is known).
    fn command(&self) -> Status {
        (self.s.command).unwrap_or(Status::Exited(pgkit::error::TOOL_FAILED))
    }

    /// The cleanup was stopped at its timeout and not seen exiting yet
    /// (its exit is said once, as it is seen).
    pub fn timed_out_unseen(&self) -> bool {
        self.s.timed_out && self.s.cleanup.is_none()
    }

    /// The cleanup's result as it counts (124 after `--cleanup-timeout`),
    /// once known.
    pub fn cleanup_result(&self) -> Option<Status> {
        (self.s.timed_out.then_some(CLEANUP_TIMED_OUT)).or(self.s.cleanup)
    }

    /// reap is stopping: a stop request came (and was passed on, or is held
    /// by `--stop-delay`), or the cleanup runs (or its leftovers are swept).
    pub fn stopping(&self) -> bool {
        self.s.cancel || matches!(self.s.phase, Phase::Cleanup(_) | Phase::Sweep(_, false))
    }

    /// A front is still to answer (see [`Event::Answered`]).
    fn awaiting(&self) -> bool {
        self.front && !self.s.answered && !self.s.lost
    }

    /// The stop request that started the grace (`--signal` before one).
    pub fn stop_signal(&self) -> Signal {
        self.s.stop_sig.unwrap_or(self.c.signal)
    }

    /// The front's loss: `Some(None)` with no stop request before it,
    /// else how long after it.
    pub fn lost_after(&self) -> Option<Option<Duration>> {
        self.s.lost_after
    }

    /// When the first stop request came, if one did.
    pub fn stop_at(&self) -> Option<Instant> {
        self.s.stop_at
    }

    /// When the stop signal last went to COMMAND's group (after the stop
    /// delay, if one held it), if it did.
    pub fn signalled_at(&self) -> Option<Instant> {
        self.s.signalled_at
    }

    /// A stop request came: REAP_CAUSE is cancel, and the first one's time
    /// is the moment the actions are carried out (see [`Machine::sent`]).
    fn mark_stop(&mut self) {
        self.s.cancel = true;
        self.s.stop_unstarted |= self.s.stop_at.is_none();
    }

    /// COMMAND runs, its deadline `after` from the moment the actions are
    /// carried out (see [`Machine::sent`]; `None`: never).
    fn arm(&mut self, after: Option<Duration>) {
        self.s.phase = Phase::Run(None);
        self.s.unstarted = after;
    }

    /// The next instant at which something happens by itself: the end of
    /// a grace, or the cleanup's timeout.
    pub fn deadline(&self) -> Option<Instant> {
        match self.s.phase {
            Phase::Run(deadline) | Phase::Cleanup(deadline) => deadline,
            Phase::Sweep(Stage::Stop(deadline), _) => deadline,
            _ => None,
        }
    }

    /// The time event due at `now`, if any.
    pub fn due(&self, now: Instant) -> Option<Event> {
        (self.deadline()? <= now).then_some(Event::DeadlinePassed)
    }

    /// [`Machine::on`], into `out`: a signal while COMMAND runs (the way of
    /// every signal passed on) reads no clock (`now` is called for the other events): a grace or
    /// a stop delay it starts counts from the moment its actions are
    /// carried out, which [`Machine::sent`] then says. So between a wake-up
    /// and the kill there is no clock to read: where the vDSO cannot serve
    /// `clock_gettime`, each read is a system call.
    pub fn on_into(&mut self, event: Event, now: impl FnOnce() -> Instant, out: &mut Vec<Action>) {
        match (self.s.phase, event) {
            (Phase::Run(_), Event::Signal(sig, from)) => self.pass_on(sig, from, out),
            (_, event) => out.extend(self.on(event, now())),
        }
    }

    /// The actions of the last event are carried out: a deadline that
    /// counts from then starts at `now` (called only if there is one).
    pub fn sent(&mut self, now: impl FnOnce() -> Instant) {
        if self.s.unstarted.is_none() && !self.s.stop_unstarted {
            return;
        }
        let now = now();
        if std::mem::take(&mut self.s.stop_unstarted) {
            self.s.stop_at = Some(now);
        }
        if let Some(after) = self.s.unstarted.take() {
            if let Phase::Run(deadline) = &mut self.s.phase {
                *deadline = now.checked_add(after);
                self.s.signalled_at = Some(now);
            }
        }
    }

    /// Feed one event; returns what to do, in order. A deadline left
    /// unstarted by `on_into` starts no later than this, and one this
    /// event starts starts `now`.
    pub fn on(&mut self, event: Event, now: Instant) -> Vec<Action> {
        let mut out = Vec::new();
        self.sent(|| now);
        self.step(event, now, &mut out);
        self.sent(|| now);
        out
    }

    fn step(&mut self, event: Event, now: Instant, out: &mut Vec<Action>) {
        use Action::*;
        if event == Event::FrontLost && !self.s.lost {
            self.s.lost = true;
            self.s.lost_after = Some(self.s.stop_at.map(|at| now.saturating_duration_since(at)));
        }
        self.s.answered |= event == Event::Answered;
        let stop = |sig| self.is_stop_request(sig);
        match (self.s.phase, event) {
            (_, Event::Signal(sig, _)) if sig == Signal::CHLD => {}
            // The last of what counts for the cause: Settle waits for it.
            (Phase::Settle, Event::Answered) => self.step(Event::Drained, now, out),
            // COMMAND has ended, and the front had not answered: a stop
            // request it had by then may have come before the end (a
            // paused front hands it over late), and counts.
            (
                Phase::Settle | Phase::Sweep(Stage::Stop(_) | Stage::Kill, true),
                Event::Signal(sig, from),
            ) if self.awaiting() && !self.s.cancel && stop(sig) => {
                self.mark_stop();
                out.push(Say(Note::Trigger(sig, from, ", a stop request the front had when COMMAND ended: not passed on; REAP_CAUSE=cancel")));
            }
            (Phase::Start, Event::Signal(sig, from)) => self.s.held.push((sig, from)),
            // A front already gone (its group SIGKILLed right after the
            // start): starting COMMAND now would only be to kill it. For the
            // cleanup, as if killed at once (what a COMMAND started a moment
            // earlier would have become).
            (Phase::Start, Event::Drained) if self.s.lost => {
                let line = "the front process is gone before COMMAND started: not starting it";
                out.push(Say(Note::Line(line)));
                self.command_done(Status::Signaled(Signal::KILL), out);
            }
            (Phase::Start, Event::Drained) => out.push(StartCommand),
            (Phase::Start, Event::Started) => {
                self.s.phase = Phase::Run(None);
                for (sig, from) in std::mem::take(&mut self.s.held) {
                    self.pass_on(sig, from, out);
                }
            }
            (Phase::Start, Event::StartFailed(code)) => {
                self.command_done(Status::Exited(code), out)
            }
            (Phase::Run(_), Event::Signal(sig, from)) => self.pass_on(sig, from, out),
            (Phase::Run(_), Event::FrontLost) => {
                out.extend([Say(Note::Cut("COMMAND's tree")), ReleaseTerminal]);
                self.sweep(Stage::Kill, true, out);
            }
            (Phase::Run(deadline), Event::Exited(status)) => {
                self.s.command = Some(status);
                self.s.reported = Some(status);
                let stage = match deadline {
                    // Within the stop delay: no grace yet, the sweep's own.
                    _ if self.s.delayed.is_some() => Stage::Stop(after(self.c.grace, now)),
                    // The grace that the stop request started goes on.
                    deadline if self.s.cancel => Stage::Stop(deadline),
                    _ if self.c.keep_orphans => Stage::Wait,
                    _ => Stage::Stop(after(self.c.grace, now)),
                };
                // The front learns it now, not only once the sweep is
                // over: a back killed during the sweep leaves the front a
                // cleanup to run with COMMAND's real REAP_STATUS.
                out.extend([ReportStatus(status), ReleaseTerminal]);
                self.sweep(stage, true, out);
            }
            (Phase::Run(_), Event::DeadlinePassed) if self.s.delayed.is_some() => self.release(out),
            (Phase::Run(_), Event::DeadlinePassed) => {
                let line = Say(Note::Line("grace over: killing COMMAND's tree"));
                out.extend([NameSurvivors(self.stop_signal()), line, ReleaseTerminal]);
                self.sweep(Stage::Kill, true, out);
            }
            (Phase::Sweep(stage, true), Event::FrontLost) if stage != Stage::Kill => {
                out.push(Say(Note::Cut("every descendant")));
                self.sweep(Stage::Kill, true, out);
            }
            (Phase::Sweep(Stage::Wait, true), Event::Signal(sig, from)) if stop(sig) => {
                self.mark_stop();
                out.push(Say(Note::Trigger(sig, from, ": stopping the leftovers")));
                self.sweep(Stage::Stop(after(self.c.grace, now)), true, out);
            }
            (Phase::Sweep(..) | Phase::Settle, Event::Signal(sig, from)) => {
                out.push(Say(Note::Dropped(sig, from, ": not passed on")))
            }
            (Phase::Sweep(stage, for_command), Event::LeaderExited { status, pin }) => {
                if for_command {
                    self.s.command = Some(status);
                } else {
                    self.s.cleanup = Some(status);
                }
                // The leader stays pinned only while its group is how
                // leftovers are reached, and until the group got its KILL.
                if !pin || !matches!(stage, Stage::Stop(Some(_))) {
                    out.push(ReapLeader);
                }
            }
            (Phase::Sweep(_, for_command), Event::DeadlinePassed) => {
                let line = Say(Note::Line("grace over: killing every descendant left"));
                out.extend([NameSurvivors(self.c.signal), line]);
                self.sweep(Stage::Kill, for_command, out);
            }
            // The whole tree again on every wake of the stop stage, not
            // only our direct children: a process that ignores the stop
            // signal may have forked since the last walk, and its child is
            // not ours (it has a live parent).
            (Phase::Sweep(Stage::Stop(_), _), Event::TreeRemains) => {
                out.push(Rewalk(self.c.signal))
            }
            (Phase::Sweep(Stage::Kill, _), Event::TreeRemains) => out.push(KillNewcomers),
            (Phase::Sweep(_, true), Event::TreeEmpty) => self.command_done(self.command(), out),
            // The cleanup's sweep: it exited, or timed out.
            (Phase::Sweep(..), Event::TreeEmpty) => {
                let r = self.cleanup_result().unwrap_or(CLEANUP_TIMED_OUT);
                let said = self.s.timed_out || self.s.takeover || r == Status::Exited(0);
                out.push(Say(Note::CleanupResult(r, !said)));
                self.finish(Some(r), out);
            }
            (Phase::Settle, Event::Drained) if !self.awaiting() => {
                let (status, cause) = (self.command(), self.cause());
                out.push(Say(Note::CommandDone(status, cause)));
                if self.c.cleanup.is_none() {
                    self.finish(None, out);
                } else {
                    let in_place = self.c.exec_cleanup && !self.s.takeover;
                    out.push(StartCleanup(cleanup_env(status, cause), in_place));
                }
            }
            (Phase::Settle, Event::Started) => {
                self.s.phase = Phase::Cleanup(after(self.c.cleanup_timeout, now));
            }
            (Phase::Settle, Event::StartFailed(code)) => {
                self.s.cleanup = Some(Status::Exited(code));
                self.finish(Some(Status::Exited(code)), out);
            }
            (Phase::Cleanup(_), Event::FrontLost) => {
                let line = "the front process is gone; the cleanup goes on";
                out.push(Say(Note::Line(line)));
            }
            (Phase::Cleanup(_), Event::Signal(sig, from)) => {
                let how = " during the cleanup: not passed on";
                out.push(Say(Note::Dropped(sig, from, how)));
            }
            (Phase::Cleanup(_), Event::Exited(status)) => {
                self.s.cleanup = Some(status);
                let stage = if self.c.keep_orphans {
                    Stage::Wait
                } else {
                    Stage::Stop(after(self.c.grace, now))
                };
                self.sweep(stage, false, out);
            }
            (Phase::Cleanup(_), Event::DeadlinePassed) => {
                self.s.timed_out = true;
                out.push(Say(Note::CleanupTimedOut));
                self.sweep(Stage::Stop(after(self.c.grace, now)), false, out);
            }
            // Anything else changes nothing (Done: everything).
            _ => {}
        }
    }

    /// What a signal received while COMMAND runs asks for, onto `actions`:
    /// pass it on, or drop it.
    fn pass_on(&mut self, sig: Signal, from: i32, out: &mut Vec<Action>) {
        use Action::*;
        if sig == Signal::CONT {
            out.push(ContinueCommand);
        }
        let forwards = self.c.route.caught().contains(sig);
        match sig {
            _ if sig == Signal::CHLD || !forwards && sig == Signal::CONT => {}
            _ if !forwards && tty::is_job_stop(sig) => out.push(StopWithTool(sig)),
            _ if !forwards => out.push(Say(Note::Dropped(sig, from, ": dropped"))),
            _ if !self.is_stop_request(sig) => out.push(Forward(sig, from)),
            _ if self.s.delayed.is_some() => {
                // A second stop request ends the delay at once.
                let how = ": a second stop request ends the stop delay";
                out.push(Say(Note::Trigger(sig, from, how)));
                self.release(out);
            }
            _ => match Some(self.c.stop_delay).filter(|d| !d.is_zero() && !self.s.cancel) {
                Some(delay) => {
                    self.mark_stop();
                    self.s.delayed = Some((sig, from));
                    self.arm(Some(delay));
                    out.push(Say(Note::StopDelayed(sig, from)));
                }
                None => self.stop_request(sig, from, out),
            },
        }
    }

    /// A stop request passed on: to COMMAND's group (`--stop-all`: to
    /// every descendant); the first starts the grace.
    fn stop_request(&mut self, sig: Signal, from: i32, out: &mut Vec<Action>) {
        out.push(Action::Forward(sig, from));
        if self.c.stop_all {
            out.push(Action::StopAll(sig));
        }
        if !self.s.cancel {
            self.mark_stop();
            self.s.stop_sig = Some(sig);
            self.arm(self.c.grace.duration());
            out.push(Action::Say(Note::StopRequested));
        }
        // A stopped process acts on nothing but KILL until continued.
        out.push(Action::ContinueIfStopped);
    }

    /// The stop delay is over (or cut short): the held stop request is
    /// passed on, and the grace starts now.
    fn release(&mut self, out: &mut Vec<Action>) {
        let Some((sig, from)) = self.s.delayed.take() else {
            return;
        };
        self.s.phase = Phase::Run(None);
        self.s.cancel = false;
        self.stop_request(sig, from, out);
    }

    /// Enter a sweep at `stage`: its first action.
    fn sweep(&mut self, stage: Stage, for_command: bool, out: &mut Vec<Action>) {
        self.s.delayed = None;
        self.s.phase = Phase::Sweep(stage, for_command);
        out.push(match stage {
            Stage::Wait => {
                Action::Say(Note::Line("waiting for leftovers to exit (--keep-orphans)"))
            }
            Stage::Stop(_) => Action::Sweep(self.c.signal),
            Stage::Kill => Action::Sweep(Signal::KILL),
        });
    }

    /// COMMAND and its tree are gone (or COMMAND never started).
    fn command_done(&mut self, status: Status, out: &mut Vec<Action>) {
        self.s.phase = Phase::Settle;
        // Reported once: when COMMAND's exit was seen while it ran, that
        // report said it.
        if self.s.reported != Some(status) {
            out.push(Action::ReportStatus(status));
        }
        self.s.command = Some(status);
        // Signals read before COMMAND could be started (never SIGCHLD),
        // never passed on.
        for (sig, from) in std::mem::take(&mut self.s.held) {
            out.push(Action::Say(Note::Dropped(sig, from, ": not passed on")));
        }
    }

    /// The final status: COMMAND's, or the cleanup's if COMMAND succeeded
    /// and the cleanup failed.
    fn finish(&mut self, cleanup: Option<Status>, out: &mut Vec<Action>) {
        let last = final_status(self.command(), cleanup, &self.c.successes);
        self.s.phase = Phase::Done;
        if self.s.takeover {
            // The front that took over exits 125 (reap failed to keep its
            // subreaper process), whatever COMMAND and the cleanup did:
            // the event log says the status reap exits with.
            out.push(Action::Exit(Status::Exited(pgkit::error::TOOL_FAILED)));
        } else {
            out.extend([Action::Say(Note::Exiting(last)), Action::Exit(last)]);
        }
    }
}

/// `t` (`--grace`, `--cleanup-timeout`) from `now` on: when it ends
/// (`None`: `inf`, or too far to represent).
fn after(t: Timeout, now: Instant) -> Option<Instant> {
    t.duration().and_then(|d| now.checked_add(d))
}

#[cfg(test)]
mod tests {
    //! One test (or a few) per row of reap(1)'s "Order of events", the
    //! REAP_CAUSE rules, the guarantee and the killed back; each name says
    //! the clause it checks.
    use super::*;
    use Action::*;
    use Event::{
        Answered, DeadlinePassed, Drained, Exited, FrontLost, LeaderExited, StartFailed, Started,
        TreeEmpty, TreeRemains,
    };

    const TERM: Signal = Signal::TERM;
    const KILL: Signal = Signal::KILL;
    const FROM: i32 = 4242;

    fn alrm() -> Signal {
        Signal::from_raw(libc::SIGALRM).unwrap()
    }

    fn segv() -> Signal {
        Signal::from_raw(libc::SIGSEGV).unwrap()
    }

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn ok() -> Status {
        Status::Exited(0)
    }

    /// The configuration of `opts` (reap's options before COMMAND), kept
    /// for the test's whole run.
    fn config(opts: &str) -> &'static mut Config {
        let line = format!("{opts} cmd");
        match crate::config::parse(line.split_whitespace().map(Into::into)) {
            Ok(pgkit::cli::Parsed::Run(c)) => Box::leak(Box::new(c)),
            _ => panic!("{line}"),
        }
    }

    /// reap's defaults, with a cleanup.
    fn params() -> &'static Config {
        config("-c x")
    }

    /// A machine whose COMMAND was started at `t`.
    fn running(p: &'static Config, t: Instant) -> Machine<'static> {
        started(Machine::new(p, false), t)
    }

    /// `m`, its COMMAND started at `t`.
    fn started(mut m: Machine<'static>, t: Instant) -> Machine<'static> {
        assert_eq!(m.phase(), Phase::Start);
        assert_eq!(m.on(Drained, t), [StartCommand]);
        assert_eq!(m.on(Started, t), []);
        assert_eq!(m.phase(), Phase::Run(None));
        m
    }

    /// A machine whose COMMAND ended with `status` and whose tree is gone:
    /// the actions of the step that computes the cause.
    fn settled(p: &'static Config, status: Status, t: Instant) -> (Machine<'static>, Vec<Action>) {
        let mut m = running(p, t);
        m.on(Exited(status), t);
        m.on(TreeEmpty, t);
        assert_eq!(m.phase(), Phase::Settle);
        let actions = m.on(Drained, t);
        (m, actions)
    }

    /// The environment the cleanup is started (or exec'd) with, as K=V.
    fn env(actions: &[Action]) -> Vec<String> {
        actions
            .iter()
            .find_map(|a| match a {
                StartCleanup(env, _) => Some(env.iter().map(|(k, v)| format!("{k}={v}")).collect()),
                _ => None,
            })
            .expect("the cleanup is started")
    }

    fn exit_of(actions: &[Action]) -> Option<Status> {
        actions.iter().find_map(|a| match a {
            Exit(s) => Some(*s),
            _ => None,
        })
    }

    /// Run a started cleanup to its end: it exits with `status`, no
    /// leftover; the final actions.
    fn cleanup_exits(m: &mut Machine, status: Status, t: Instant) -> Vec<Action> {
        assert_eq!(m.on(Started, t), []);
        m.on(Exited(status), t);
        assert_eq!(m.on(LeaderExited { status, pin: false }, t), [ReapLeader]);
        let actions = m.on(TreeEmpty, t);
        assert!(m.is_done());
        actions
    }

    #[test]
    fn stop_requests_are_forwarded_stop_signals() {
        let p = Machine::new(config(""), false);
        for s in [Signal::TERM, Signal::INT, Signal::HUP, Signal::QUIT] {
            assert!(p.is_stop_request(s));
        }
        assert!(!p.is_stop_request(Signal::USR1) && p.c.route.caught().contains(Signal::USR1));
        let p = Machine::new(config("-f USR1"), false);
        assert!(!p.is_stop_request(Signal::TERM));
    }

    // 1. COMMAND runs; signals are passed on; a stop request starts the
    //    grace; COMMAND's tree is killed when it runs out.

    #[test]
    fn row1_signals_are_passed_on_to_commands_group() {
        let t = Instant::now();
        let mut m = running(params(), t);
        assert_eq!(
            m.on(Event::Signal(Signal::USR1, FROM), t),
            [Forward(Signal::USR1, FROM)]
        );
        assert_eq!(
            m.on(Event::Signal(Signal::WINCH, FROM), t),
            [Forward(Signal::WINCH, FROM)]
        );
        assert_eq!(m.on(Event::Signal(Signal::CHLD, FROM), t), []);
        assert_eq!(m.deadline(), None, "no stop request: no grace");
        assert_eq!(m.phase(), Phase::Run(None));
    }

    #[test]
    fn row1_signals_not_in_the_forward_set_are_dropped() {
        let t = Instant::now();
        let mut m = running(params(), t);
        assert_eq!(
            m.on(Event::Signal(alrm(), FROM), t),
            [Say(Note::Dropped(alrm(), FROM, ": dropped"))]
        );
        // Job control is the terminal's: CONT continues COMMAND, a stop
        // from the terminal stops COMMAND with reap.
        assert_eq!(
            m.on(Event::Signal(Signal::CONT, FROM), t),
            [ContinueCommand]
        );
        assert_eq!(
            m.on(Event::Signal(Signal::TSTP, FROM), t),
            [StopWithTool(Signal::TSTP)]
        );
    }

    #[test]
    fn row1_a_signal_before_command_started_is_passed_on_once_it_exists() {
        let t = Instant::now();
        let mut m = Machine::new(params(), false);
        assert_eq!(m.on(Event::Signal(Signal::USR2, FROM), t), []);
        assert_eq!(m.on(Event::Signal(TERM, FROM), t), []);
        assert_eq!(m.on(Drained, t), [StartCommand]);
        assert_eq!(
            m.on(Started, t),
            [
                Forward(Signal::USR2, FROM),
                Forward(TERM, FROM),
                Say(Note::StopRequested),
                ContinueIfStopped
            ]
        );
        assert_eq!(m.deadline(), Some(t + ms(5_000)));
    }

    #[test]
    fn row1_a_stop_request_is_passed_on_and_starts_the_grace() {
        let t = Instant::now();
        let mut m = running(params(), t);
        for sig in [TERM, Signal::INT, Signal::HUP, Signal::QUIT] {
            let mut m = running(params(), t);
            assert_eq!(
                m.on(Event::Signal(sig, FROM), t + ms(10)),
                [
                    Forward(sig, FROM),
                    Say(Note::StopRequested),
                    ContinueIfStopped
                ],
                "{sig}"
            );
            assert_eq!(m.deadline(), Some(t + ms(5_010)));
        }
        m.on(Event::Signal(TERM, FROM), t);
        // Repeated: passed on again, the grace neither restarted nor cut.
        assert_eq!(
            m.on(Event::Signal(Signal::INT, FROM), t + ms(4_000)),
            [Forward(Signal::INT, FROM), ContinueIfStopped]
        );
        assert_eq!(m.deadline(), Some(t + ms(5_000)));
        assert_eq!(m.due(t + ms(4_999)), None);
    }

    #[test]
    fn row1_a_stop_request_not_forwarded_is_dropped_and_starts_nothing() {
        let t = Instant::now();
        let p = config("-c x -f USR1");
        let mut m = running(p, t);
        assert_eq!(
            m.on(Event::Signal(TERM, FROM), t),
            [Say(Note::Dropped(TERM, FROM, ": dropped"))]
        );
        assert_eq!(m.deadline(), None);
        m.on(Exited(ok()), t);
        m.on(TreeEmpty, t);
        assert_eq!(env(&m.on(Drained, t))[2], "REAP_CAUSE=exit");
    }

    #[test]
    fn row1_when_the_grace_runs_out_commands_tree_is_killed() {
        let t = Instant::now();
        let mut m = running(params(), t);
        m.on(Event::Signal(TERM, FROM), t);
        let end = t + ms(5_000);
        assert_eq!(m.due(end), Some(DeadlinePassed));
        assert_eq!(
            m.on(DeadlinePassed, end),
            [
                NameSurvivors(TERM),
                Say(Note::Line("grace over: killing COMMAND's tree")),
                ReleaseTerminal,
                Sweep(KILL)
            ]
        );
        assert_eq!(m.phase(), Phase::Sweep(Stage::Kill, true));
        assert_eq!(m.deadline(), None);
        // COMMAND dies of the KILL; then the tree is gone.
        let killed = Status::Signaled(KILL);
        assert_eq!(
            m.on(
                LeaderExited {
                    status: killed,
                    pin: true
                },
                end
            ),
            [ReapLeader]
        );
        assert_eq!(m.on(TreeEmpty, end), [ReportStatus(killed)]);
        let actions = m.on(Drained, end);
        assert_eq!(actions[0], Say(Note::CommandDone(killed, Cause::Cancel)));
        assert_eq!(
            env(&actions),
            ["REAP_STATUS=137", "REAP_SIGNAL=KILL", "REAP_CAUSE=cancel"]
        );
    }

    #[test]
    fn row1_a_grace_of_inf_never_kills_commands_tree() {
        let t = Instant::now();
        let p = config("-c x -g inf");
        let mut m = running(p, t);
        m.on(Event::Signal(TERM, FROM), t);
        assert_eq!(m.deadline(), None);
        assert_eq!(m.due(t + Duration::from_secs(1 << 40)), None);
        // And the sweep that follows waits as long.
        m.on(Exited(Status::Signaled(TERM)), t);
        assert_eq!(m.deadline(), None);
    }

    #[test]
    fn row1_a_grace_of_0_kills_at_the_next_look() {
        let t = Instant::now();
        let p = config("-c x -g 0");
        let mut m = running(p, t);
        m.on(Event::Signal(TERM, FROM), t);
        assert_eq!(m.due(t), Some(DeadlinePassed));
    }

    // 2. COMMAND exits (or cannot be started: 126/127).
    // 3. Every remaining descendant gets the stop signal, then KILL after
    //    the grace, until reap has no child left.

    #[test]
    fn row2_command_exits_and_every_descendant_gets_the_stop_signal() {
        let t = Instant::now();
        let mut m = running(params(), t);
        let t1 = t + ms(100);
        assert_eq!(
            m.on(Exited(Status::Exited(3)), t1),
            [
                ReportStatus(Status::Exited(3)),
                ReleaseTerminal,
                Sweep(TERM)
            ]
        );
        assert_eq!(
            m.phase(),
            Phase::Sweep(Stage::Stop(Some(t1 + ms(5_000))), true)
        );
        assert_eq!(m.command_status(), Some(Status::Exited(3)));
    }

    #[test]
    fn row3_the_stop_signal_is_the_signal_option() {
        let t = Instant::now();
        let p = config("-c x -s USR1");
        let mut m = running(p, t);
        assert_eq!(
            m.on(Exited(ok()), t),
            [ReportStatus(ok()), ReleaseTerminal, Sweep(Signal::USR1)]
        );
        assert_eq!(m.on(TreeRemains, t), [Rewalk(Signal::USR1)]);
    }

    #[test]
    fn row3_the_whole_tree_is_walked_again_on_every_wake_of_the_stop_stage() {
        let t = Instant::now();
        let mut m = running(params(), t);
        m.on(Exited(ok()), t);
        for n in 1..4 {
            assert_eq!(m.on(TreeRemains, t + ms(n)), [Rewalk(TERM)]);
        }
    }

    #[test]
    fn row3_kill_after_the_grace_until_reap_has_no_child_left() {
        let t = Instant::now();
        let mut m = running(params(), t);
        m.on(Exited(ok()), t);
        assert_eq!(
            m.on(
                LeaderExited {
                    status: ok(),
                    pin: false
                },
                t
            ),
            [ReapLeader]
        );
        let end = t + ms(5_000);
        assert_eq!(m.due(end - ms(1)), None);
        assert_eq!(m.due(end), Some(DeadlinePassed));
        assert_eq!(
            m.on(DeadlinePassed, end),
            [
                NameSurvivors(TERM),
                Say(Note::Line("grace over: killing every descendant left")),
                Sweep(KILL)
            ]
        );
        assert_eq!(m.deadline(), None, "KILL is the last word");
        // A child forked (or re-parented to reap) since: KILLed too.
        assert_eq!(m.on(TreeRemains, end + ms(1)), [KillNewcomers]);
        assert_eq!(m.on(TreeRemains, end + ms(2)), [KillNewcomers]);
        assert_eq!(m.phase(), Phase::Sweep(Stage::Kill, true));
        assert_eq!(m.on(TreeEmpty, end + ms(3)), []);
        assert_eq!(m.phase(), Phase::Settle);
    }

    #[test]
    fn row3_the_tree_gone_within_the_grace_ends_the_sweep_without_kill() {
        let t = Instant::now();
        let mut m = running(params(), t);
        m.on(Exited(ok()), t);
        assert_eq!(m.on(TreeEmpty, t + ms(5)), []);
        assert_eq!(m.deadline(), None);
        assert_eq!(m.due(t + ms(5_000)), None);
    }

    #[test]
    fn row3_after_a_stop_request_the_tree_has_the_grace_that_started_then() {
        let t = Instant::now();
        let mut m = running(params(), t);
        m.on(Event::Signal(TERM, FROM), t);
        assert_eq!(
            m.on(Exited(Status::Signaled(TERM)), t + ms(3_000)),
            [
                ReportStatus(Status::Signaled(TERM)),
                ReleaseTerminal,
                Sweep(TERM)
            ]
        );
        assert_eq!(m.deadline(), Some(t + ms(5_000)), "not a new grace");
    }

    #[test]
    fn row3_without_proc_the_leader_stays_pinned_until_its_group_got_kill() {
        let t = Instant::now();
        let mut m = running(params(), t);
        m.on(Exited(ok()), t);
        assert_eq!(
            m.on(
                LeaderExited {
                    status: ok(),
                    pin: true
                },
                t
            ),
            []
        );
        m.on(DeadlinePassed, t + ms(5_000));
        assert_eq!(
            m.on(
                LeaderExited {
                    status: ok(),
                    pin: true
                },
                t + ms(5_000)
            ),
            [ReapLeader]
        );
        // With a grace of inf there is no KILL to wait for.
        let p = config("-c x -g inf");
        let mut m = running(p, t);
        m.on(Exited(ok()), t);
        assert_eq!(
            m.on(
                LeaderExited {
                    status: ok(),
                    pin: true
                },
                t
            ),
            [ReapLeader]
        );
    }

    #[test]
    fn row3_signals_during_the_sweep_are_not_passed_on() {
        let t = Instant::now();
        let mut m = running(params(), t);
        m.on(Exited(ok()), t);
        let before = m.phase();
        assert_eq!(
            m.on(Event::Signal(TERM, FROM), t),
            [Say(Note::Dropped(TERM, FROM, ": not passed on"))]
        );
        assert_eq!(m.on(Event::Signal(Signal::CHLD, FROM), t), []);
        assert_eq!(m.phase(), before);
    }

    #[test]
    fn row3_keep_orphans_waits_for_leftovers_without_a_signal() {
        let t = Instant::now();
        let p = config("-c x --keep-orphans");
        let mut m = running(p, t);
        assert_eq!(
            m.on(Exited(ok()), t),
            [
                ReportStatus(ok()),
                ReleaseTerminal,
                Say(Note::Line("waiting for leftovers to exit (--keep-orphans)"))
            ]
        );
        assert_eq!(m.deadline(), None);
        assert_eq!(m.on(TreeRemains, t + ms(1)), []);
        assert_eq!(
            m.on(Event::Signal(Signal::USR1, FROM), t),
            [Say(Note::Dropped(Signal::USR1, FROM, ": not passed on"))]
        );
        assert_eq!(m.on(TreeEmpty, t + ms(60_000)), []);
    }

    #[test]
    fn row3_keep_orphans_a_stop_request_ends_the_wait() {
        let t = Instant::now();
        let p = config("-c x --keep-orphans");
        let mut m = running(p, t);
        m.on(Exited(ok()), t);
        let t1 = t + ms(700);
        assert_eq!(
            m.on(Event::Signal(Signal::INT, FROM), t1),
            [
                Say(Note::Trigger(Signal::INT, FROM, ": stopping the leftovers")),
                Sweep(TERM)
            ]
        );
        assert_eq!(m.deadline(), Some(t1 + ms(5_000)));
        assert_eq!(
            m.on(DeadlinePassed, t1 + ms(5_000)),
            [
                NameSurvivors(TERM),
                Say(Note::Line("grace over: killing every descendant left")),
                Sweep(KILL)
            ]
        );
        m.on(TreeEmpty, t1 + ms(5_001));
        let actions = m.on(Drained, t1 + ms(5_001));
        assert!(env(&actions).contains(&"REAP_CAUSE=cancel".to_string()));
    }

    #[test]
    fn row2_command_not_started_126_127_no_sweep_cause_exit() {
        for code in [126, 127] {
            let t = Instant::now();
            let mut m = Machine::new(params(), false);
            m.on(Event::Signal(Signal::USR1, FROM), t);
            m.on(Drained, t);
            assert_eq!(
                m.on(StartFailed(code), t),
                [
                    ReportStatus(Status::Exited(code)),
                    Say(Note::Dropped(Signal::USR1, FROM, ": not passed on"))
                ]
            );
            assert_eq!(m.phase(), Phase::Settle);
            let actions = m.on(Drained, t);
            assert_eq!(
                env(&actions),
                [
                    format!("REAP_STATUS={code}"),
                    "REAP_SIGNAL=".to_string(),
                    "REAP_CAUSE=exit".to_string()
                ]
            );
            let end = cleanup_exits(&mut m, ok(), t);
            assert_eq!(exit_of(&end), Some(Status::Exited(code)));
        }
    }

    // 4. The cleanup runs in a new process group with REAP_STATUS,
    //    REAP_SIGNAL and REAP_CAUSE; stop signals now are logged, not passed
    //    on; only --cleanup-timeout interrupts it.

    #[test]
    fn row4_cause_cancel_however_command_then_ended() {
        for status in [ok(), Status::Exited(3), Status::Signaled(Signal::INT)] {
            let t = Instant::now();
            let mut m = running(params(), t);
            m.on(Event::Signal(Signal::INT, FROM), t);
            // The front's death after the stop request: still a cancel.
            m.on(Exited(status), t);
            m.on(FrontLost, t);
            m.on(TreeEmpty, t);
            let actions = m.on(Drained, t);
            assert_eq!(actions[0], Say(Note::CommandDone(status, Cause::Cancel)));
            assert_eq!(env(&actions)[2], "REAP_CAUSE=cancel");
        }
    }

    #[test]
    fn row4_cause_lost_when_the_front_died() {
        let t = Instant::now();
        let mut m = running(params(), t);
        m.on(Exited(Status::Exited(3)), t);
        m.on(FrontLost, t);
        m.on(TreeEmpty, t);
        let actions = m.on(Drained, t);
        assert_eq!(
            env(&actions),
            ["REAP_STATUS=3", "REAP_SIGNAL=", "REAP_CAUSE=lost"]
        );
    }

    #[test]
    fn row4_cause_lost_when_the_front_died_after_the_tree_was_gone() {
        let t = Instant::now();
        let mut m = running(params(), t);
        m.on(Exited(ok()), t);
        m.on(TreeEmpty, t);
        // Read before the cleanup starts: it still counts.
        assert_eq!(m.on(FrontLost, t), []);
        assert_eq!(
            m.on(Event::Signal(TERM, FROM), t),
            [Say(Note::Dropped(TERM, FROM, ": not passed on"))]
        );
        let actions = m.on(Drained, t);
        assert_eq!(env(&actions)[2], "REAP_CAUSE=lost");
    }

    #[test]
    fn row4_cause_signal_when_command_was_killed_by_a_signal() {
        let t = Instant::now();
        let (_, actions) = settled(params(), Status::Signaled(segv()), t);
        assert_eq!(
            env(&actions),
            ["REAP_STATUS=139", "REAP_SIGNAL=SEGV", "REAP_CAUSE=signal"]
        );
    }

    #[test]
    fn row4_cause_exit_when_command_exited_126_and_127_included() {
        for code in [0, 1, 126, 127] {
            let t = Instant::now();
            let (_, actions) = settled(params(), Status::Exited(code), t);
            assert_eq!(
                env(&actions),
                [
                    format!("REAP_STATUS={code}"),
                    "REAP_SIGNAL=".to_string(),
                    "REAP_CAUSE=exit".to_string()
                ]
            );
            assert!(matches!(actions.last(), Some(StartCleanup(_, false))));
        }
    }

    #[test]
    fn row4_stop_signals_during_the_cleanup_are_logged_not_passed_on() {
        let t = Instant::now();
        let (mut m, _) = settled(params(), ok(), t);
        m.on(Started, t);
        assert_eq!(m.phase(), Phase::Cleanup(None));
        for sig in [TERM, Signal::INT, Signal::HUP, Signal::QUIT, Signal::USR1] {
            assert_eq!(
                m.on(Event::Signal(sig, FROM), t),
                [Say(Note::Dropped(
                    sig,
                    FROM,
                    " during the cleanup: not passed on"
                ))]
            );
        }
        assert_eq!(m.on(Event::Signal(Signal::CHLD, FROM), t), []);
        assert_eq!(m.phase(), Phase::Cleanup(None));
        assert_eq!(m.due(t + Duration::from_secs(1 << 30)), None);
    }

    #[test]
    fn row4_the_cleanups_leftovers_are_swept_and_nothing_interrupts_that() {
        let t = Instant::now();
        let (mut m, _) = settled(params(), ok(), t);
        m.on(Started, t);
        assert_eq!(m.on(Exited(ok()), t), [Sweep(TERM)]);
        let stage = Stage::Stop(Some(t + ms(5_000)));
        assert_eq!(m.phase(), Phase::Sweep(stage, false));
        assert_eq!(
            m.on(FrontLost, t),
            [],
            "no KILL at once for the cleanup's tree"
        );
        assert_eq!(
            m.on(Event::Signal(TERM, FROM), t),
            [Say(Note::Dropped(TERM, FROM, ": not passed on"))]
        );
        assert_eq!(m.phase(), Phase::Sweep(stage, false));
        assert_eq!(
            m.on(DeadlinePassed, t + ms(5_000)),
            [
                NameSurvivors(TERM),
                Say(Note::Line("grace over: killing every descendant left")),
                Sweep(KILL)
            ]
        );
        // With --keep-orphans they are waited for, and a stop request does
        // not end that wait.
        let p = config("-c x --keep-orphans");
        let (mut m, _) = settled(p, ok(), t);
        m.on(Started, t);
        assert_eq!(
            m.on(Exited(ok()), t),
            [Say(Note::Line(
                "waiting for leftovers to exit (--keep-orphans)"
            ))]
        );
        assert_eq!(
            m.on(Event::Signal(TERM, FROM), t),
            [Say(Note::Dropped(TERM, FROM, ": not passed on"))]
        );
        assert_eq!(m.phase(), Phase::Sweep(Stage::Wait, false));
    }

    #[test]
    fn row4_cleanup_timeout_stops_it_with_grace_then_kill_and_counts_124() {
        let t = Instant::now();
        let p = config("-c x --cleanup-timeout 2s -g 1s");
        let (mut m, _) = settled(p, ok(), t);
        let t1 = t + ms(10);
        m.on(Started, t1);
        assert_eq!(m.deadline(), Some(t1 + ms(2_000)));
        assert_eq!(m.due(t1 + ms(1_999)), None);
        let t2 = t1 + ms(2_000);
        assert_eq!(m.due(t2), Some(DeadlinePassed));
        assert_eq!(
            m.on(DeadlinePassed, t2),
            [Say(Note::CleanupTimedOut), Sweep(TERM)]
        );
        assert_eq!(m.deadline(), Some(t2 + ms(1_000)));
        assert_eq!(
            m.on(DeadlinePassed, t2 + ms(1_000)),
            [
                NameSurvivors(TERM),
                Say(Note::Line("grace over: killing every descendant left")),
                Sweep(KILL)
            ]
        );
        let killed = Status::Signaled(KILL);
        assert_eq!(
            m.on(
                LeaderExited {
                    status: killed,
                    pin: false
                },
                t2
            ),
            [ReapLeader]
        );
        assert_eq!(
            m.on(TreeEmpty, t2 + ms(1_001)),
            [
                Say(Note::CleanupResult(Status::Exited(124), false)),
                Say(Note::Exiting(Status::Exited(124))),
                Exit(Status::Exited(124))
            ]
        );
        assert_eq!(m.cleanup_result(), Some(Status::Exited(124)));
    }

    #[test]
    fn row4_cleanup_timeout_applies_with_keep_orphans_too() {
        let t = Instant::now();
        let p = config("-c x --cleanup-timeout 100ms --keep-orphans");
        let (mut m, _) = settled(p, ok(), t);
        m.on(Started, t);
        assert_eq!(
            m.on(DeadlinePassed, t + ms(100)),
            [Say(Note::CleanupTimedOut), Sweep(TERM)]
        );
    }

    // 5. reap exits with COMMAND's status; if COMMAND succeeded and the
    //    cleanup failed, with the cleanup's status.

    #[test]
    fn row5_reap_exits_with_commands_status() {
        let t = Instant::now();
        let (mut m, _) = settled(params(), Status::Exited(3), t);
        let end = cleanup_exits(&mut m, ok(), t);
        assert_eq!(
            end,
            [
                Say(Note::CleanupResult(ok(), false)),
                Say(Note::Exiting(Status::Exited(3))),
                Exit(Status::Exited(3))
            ]
        );
        let (mut m, _) = settled(params(), Status::Exited(3), t);
        let end = cleanup_exits(&mut m, Status::Exited(5), t);
        assert_eq!(
            exit_of(&end),
            Some(Status::Exited(3)),
            "COMMAND failed first"
        );
    }

    #[test]
    fn row5_a_cleanup_failure_after_command_success_is_reaps_status() {
        let t = Instant::now();
        let (mut m, _) = settled(params(), ok(), t);
        let end = cleanup_exits(&mut m, Status::Exited(5), t);
        assert_eq!(exit_of(&end), Some(Status::Exited(5)));
        let (mut m, _) = settled(params(), ok(), t);
        let end = cleanup_exits(&mut m, Status::Signaled(TERM), t);
        assert_eq!(exit_of(&end), Some(Status::Signaled(TERM)));
        // A cleanup that cannot be started counts as failed.
        let (mut m, _) = settled(params(), ok(), t);
        assert_eq!(
            exit_of(&m.on(StartFailed(127), t)),
            Some(Status::Exited(127))
        );
        assert!(m.is_done());
    }

    #[test]
    fn row5_a_command_killed_by_a_signal_keeps_its_status() {
        let t = Instant::now();
        let (mut m, _) = settled(params(), Status::Signaled(TERM), t);
        let end = cleanup_exits(&mut m, Status::Exited(5), t);
        assert_eq!(exit_of(&end), Some(Status::Signaled(TERM)));
    }

    #[test]
    fn row5_without_a_cleanup_reap_exits_with_commands_status() {
        let t = Instant::now();
        let p = config("");
        let (m, actions) = settled(p, Status::Exited(7), t);
        assert_eq!(
            actions,
            [
                Say(Note::CommandDone(Status::Exited(7), Cause::Exit)),
                Say(Note::Exiting(Status::Exited(7))),
                Exit(Status::Exited(7))
            ]
        );
        assert!(m.is_done());
    }

    #[test]
    fn row5_exec_cleanup_replaces_the_back_and_its_status_is_final() {
        let t = Instant::now();
        let p = config("-c x --exec-cleanup");
        let (mut m, actions) = settled(p, Status::Exited(3), t);
        assert!(matches!(actions.last(), Some(StartCleanup(_, true))));
        assert_eq!(
            env(&actions),
            ["REAP_STATUS=3", "REAP_SIGNAL=", "REAP_CAUSE=exit"]
        );
        // Signals read right before the exec are not left pending for it.
        assert_eq!(
            m.on(Event::Signal(Signal::PIPE, FROM), t),
            [Say(Note::Dropped(Signal::PIPE, FROM, ": not passed on"))]
        );
        // The exec failed: that is the cleanup's status.
        assert_eq!(exit_of(&m.on(StartFailed(126), t)), Some(Status::Exited(3)));
    }

    // The guarantee: the front lost kills COMMAND's tree at once, and the
    // cleanup still runs.

    #[test]
    fn guarantee_front_lost_while_command_runs_kills_its_tree_at_once_cause_lost() {
        let t = Instant::now();
        let mut m = running(params(), t);
        assert_eq!(
            m.on(FrontLost, t),
            [
                Say(Note::Cut("COMMAND's tree")),
                ReleaseTerminal,
                Sweep(KILL)
            ]
        );
        assert_eq!(m.phase(), Phase::Sweep(Stage::Kill, true));
        let killed = Status::Signaled(KILL);
        assert_eq!(
            m.on(
                LeaderExited {
                    status: killed,
                    pin: false
                },
                t
            ),
            [ReapLeader]
        );
        m.on(TreeEmpty, t);
        let actions = m.on(Drained, t);
        assert_eq!(
            env(&actions),
            ["REAP_STATUS=137", "REAP_SIGNAL=KILL", "REAP_CAUSE=lost"]
        );
    }

    #[test]
    fn guarantee_front_lost_during_the_grace_kills_at_once() {
        let t = Instant::now();
        let mut m = running(params(), t);
        m.on(Event::Signal(TERM, FROM), t);
        assert_eq!(
            m.on(FrontLost, t + ms(1)),
            [
                Say(Note::Cut("COMMAND's tree")),
                ReleaseTerminal,
                Sweep(KILL)
            ]
        );
        assert_eq!(m.deadline(), None);
    }

    #[test]
    fn guarantee_front_lost_during_the_sweep_kills_every_descendant_at_once() {
        for keep_orphans in [false, true] {
            let t = Instant::now();
            let p = config(if keep_orphans {
                "-c x --keep-orphans"
            } else {
                "-c x"
            });
            let mut m = running(p, t);
            m.on(Exited(ok()), t);
            assert_eq!(
                m.on(FrontLost, t),
                [Say(Note::Cut("every descendant")), Sweep(KILL)]
            );
            assert_eq!(m.phase(), Phase::Sweep(Stage::Kill, true));
            m.on(TreeEmpty, t);
            assert_eq!(env(&m.on(Drained, t))[2], "REAP_CAUSE=lost");
        }
    }

    #[test]
    fn guarantee_front_lost_during_the_cleanup_the_cleanup_goes_on() {
        let t = Instant::now();
        let (mut m, _) = settled(params(), ok(), t);
        m.on(Started, t);
        assert_eq!(
            m.on(FrontLost, t),
            [Say(Note::Line(
                "the front process is gone; the cleanup goes on"
            ))]
        );
        assert_eq!(m.phase(), Phase::Cleanup(None));
        let end = cleanup_exits_started(&mut m, ok(), t);
        assert_eq!(exit_of(&end), Some(ok()));
    }

    /// As [`cleanup_exits`], for a cleanup already started.
    fn cleanup_exits_started(m: &mut Machine, status: Status, t: Instant) -> Vec<Action> {
        m.on(Exited(status), t);
        m.on(LeaderExited { status, pin: false }, t);
        m.on(TreeEmpty, t)
    }

    #[test]
    fn guarantee_front_lost_before_command_started_it_never_starts_cause_lost_137_kill() {
        let t = Instant::now();
        let mut m = Machine::new(params(), false);
        assert_eq!(m.on(Event::Signal(TERM, FROM), t), []);
        assert_eq!(m.on(FrontLost, t), []);
        let killed = Status::Signaled(KILL);
        assert_eq!(
            m.on(Drained, t),
            [
                Say(Note::Line(
                    "the front process is gone before COMMAND started: not starting it"
                )),
                ReportStatus(killed),
                Say(Note::Dropped(TERM, FROM, ": not passed on"))
            ]
        );
        assert_eq!(m.phase(), Phase::Settle);
        let actions = m.on(Drained, t);
        assert!(!actions.contains(&StartCommand));
        assert_eq!(actions[0], Say(Note::CommandDone(killed, Cause::Lost)));
        assert_eq!(
            env(&actions),
            ["REAP_STATUS=137", "REAP_SIGNAL=KILL", "REAP_CAUSE=lost"]
        );
        let end = cleanup_exits(&mut m, ok(), t);
        assert_eq!(exit_of(&end), Some(killed));
    }

    // The killed back: the front takes over.

    #[test]
    fn killed_back_the_front_kills_commands_tree_at_once_and_runs_the_cleanup_not_in_place() {
        let t = Instant::now();
        let p = config("-c x --exec-cleanup");
        let mut m = Machine::new(p, false);
        let start = m.take_over(None, true);
        assert_eq!(start, [ReleaseTerminal, KillGroup, Sweep(KILL)]);
        assert_eq!(m.phase(), Phase::Sweep(Stage::Kill, true));
        let killed = Status::Signaled(KILL);
        assert_eq!(
            m.on(
                LeaderExited {
                    status: killed,
                    pin: true
                },
                t
            ),
            [ReapLeader]
        );
        assert_eq!(
            m.on(Event::Signal(TERM, FROM), t),
            [Say(Note::Dropped(TERM, FROM, ": not passed on"))]
        );
        assert_eq!(m.on(TreeEmpty, t), [ReportStatus(killed)]);
        let actions = m.on(Drained, t);
        assert!(
            matches!(actions.last(), Some(StartCleanup(_, false))),
            "never exec'd"
        );
        assert_eq!(
            env(&actions),
            ["REAP_STATUS=137", "REAP_SIGNAL=KILL", "REAP_CAUSE=lost"]
        );
        // The front says what happened on a line of its own, and exits 125.
        let end = cleanup_exits(&mut m, Status::Exited(4), t);
        assert_eq!(
            end,
            [
                Say(Note::CleanupResult(Status::Exited(4), false)),
                Exit(Status::Exited(125))
            ]
        );
        assert_eq!(m.cleanup_result(), Some(Status::Exited(4)));
    }

    #[test]
    fn killed_back_the_status_it_reported_is_the_cleanups_reap_status() {
        let t = Instant::now();
        let mut m = Machine::new(params(), false);
        let start = m.take_over(Some(Status::Exited(3)), false);
        assert_eq!(
            start,
            [ReleaseTerminal, Sweep(KILL)],
            "nothing to KILL first"
        );
        m.on(TreeEmpty, t);
        assert_eq!(
            env(&m.on(Drained, t)),
            ["REAP_STATUS=3", "REAP_SIGNAL=", "REAP_CAUSE=lost"]
        );
    }

    #[test]
    fn done_ignores_everything() {
        let t = Instant::now();
        let p = config("");
        let (mut m, _) = settled(p, ok(), t);
        assert!(m.is_done());
        for e in [
            FrontLost,
            Event::Signal(TERM, FROM),
            DeadlinePassed,
            TreeEmpty,
            Drained,
        ] {
            assert_eq!(m.on(e, t), []);
        }
        assert_eq!(m.deadline(), None);
    }

    // --stop-delay, --stop-all and the survivors (reap(1), OPTIONS).

    fn delayed(delay: u64) -> &'static Config {
        config(&format!("-c x --stop-delay {delay}ms"))
    }

    #[test]
    fn stop_delay_holds_the_stop_request_then_passes_it_on_and_starts_the_grace() {
        let t = Instant::now();
        let mut m = running(delayed(700), t);
        assert_eq!(
            m.on(Event::Signal(TERM, FROM), t),
            [Say(Note::StopDelayed(TERM, FROM))]
        );
        assert_eq!(m.deadline(), Some(t + ms(700)), "the delay, not the grace");
        // Other signals pass on meanwhile.
        assert_eq!(
            m.on(Event::Signal(Signal::USR1, FROM), t + ms(10)),
            [Forward(Signal::USR1, FROM)]
        );
        assert_eq!(m.due(t + ms(699)), None);
        let end = t + ms(700);
        assert_eq!(m.due(end), Some(DeadlinePassed));
        assert_eq!(
            m.on(DeadlinePassed, end),
            [
                Forward(TERM, FROM),
                Say(Note::StopRequested),
                ContinueIfStopped
            ]
        );
        assert_eq!(m.deadline(), Some(end + ms(5_000)), "the grace starts now");
        // The grace runs out as without a delay.
        assert_eq!(
            m.on(DeadlinePassed, end + ms(5_000))[0],
            NameSurvivors(TERM)
        );
    }

    #[test]
    fn a_second_stop_request_ends_the_stop_delay_at_once() {
        let t = Instant::now();
        let mut m = running(delayed(600_000), t);
        m.on(Event::Signal(TERM, FROM), t);
        let now = t + ms(50);
        assert_eq!(
            m.on(Event::Signal(Signal::INT, FROM + 1), now),
            [
                Say(Note::Trigger(
                    Signal::INT,
                    FROM + 1,
                    ": a second stop request ends the stop delay"
                )),
                Forward(TERM, FROM),
                Say(Note::StopRequested),
                ContinueIfStopped
            ],
            "the held request goes out, once"
        );
        assert_eq!(m.deadline(), Some(now + ms(5_000)));
        // A third is passed on, and does not move the deadline.
        assert_eq!(
            m.on(Event::Signal(TERM, FROM), now + ms(10)),
            [Forward(TERM, FROM), ContinueIfStopped]
        );
        assert_eq!(m.deadline(), Some(now + ms(5_000)));
    }

    #[test]
    fn command_exiting_within_the_stop_delay_is_a_cancel_and_leftovers_get_their_grace() {
        let t = Instant::now();
        let mut m = running(delayed(10_000), t);
        m.on(Event::Signal(TERM, FROM), t);
        let now = t + ms(100);
        assert_eq!(
            m.on(Exited(ok()), now),
            [ReportStatus(ok()), ReleaseTerminal, Sweep(TERM)]
        );
        assert_eq!(m.deadline(), Some(now + ms(5_000)));
        m.on(TreeEmpty, now);
        assert_eq!(env(&m.on(Drained, now))[2], "REAP_CAUSE=cancel");
    }

    #[test]
    fn a_lost_front_within_the_stop_delay_kills_at_once() {
        let t = Instant::now();
        let mut m = running(delayed(10_000), t);
        m.on(Event::Signal(TERM, FROM), t);
        assert_eq!(
            m.on(FrontLost, t),
            [
                Say(Note::Cut("COMMAND's tree")),
                ReleaseTerminal,
                Sweep(KILL)
            ]
        );
        assert_eq!(m.deadline(), None, "the delay is over");
    }

    #[test]
    fn stop_all_sends_the_stop_request_to_every_descendant() {
        let t = Instant::now();
        let p = config("-c x --stop-all");
        let mut m = running(p, t);
        assert_eq!(
            m.on(Event::Signal(Signal::INT, FROM), t),
            [
                Forward(Signal::INT, FROM),
                StopAll(Signal::INT),
                Say(Note::StopRequested),
                ContinueIfStopped
            ]
        );
        // Not for signals that are not stop requests.
        assert_eq!(
            m.on(Event::Signal(Signal::USR1, FROM), t),
            [Forward(Signal::USR1, FROM)]
        );
        // With a delay: at its end.
        let p = config("-c x --stop-all --stop-delay 100ms");
        let mut m = running(p, t);
        m.on(Event::Signal(TERM, FROM), t);
        assert_eq!(
            m.on(DeadlinePassed, t + ms(100))[..2],
            [Forward(TERM, FROM), StopAll(TERM)]
        );
    }

    #[test]
    fn survivors_are_named_with_the_signal_they_got_before_the_kill() {
        let t = Instant::now();
        let mut m = running(params(), t);
        m.on(Event::Signal(Signal::HUP, FROM), t);
        let actions = m.on(DeadlinePassed, t + ms(5_000));
        assert_eq!(actions[0], NameSurvivors(Signal::HUP), "{actions:?}");
        // Leftovers: reap's --signal.
        let p = config("-c x -s INT");
        let mut m = running(p, t);
        m.on(Exited(ok()), t);
        assert_eq!(
            m.on(DeadlinePassed, t + ms(5_000)),
            [
                NameSurvivors(Signal::INT),
                Say(Note::Line("grace over: killing every descendant left")),
                Sweep(KILL)
            ]
        );
    }

    #[test]
    fn a_cleanup_adopted_by_the_front_runs_to_its_end_then_its_leftovers_go() {
        let t = Instant::now();
        let deadline = Some(t + Duration::from_secs(3));
        let mut m = Machine::new(params(), false);
        m.adopt_cleanup(Some(Status::Exited(0)), Some(Cause::Cancel), deadline);
        assert_eq!(m.phase(), Phase::Cleanup(deadline));
        assert_eq!(m.cause(), Cause::Cancel, "the cleanup's REAP_CAUSE is kept");
        // Signals meanwhile are logged, never passed on.
        let sig = m.on(Event::Signal(Signal::TERM, 1), t);
        assert!(
            sig.iter().all(|a| matches!(a, Say(_))),
            "nothing but a line: {sig:?}"
        );
        let swept = m.on(Event::Exited(Status::Exited(3)), t);
        assert!(
            swept.iter().any(|a| matches!(a, Sweep(_))),
            "its leftovers are swept: {swept:?}"
        );
        assert_eq!(m.cleanup_result(), Some(Status::Exited(3)));
    }

    // The clock on the way of a signal (on_into, sent).

    #[test]
    fn a_stop_request_passed_on_reads_no_clock_and_its_grace_starts_when_sent() {
        let t = Instant::now();
        let mut m = running(params(), t);
        let mut out = Vec::new();
        m.on_into(
            Event::Signal(TERM, FROM),
            || panic!("no clock before the kill"),
            &mut out,
        );
        assert_eq!(
            out,
            [
                Forward(TERM, FROM),
                Say(Note::StopRequested),
                ContinueIfStopped
            ]
        );
        assert_eq!(m.deadline(), None, "not started before the kill");
        let sent = t + ms(3);
        m.sent(|| sent);
        assert_eq!(m.deadline(), Some(sent + ms(5_000)), "from the send");
        // Started once: a later `sent` reads no clock and moves nothing.
        m.sent(|| panic!("nothing left to start"));
        assert_eq!(m.deadline(), Some(sent + ms(5_000)));
        // A signal that starts nothing reads no clock either.
        out.clear();
        m.on_into(
            Event::Signal(Signal::USR1, FROM),
            || panic!("no clock"),
            &mut out,
        );
        m.sent(|| panic!("no clock"));
        assert_eq!(out, [Forward(Signal::USR1, FROM)]);
    }

    #[test]
    fn an_unstarted_grace_starts_no_later_than_the_next_event() {
        let t = Instant::now();
        let mut m = running(params(), t);
        m.on_into(Event::Signal(TERM, FROM), || t, &mut Vec::new());
        let next = t + ms(7);
        assert_eq!(m.on(Event::Signal(Signal::USR1, FROM), next).len(), 1);
        assert_eq!(m.deadline(), Some(next + ms(5_000)));
    }

    #[test]
    fn a_stop_delay_too_long_to_represent_is_the_longest_wait_not_none() {
        let t = Instant::now();
        let p = config("-c x");
        p.stop_delay = Duration::MAX;
        let p: &Config = p;
        let mut m = running(p, t);
        assert_eq!(
            m.on(Event::Signal(TERM, FROM), t),
            [Say(Note::StopDelayed(TERM, FROM))]
        );
        assert_eq!(m.deadline(), None, "held until a second request");
        assert_eq!(m.due(t + ms(3_600_000)), None);
        let mut m = running(p, t);
        m.on_into(Event::Signal(TERM, FROM), || t, &mut Vec::new());
        m.sent(|| t);
        assert_eq!(m.deadline(), None, "the same when it starts at the send");
    }

    // The cause is fixed with the front's word.

    #[test]
    fn with_a_front_the_cause_waits_for_its_answer() {
        let t = Instant::now();
        let p = params();
        let mut m = started(Machine::new(p, true), t);
        m.on(Exited(ok()), t);
        m.on(TreeEmpty, t);
        assert_eq!(m.on(Drained, t), [], "not before the front's answer");
        assert_eq!(m.phase(), Phase::Settle);
        assert_eq!(env(&m.on(Answered, t))[2], "REAP_CAUSE=exit");
        // Gone instead of answering: the front's loss is the cause.
        let mut m = running(p, t);
        m.on(Exited(ok()), t);
        m.on(TreeEmpty, t);
        m.on(FrontLost, t);
        assert_eq!(env(&m.on(Drained, t))[2], "REAP_CAUSE=lost");
    }

    #[test]
    fn a_stop_request_the_front_had_when_command_ended_is_the_cause() {
        let t = Instant::now();
        let p = params();
        // Handed over during the sweep, or once it is over: before the answer.
        for swept in [false, true] {
            let mut m = started(Machine::new(p, true), t);
            m.on(Exited(ok()), t);
            if swept {
                m.on(TreeEmpty, t);
            }
            assert_eq!(
                m.on(Event::Signal(TERM, FROM), t),
                [Say(Note::Trigger(TERM, FROM, ", a stop request the front had when COMMAND ended: not passed on; REAP_CAUSE=cancel"))]
            );
            m.on(TreeEmpty, t);
            assert_eq!(env(&m.on(Answered, t))[2], "REAP_CAUSE=cancel");
        }
        // After the answer, or without a front: not passed on, no cause.
        for front in [true, false] {
            let mut m = started(Machine::new(p, front), t);
            m.on(Exited(ok()), t);
            m.on(Answered, t);
            m.on(TreeEmpty, t);
            assert_eq!(
                m.on(Event::Signal(TERM, FROM), t),
                [Say(Note::Dropped(TERM, FROM, ": not passed on"))]
            );
            assert_eq!(env(&m.on(Drained, t))[2], "REAP_CAUSE=exit");
        }
    }
}
