//! A deadline the kernel keeps to the microsecond: a `timerfd` on
//! CLOCK_MONOTONIC (the clock of `Instant`), readable once the deadline has
//! passed, to be waited on with the tool's other descriptors.
//!
//! Why not the timeout of `ppoll(2)`: the kernel lets a poll or select
//! timeout run late by 0.1% of its length (`select_estimate_accuracy`, to
//! batch wake-ups): 10 ms on a 10 s grace period, up to 100 ms on long ones.
//! A timerfd expires at its time, within the timer slack (50 us by default).
//!
//! It is armed with the deadline itself (`TFD_TIMER_ABSTIME`), so arming it
//! reads no clock: where the vDSO cannot serve `clock_gettime` (a clock
//! source without one, as under qemu's TCG) each read is a system call,
//! and the arm comes right after a stop signal is sent, before the tool
//! sleeps and the process signalled runs on a busy CPU. An `Instant` is
//! turned into the clock's time through an anchor, the two read once when
//! the timer is made, the `Instant` first: the conversion errs by the
//! nanoseconds between the two reads, late, so it never fires early.

use rustix::time::{
    timerfd_create, timerfd_settime, Itimerspec, TimerfdClockId, TimerfdFlags, TimerfdTimerFlags,
    Timespec,
};
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::time::{Duration, Instant};

/// A one-shot timer, disarmed until [`Timer::arm`] gives it a deadline.
pub struct Timer {
    fd: OwnedFd,
    armed: Option<Instant>,
    /// An `Instant` and the clock's time read right after it (none if the
    /// clock could not be read: then the time left is armed instead).
    anchor: Option<(Instant, Duration)>,
}

impl Timer {
    /// `timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC)`.
    pub fn new() -> io::Result<Timer> {
        let fd = timerfd_create(
            TimerfdClockId::Monotonic,
            TimerfdFlags::NONBLOCK | TimerfdFlags::CLOEXEC,
        )?;
        let instant = Instant::now();
        Ok(Timer {
            fd,
            armed: None,
            anchor: now(libc::CLOCK_MONOTONIC).map(|clock| (instant, clock)),
        })
    }

    /// Expire at `deadline` (at once if it has passed); `None` disarms.
    /// `timerfd_settime` discards an expiry not yet read, so the descriptor
    /// is readable only for this deadline. The same deadline again costs
    /// nothing: the timer is left as it is, readable if that deadline has
    /// passed; keeping it disarmed costs nothing either.
    pub fn arm(&mut self, deadline: Option<Instant>) -> io::Result<()> {
        if deadline == self.armed {
            return Ok(());
        }
        // A zero it_value would disarm: a passed deadline gets 1 ns.
        let (value, flags) = match (deadline, self.anchor) {
            (Some(d), Some(anchor)) => (clock_time(anchor, d), TimerfdTimerFlags::ABSTIME),
            (Some(d), None) => (
                d.saturating_duration_since(Instant::now())
                    .max(Duration::from_nanos(1)),
                TimerfdTimerFlags::empty(),
            ),
            (None, _) => (Duration::ZERO, TimerfdTimerFlags::empty()),
        };
        // Past what a timespec holds (no Instant is that far): disarmed,
        // the wait waits on.
        let spec = Itimerspec {
            it_interval: Timespec::default(),
            it_value: Timespec::try_from(value).unwrap_or_default(),
        };
        timerfd_settime(&self.fd, flags, &spec)?;
        self.armed = deadline;
        Ok(())
    }
}

/// `deadline` on CLOCK_MONOTONIC, through `anchor` (an `Instant` and that
/// clock's time), never zero (any time already passed fires at once).
fn clock_time((instant, clock): (Instant, Duration), deadline: Instant) -> Duration {
    // One of the two is zero: the deadline is after the anchor, or before.
    let (after, before) = (deadline - instant, instant - deadline);
    (clock.saturating_add(after).saturating_sub(before)).max(Duration::from_nanos(1))
}

impl AsFd for Timer {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// A clock (`libc::CLOCK_MONOTONIC`, `CLOCK_REALTIME`) now, read as
/// `Instant` reads it: through the C library (its vDSO call), never
/// rustix's `clock_gettime`. rustix finds the vDSO from the auxiliary
/// vector, which it reads with a system call (`prctl(PR_GET_AUXV)`, or
/// `/proc/self/auxv`) on its first use, and under valgrind (the
/// benchmark's instruction counts) that vector names a vDSO the process
/// cannot read: it dies of SIGSEGV in the lookup.
pub fn now(clock: libc::clockid_t) -> Option<Duration> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec, written only by the call.
    let r = unsafe { libc::clock_gettime(clock, &mut ts) };
    (r == 0 && ts.tv_sec >= 0 && (0..1_000_000_000).contains(&ts.tv_nsec))
        .then(|| Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32))
}

/// `CLOCK_MONOTONIC` now, in ms: one clock for every process of the
/// machine, so a time one process writes down another can count from.
pub fn monotonic_ms() -> u64 {
    now(libc::CLOCK_MONOTONIC).map_or(0, |t| t.as_millis() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustix::event::{PollFd, PollFlags};

    fn readable(t: &Timer, ms: i64) -> bool {
        let mut pfd = [PollFd::new(t, PollFlags::IN)];
        let timeout = Timespec {
            tv_sec: ms / 1000,
            tv_nsec: ms % 1000 * 1_000_000,
        };
        rustix::event::poll(&mut pfd, Some(&timeout)) == Ok(1)
    }

    #[test]
    fn fires_at_the_deadline_never_before() {
        let mut t = Timer::new().unwrap();
        assert!(!readable(&t, 0), "disarmed");
        let deadline = Instant::now() + Duration::from_millis(30);
        t.arm(Some(deadline)).unwrap();
        assert!(readable(&t, 5_000));
        assert!(Instant::now() >= deadline);
        // Re-arming (here: disarming) clears the expiry.
        t.arm(None).unwrap();
        assert!(!readable(&t, 50));
    }

    #[test]
    fn the_deadline_is_armed_as_the_clocks_own_time() {
        let mut t = Timer::new().unwrap();
        assert!(t.anchor.is_some(), "CLOCK_MONOTONIC is read");
        let hour = Duration::from_secs(3600);
        let deadline = Instant::now() + hour;
        t.arm(Some(deadline)).unwrap();
        let left = rustix::time::timerfd_gettime(&t.fd).unwrap().it_value;
        let left = Duration::new(left.tv_sec as u64, left.tv_nsec as u32);
        assert!(
            left <= hour && left > hour - Duration::from_secs(5),
            "{left:?} left"
        );
        // Too far to represent: the longest wait, never an error.
        let far = Instant::now().checked_add(Duration::from_secs(u64::MAX / 4));
        if let Some(far) = far {
            t.arm(Some(far)).unwrap();
            assert!(!readable(&t, 20));
        }
    }

    #[test]
    fn a_passed_deadline_fires_at_once_and_same_deadline_is_kept() {
        let mut t = Timer::new().unwrap();
        let now = Instant::now();
        t.arm(Some(now)).unwrap();
        assert!(readable(&t, 5_000));
        // The same deadline again leaves the expiry as it is (readable).
        t.arm(Some(now)).unwrap();
        assert!(readable(&t, 0));
        // A new deadline discards it, though it was never read.
        let later = Instant::now() + Duration::from_secs(3600);
        t.arm(Some(later)).unwrap();
        assert!(!readable(&t, 20));
        t.arm(Some(later)).unwrap();
        assert!(!readable(&t, 0));
    }
}
