//! The one blocking call: `ppoll` on the tool's descriptors until one is
//! readable (or, for a pipe the tool writes to, writable) or the deadline
//! passes.
//!
//! No timeout means no wake-up: with no deadline armed the tool sleeps until
//! a signal or a child's exit makes a descriptor readable. A deadline is
//! kept by a `timerfd` polled with the rest ([`crate::deadline::Timer`]),
//! not by the poll timeout, which the kernel lets run 0.1% late; it is armed
//! from the monotonic deadline on every call, so an early return never
//! stretches the wait.

use crate::deadline::Timer;
use rustix::event::{PollFd, PollFlags, Timespec};
use std::io;
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Failed waits in a row (0 after a wait that worked).
static FAILURES: AtomicU32 = AtomicU32::new(0);

/// Another process of the tool says a failed wait (see [`quiet_failures`]).
static QUIET: AtomicBool = AtomicBool::new(false);

/// A failed wait is said by another process of the tool, which meets the
/// same refusal (reap's back, for its front): here it is a `-v` line, so
/// the tool says it once.
pub fn quiet_failures() {
    QUIET.store(true, Ordering::Relaxed);
}

/// A wait that failed for a reason that will not go away by itself (EINVAL
/// when the descriptor limit was lowered under the tool's feet, ENOMEM):
/// returning at once would make every caller's loop a busy loop. So sleep
/// instead — a few milliseconds, doubling to a second, never past the
/// deadline — and report every descriptor ready, so the caller looks at
/// everything once, as after a wake-up. Said once, on stderr.
fn after_failure(err: &io::Error, ours: usize, deadline: Option<Instant>) -> Vec<usize> {
    let n = FAILURES.fetch_add(1, Ordering::Relaxed);
    if n == 0 {
        let e = crate::error::describe(err);
        let line = format!("unable to wait for events: {e}; looking every second instead");
        if QUIET.load(Ordering::Relaxed) {
            crate::verbose!("{line}");
        } else {
            crate::warn!("{line}");
        }
    }
    let nap = Duration::from_millis(5u64 << n.min(8)).min(Duration::from_secs(1));
    let left = deadline.map_or(nap, |d| d.saturating_duration_since(Instant::now()));
    std::thread::sleep(nap.min(left));
    (0..ours).collect()
}

/// The deadline timer of the process: made by [`open_timer`], or else on
/// the first wait with a deadline (a tool without deadlines never opens it).
static TIMER: Mutex<Option<Timer>> = Mutex::new(None);

/// Open the deadline timer now rather than on the first wait with a
/// deadline. That first wait comes right after a stop signal is sent, and
/// on a busy CPU the process signalled runs only once the tool sleeps: a
/// first `timerfd_create` there (the kernel's slowest step of the wait,
/// as it allocates the timer's file) delays its handler. A tool that
/// knows it keeps deadlines calls this while it starts. Best effort: if it
/// fails, the first wait tries again.
pub fn open_timer() {
    let mut timer = TIMER.lock().unwrap_or_else(|e| e.into_inner());
    *timer = timer.take().or_else(|| Timer::new().ok());
}

/// Close the deadline timer, if it is open: whether it was. It is idle
/// between waits (each wait with a deadline arms it anew), and the next
/// one that needs it opens it again, or keeps its deadline with the poll's
/// timeout where it cannot.
pub fn close_timer() -> bool {
    (TIMER.lock().unwrap_or_else(|e| e.into_inner()))
        .take()
        .is_some()
}

/// Wait until one of `fds` is readable (returns which, by index) or
/// `deadline` passes (returns an empty list). `None` for `deadline` waits
/// without a timeout.
pub fn wait(fds: &[BorrowedFd<'_>], deadline: Option<Instant>) -> Vec<usize> {
    wait_all(fds, &[], &[], deadline)
}

/// The list of descriptors a loop hands to one wait: [`Fds::push`] gives
/// each one's index, to find it among those [`wait_all`] reports ready.
#[derive(Default)]
pub struct Fds<'a>(Vec<BorrowedFd<'a>>);

impl<'a> Fds<'a> {
    /// Add `fd`; its index in the list.
    pub fn push(&mut self, fd: BorrowedFd<'a>) -> usize {
        self.0.push(fd);
        self.0.len() - 1
    }
}

impl<'a> std::ops::Deref for Fds<'a> {
    type Target = [BorrowedFd<'a>];

    fn deref(&self) -> &[BorrowedFd<'a>] {
        &self.0
    }
}

/// [`wait`], also for descriptors to write to and descriptors that report
/// a change with `POLLPRI` (a cgroup's `cgroup.events`, always readable):
/// the indices of the ready ones, `readable` first, then `writable`, then
/// `priority`, numbered on. A write end whose reader is gone counts as
/// ready (the write then fails with EPIPE).
pub fn wait_all(
    readable: &[BorrowedFd<'_>],
    writable: &[BorrowedFd<'_>],
    priority: &[BorrowedFd<'_>],
    deadline: Option<Instant>,
) -> Vec<usize> {
    // The timer keeps the deadline; the poll timeout only if it cannot.
    if deadline.is_some() {
        open_timer();
    }
    let mut timer = TIMER.lock().unwrap_or_else(|e| e.into_inner());
    let armed = deadline.is_some_and(|d| timer.as_mut().is_some_and(|t| t.arm(Some(d)).is_ok()));
    let fallback = if armed { None } else { deadline };
    let timer_fd = timer.as_ref().filter(|_| armed).map(|t| t.as_fd());
    let ours = readable.len() + writable.len() + priority.len();
    // Entries of the poll's array: ours in order, then the timer's.
    let mut pfds: Vec<PollFd<'_>> = (readable.iter().map(|fd| (fd, PollFlags::IN)))
        .chain(writable.iter().map(|fd| (fd, PollFlags::OUT)))
        .chain(priority.iter().map(|fd| (fd, PollFlags::PRI)))
        .map(|(fd, flags)| PollFd::from_borrowed_fd(*fd, flags))
        .chain(timer_fd.map(|fd| PollFd::from_borrowed_fd(fd, PollFlags::IN)))
        .collect();
    // A wait past what a timespec holds (no Instant is that far) waits on.
    let left = |d: Instant| Timespec::try_from(d.saturating_duration_since(Instant::now())).ok();
    let timeout = fallback.and_then(left);
    // rustix's poll is ppoll with a null sigmask: the (fully blocked) mask
    // stays as it is.
    if let Err(e) = rustix::event::poll(&mut pfds, timeout.as_ref()) {
        if e == rustix::io::Errno::INTR {
            return Vec::new();
        }
        drop(timer);
        return after_failure(&e.into(), ours, deadline);
    }
    FAILURES.store(0, Ordering::Relaxed);
    // One push at a time: `collect` of the filter made pgwrap 128 bytes
    // larger, its code a page longer (0x1d06c bytes against 0x1cfec).
    let (mut ready, fired) = (Vec::new(), |i: &usize| !pfds[*i].revents().is_empty());
    (0..ours).filter(fired).for_each(|i| ready.push(i));
    ready
}
