//! The stop ladder as a pure state machine: Running -> (Delaying, with
//! `--stop-delay`) -> Stopping(deadline) -> Killing -> Done.
//!
//! Time is passed in, never read here, so every edge of the ladder (a trigger
//! repeated during the grace, a deadline reached together with a trigger, a
//! grace of 0 or `inf`) is a unit test without sleeping. The main loop feeds
//! events and carries out the actions; it sleeps until [`Machine::deadline`].

use pgkit::Signal;
use std::time::{Duration, Instant};

/// What the ladder is told.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// A signal of the `--on` set reached graceful.
    Trigger(Signal),
    /// `--timeout` ran out (see [`Machine::due`]).
    Timeout,
    /// The grace period ran out (see [`Machine::due`]).
    GraceExpired,
    /// The `--stop-delay` after a trigger ran out (see [`Machine::due`]).
    DelayOver,
    /// COMMAND, the group's leader, exited. It stays unreaped, and the
    /// ladder goes on: the grace covers the whole group.
    LeaderExited,
    /// Nothing is left of the group but the unreaped leader.
    GroupGone,
}

/// What the main loop must do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Send this signal to COMMAND's whole process group.
    SendGroup(Signal),
    /// If COMMAND is stopped, send CONT to the group so it can act on the
    /// stop signal just sent (as systemd and timeout(1) do).
    ContinueIfStopped,
    /// The grace period started; it ends at this instant.
    ArmDeadline(Instant),
    /// A trigger came; the stop signal waits until this instant.
    ArmDelay(Instant),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    /// COMMAND runs; no stop asked for yet.
    Running,
    /// A trigger came; the stop signal `sig` goes out at `until`
    /// (`--stop-delay`, a load balancer's drain), or at the next trigger.
    Delaying { until: Instant, sig: Signal },
    /// The stop signal was sent; the kill signal follows at `deadline`
    /// (`None`: a grace of `inf`, never).
    Stopping { deadline: Option<Instant> },
    /// The kill signal was sent; waiting for the group to be gone.
    Killing,
    /// The group is gone.
    Done,
}

/// The fixed parameters of the ladder.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ladder {
    /// Between the stop signal and the kill signal; `None` for `inf`.
    pub grace: Option<Duration>,
    /// `--signal`; `None`: the trigger signal itself (TERM for `--timeout`).
    pub signal: Option<Signal>,
    /// `--kill-signal`.
    pub kill_signal: Signal,
    /// `--stop-delay`: between a trigger and the stop signal.
    pub delay: Duration,
}

#[derive(Debug)]
pub struct Machine {
    ladder: Ladder,
    state: State,
    /// When `--timeout` fires, if it does.
    timeout_at: Option<Instant>,
    timed_out: bool,
    leader_exited: bool,
    /// The stop signal sent, once it is.
    sent: Option<Signal>,
}

impl Machine {
    /// A ladder whose COMMAND started at `start`, with `--timeout` (`None`
    /// for no timeout).
    pub fn new(ladder: Ladder, timeout: Option<Duration>, start: Instant) -> Machine {
        let timeout_at = timeout.and_then(|t| start.checked_add(t));
        Machine {
            ladder,
            state: State::Running,
            timeout_at,
            timed_out: false,
            leader_exited: false,
            sent: None,
        }
    }

    #[cfg(test)]
    pub fn state(&self) -> State {
        self.state
    }

    /// The grace period (`None` for inf).
    pub fn grace(&self) -> Option<Duration> {
        self.ladder.grace
    }

    /// The stop signal sent to the group, once it was.
    pub fn stop_signal(&self) -> Option<Signal> {
        self.sent
    }

    pub fn is_done(&self) -> bool {
        self.state == State::Done
    }

    /// Whether `--timeout` started the stop (graceful then exits 124).
    pub fn timed_out(&self) -> bool {
        self.timed_out
    }

    /// The next instant at which something happens by itself: the timeout
    /// while running, the end of the grace while stopping.
    pub fn deadline(&self) -> Option<Instant> {
        match self.state {
            State::Running => self.timeout_at,
            State::Delaying { until, .. } => Some(until),
            State::Stopping { deadline } => deadline,
            State::Killing | State::Done => None,
        }
    }

    /// The end of the grace period, while it runs.
    pub fn grace_deadline(&self) -> Option<Instant> {
        match self.state {
            State::Stopping { deadline } => deadline,
            _ => None,
        }
    }

    /// A trigger came: the stop delay, the grace or the kill runs.
    pub fn stopping(&self) -> bool {
        !matches!(self.state, State::Running | State::Done)
    }

    /// Whether the kill signal has been sent.
    pub fn killed(&self) -> bool {
        matches!(self.state, State::Killing | State::Done)
    }

    /// The time event due at `now`, if any.
    pub fn due(&self, now: Instant) -> Option<Event> {
        self.deadline().filter(|&d| d <= now)?;
        Some(match self.state {
            State::Running => Event::Timeout,
            State::Delaying { .. } => Event::DelayOver,
            _ => Event::GraceExpired,
        })
    }

    /// Feed one event; returns what to do, in order.
    pub fn on(&mut self, event: Event, now: Instant) -> Vec<Action> {
        match (self.state, event) {
            (_, Event::LeaderExited) => {
                self.leader_exited = true;
                Vec::new()
            }
            // The group cannot be gone while its leader runs.
            (_, Event::GroupGone) if self.leader_exited => {
                self.state = State::Done;
                Vec::new()
            }
            (State::Running, Event::Trigger(sig)) => {
                self.delay_then_stop(self.ladder.signal.unwrap_or(sig), now)
            }
            (State::Running, Event::Timeout) => {
                self.timed_out = true;
                self.delay_then_stop(self.ladder.signal.unwrap_or(Signal::TERM), now)
            }
            // A second trigger ends the delay at once.
            (State::Delaying { sig, .. }, Event::Trigger(_)) => self.stop(sig, now),
            (State::Delaying { sig, .. }, Event::DelayOver) => self.stop(sig, now),
            // Passed on again; the deadline stays where it is.
            (State::Stopping { .. }, Event::Trigger(sig)) => {
                vec![
                    Action::SendGroup(self.ladder.signal.unwrap_or(sig)),
                    Action::ContinueIfStopped,
                ]
            }
            (State::Stopping { .. }, Event::GraceExpired) => self.kill(),
            // Already stopping or past it: a late timeout changes nothing,
            // and after the kill signal a trigger has nothing left to add.
            _ => Vec::new(),
        }
    }

    /// Wait `--stop-delay` first, if there is one; the grace starts when
    /// the stop signal is sent, so the delay takes nothing from it.
    fn delay_then_stop(&mut self, sig: Signal, now: Instant) -> Vec<Action> {
        match now.checked_add(self.ladder.delay) {
            Some(until) if !self.ladder.delay.is_zero() => {
                self.state = State::Delaying { until, sig };
                vec![Action::ArmDelay(until)]
            }
            _ => self.stop(sig, now),
        }
    }

    /// Send the stop signal and start the grace.
    fn stop(&mut self, sig: Signal, now: Instant) -> Vec<Action> {
        self.sent = Some(sig);
        let mut actions = vec![Action::SendGroup(sig), Action::ContinueIfStopped];
        match self.ladder.grace {
            Some(grace) if grace.is_zero() => actions.extend(self.kill()),
            Some(grace) => {
                let deadline = now.checked_add(grace);
                actions.extend(deadline.map(Action::ArmDeadline));
                self.state = State::Stopping { deadline };
            }
            None => self.state = State::Stopping { deadline: None },
        }
        actions
    }

    fn kill(&mut self) -> Vec<Action> {
        self.state = State::Killing;
        vec![Action::SendGroup(self.ladder.kill_signal)]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Action::*;
    use Event::*;

    const TERM: Signal = Signal::TERM;
    const KILL: Signal = Signal::KILL;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn ladder(grace: Option<Duration>) -> Ladder {
        Ladder {
            delay: Duration::ZERO,
            grace,
            signal: None,
            kill_signal: KILL,
        }
    }

    fn machine(grace_ms: u64) -> (Machine, Instant) {
        let t0 = Instant::now();
        (Machine::new(ladder(Some(ms(grace_ms))), None, t0), t0)
    }

    #[test]
    fn running_sleeps_without_deadline() {
        let (m, t0) = machine(10_000);
        assert_eq!(m.state(), State::Running);
        assert_eq!(m.deadline(), None);
        assert_eq!(m.due(t0 + Duration::from_secs(86_400)), None);
    }

    #[test]
    fn trigger_sends_the_trigger_signal_then_kill_at_the_deadline() {
        let (mut m, t0) = machine(10_000);
        let t1 = t0 + ms(5);
        let deadline = t1 + ms(10_000);
        assert_eq!(
            m.on(Trigger(Signal::INT), t1),
            [
                SendGroup(Signal::INT),
                ContinueIfStopped,
                ArmDeadline(deadline)
            ]
        );
        assert_eq!(
            m.state(),
            State::Stopping {
                deadline: Some(deadline)
            }
        );
        assert_eq!(m.deadline(), Some(deadline));
        assert_eq!(m.due(deadline - ms(1)), None);
        assert_eq!(m.due(deadline), Some(GraceExpired));
        assert_eq!(m.on(GraceExpired, deadline), [SendGroup(KILL)]);
        assert_eq!(m.state(), State::Killing);
        assert_eq!(m.deadline(), None);
        m.on(LeaderExited, deadline);
        m.on(GroupGone, deadline);
        assert!(m.is_done());
        assert!(!m.timed_out());
    }

    #[test]
    fn signal_option_replaces_the_trigger_signal() {
        let t0 = Instant::now();
        let l = Ladder {
            signal: Some(Signal::USR1),
            ..ladder(Some(ms(100)))
        };
        let mut m = Machine::new(l, None, t0);
        assert_eq!(m.on(Trigger(TERM), t0)[0], SendGroup(Signal::USR1));
        // A repeat is passed on as the stop signal too.
        assert_eq!(m.on(Trigger(Signal::HUP), t0)[0], SendGroup(Signal::USR1));
    }

    #[test]
    fn timeout_sends_term_and_is_remembered() {
        let t0 = Instant::now();
        let mut m = Machine::new(ladder(Some(ms(2_000))), Some(ms(300)), t0);
        assert_eq!(m.deadline(), Some(t0 + ms(300)));
        assert_eq!(m.due(t0 + ms(299)), None);
        let t1 = t0 + ms(301);
        assert_eq!(m.due(t1), Some(Timeout));
        assert_eq!(
            m.on(Timeout, t1),
            [
                SendGroup(TERM),
                ContinueIfStopped,
                ArmDeadline(t1 + ms(2_000))
            ]
        );
        assert!(m.timed_out());
        // The grace runs from when the timeout was acted on.
        assert_eq!(m.deadline(), Some(t1 + ms(2_000)));
        assert_eq!(m.due(t1 + ms(2_000)), Some(GraceExpired));
    }

    #[test]
    fn timeout_uses_the_signal_option() {
        let t0 = Instant::now();
        let l = Ladder {
            signal: Some(Signal::INT),
            ..ladder(Some(ms(100)))
        };
        let mut m = Machine::new(l, Some(ms(1)), t0);
        assert_eq!(m.on(Timeout, t0 + ms(1))[0], SendGroup(Signal::INT));
    }

    #[test]
    fn trigger_and_timeout_at_once_first_one_wins() {
        // The signal first: the timeout that follows changes nothing.
        let t0 = Instant::now();
        let t1 = t0 + ms(300);
        let mut m = Machine::new(ladder(Some(ms(1_000))), Some(ms(300)), t0);
        assert_eq!(m.on(Trigger(Signal::HUP), t1)[0], SendGroup(Signal::HUP));
        assert_eq!(m.due(t1), None, "the timeout is no longer pending");
        assert_eq!(m.on(Timeout, t1), []);
        assert!(!m.timed_out());
        assert_eq!(m.deadline(), Some(t1 + ms(1_000)));

        // The timeout first: the signal is passed on, the deadline stays.
        let mut m = Machine::new(ladder(Some(ms(1_000))), Some(ms(300)), t0);
        assert_eq!(m.on(Timeout, t1)[0], SendGroup(TERM));
        assert_eq!(
            m.on(Trigger(Signal::HUP), t1),
            [SendGroup(Signal::HUP), ContinueIfStopped]
        );
        assert!(m.timed_out());
        assert_eq!(m.deadline(), Some(t1 + ms(1_000)));
    }

    #[test]
    fn repeated_trigger_is_passed_on_and_keeps_the_deadline() {
        let (mut m, t0) = machine(3_000);
        m.on(Trigger(TERM), t0);
        let deadline = t0 + ms(3_000);
        for late in [1, 1_500, 2_999] {
            assert_eq!(
                m.on(Trigger(TERM), t0 + ms(late)),
                [SendGroup(TERM), ContinueIfStopped]
            );
            assert_eq!(
                m.deadline(),
                Some(deadline),
                "neither restarted nor shortened"
            );
        }
        assert_eq!(
            m.on(Trigger(Signal::INT), t0 + ms(10))[0],
            SendGroup(Signal::INT)
        );
        assert_eq!(m.on(GraceExpired, deadline), [SendGroup(KILL)]);
        // After the kill signal a trigger adds nothing.
        assert_eq!(m.on(Trigger(TERM), deadline + ms(1)), []);
    }

    #[test]
    fn grace_deadline_and_killed_follow_the_ladder() {
        let (mut m, t0) = machine(100);
        assert_eq!(m.grace_deadline(), None);
        assert!(!m.killed());
        m.on(Trigger(TERM), t0);
        assert_eq!(m.grace_deadline(), Some(t0 + ms(100)));
        m.on(GraceExpired, t0 + ms(100));
        assert_eq!(m.grace_deadline(), None);
        assert!(m.killed());
    }

    #[test]
    fn command_exits_during_the_grace_and_the_group_goes() {
        let (mut m, t0) = machine(10_000);
        m.on(Trigger(TERM), t0);
        assert_eq!(m.on(LeaderExited, t0 + ms(10)), []);
        assert_eq!(
            m.state(),
            State::Stopping {
                deadline: Some(t0 + ms(10_000))
            }
        );
        assert_eq!(m.on(GroupGone, t0 + ms(10)), []);
        assert!(m.is_done());
        assert_eq!(m.deadline(), None, "no kill once the group is gone");
        assert_eq!(m.on(GraceExpired, t0 + ms(10_000)), []);
        assert_eq!(m.on(Trigger(TERM), t0 + ms(10_000)), []);
    }

    #[test]
    fn members_outliving_the_leader_are_killed_at_the_deadline() {
        let (mut m, t0) = machine(1_000);
        m.on(Trigger(TERM), t0);
        m.on(LeaderExited, t0 + ms(1));
        // Members remain: no GroupGone; the deadline still holds.
        assert_eq!(m.due(t0 + ms(1_000)), Some(GraceExpired));
        assert_eq!(m.on(GraceExpired, t0 + ms(1_000)), [SendGroup(KILL)]);
        assert!(!m.is_done());
        m.on(GroupGone, t0 + ms(1_002));
        assert!(m.is_done());
    }

    #[test]
    fn command_exits_on_its_own_and_members_are_waited_for() {
        let t0 = Instant::now();
        let mut m = Machine::new(ladder(Some(ms(500))), Some(ms(5_000)), t0);
        assert_eq!(m.on(LeaderExited, t0 + ms(1)), []);
        assert_eq!(m.state(), State::Running, "no signal without a trigger");
        // The timeout still covers the members left behind.
        assert_eq!(m.due(t0 + ms(5_000)), Some(Timeout));
        assert_eq!(m.on(Timeout, t0 + ms(5_000))[0], SendGroup(TERM));
        assert_eq!(m.on(GroupGone, t0 + ms(5_001)), []);
        assert!(m.is_done());
    }

    #[test]
    fn group_gone_before_the_leader_exited_is_ignored() {
        let (mut m, t0) = machine(1_000);
        m.on(GroupGone, t0);
        assert_eq!(m.state(), State::Running);
    }

    #[test]
    fn grace_zero_kills_at_once() {
        let (mut m, t0) = machine(0);
        assert_eq!(
            m.on(Trigger(TERM), t0),
            [SendGroup(TERM), ContinueIfStopped, SendGroup(KILL)]
        );
        assert_eq!(m.state(), State::Killing);
        assert_eq!(m.deadline(), None);
    }

    #[test]
    fn grace_inf_never_kills() {
        let t0 = Instant::now();
        let mut m = Machine::new(ladder(None), None, t0);
        assert_eq!(
            m.on(Trigger(TERM), t0),
            [SendGroup(TERM), ContinueIfStopped]
        );
        assert_eq!(m.state(), State::Stopping { deadline: None });
        assert_eq!(m.deadline(), None);
        assert_eq!(m.due(t0 + Duration::from_secs(1 << 40)), None);
        assert_eq!(m.on(Trigger(TERM), t0 + ms(5))[0], SendGroup(TERM));
    }

    #[test]
    fn kill_signal_other_than_kill() {
        let t0 = Instant::now();
        let l = Ladder {
            kill_signal: Signal::USR2,
            ..ladder(Some(ms(50)))
        };
        let mut m = Machine::new(l, None, t0);
        m.on(Trigger(TERM), t0);
        assert_eq!(m.on(GraceExpired, t0 + ms(50)), [SendGroup(Signal::USR2)]);
        assert_eq!(m.state(), State::Killing);
        // Nothing after it: the group is waited for, however long it takes.
        assert_eq!(m.deadline(), None);
    }

    #[test]
    fn huge_durations_do_not_overflow() {
        let t0 = Instant::now();
        let huge = Duration::from_secs(u64::MAX / 2);
        let mut m = Machine::new(ladder(Some(huge)), Some(huge), t0);
        assert_eq!(m.deadline(), None);
        m.on(Trigger(TERM), t0);
        assert_eq!(m.state(), State::Stopping { deadline: None });
    }

    #[test]
    fn a_stop_delay_comes_before_the_stop_signal_and_takes_nothing_from_the_grace() {
        let t0 = Instant::now();
        let l = Ladder {
            delay: ms(300),
            ..ladder(Some(ms(1000)))
        };
        let mut m = Machine::new(l, None, t0);
        assert_eq!(m.on(Trigger(TERM), t0), vec![ArmDelay(t0 + ms(300))]);
        assert_eq!(m.deadline(), Some(t0 + ms(300)));
        assert_eq!(m.due(t0 + ms(299)), None);
        assert_eq!(m.due(t0 + ms(300)), Some(DelayOver));
        let at = t0 + ms(300);
        assert_eq!(
            m.on(DelayOver, at),
            vec![
                SendGroup(TERM),
                ContinueIfStopped,
                ArmDeadline(at + ms(1000))
            ]
        );
        assert_eq!(m.stop_signal(), Some(TERM));
    }

    #[test]
    fn a_second_trigger_ends_the_stop_delay_at_once() {
        let t0 = Instant::now();
        let l = Ladder {
            delay: ms(5000),
            ..ladder(Some(ms(1000)))
        };
        let mut m = Machine::new(l, None, t0);
        m.on(Trigger(TERM), t0);
        let at = t0 + ms(10);
        assert_eq!(
            m.on(Trigger(Signal::INT), at),
            vec![
                SendGroup(TERM),
                ContinueIfStopped,
                ArmDeadline(at + ms(1000))
            ]
        );
    }

    #[test]
    fn a_timeout_with_a_stop_delay_waits_the_delay_and_still_reports_124() {
        let t0 = Instant::now();
        let l = Ladder {
            delay: ms(200),
            ..ladder(Some(ms(1000)))
        };
        let mut m = Machine::new(l, Some(ms(100)), t0);
        assert_eq!(m.due(t0 + ms(100)), Some(Timeout));
        assert_eq!(m.on(Timeout, t0 + ms(100)), vec![ArmDelay(t0 + ms(300))]);
        assert!(m.timed_out());
        assert_eq!(m.due(t0 + ms(300)), Some(DelayOver));
    }
}
