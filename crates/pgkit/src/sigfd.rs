//! The tool's one source of signals: a `signalfd` over the blocked set.
//!
//! Why not handlers and a self-pipe: a pipe collapses repeats, while the
//! `signalfd` returns one record per queued realtime signal (so each one sent
//! to the tool is passed on), and each record names the sender, which `-v`
//! prints and `reap` uses to tell who asked it to stop.

use crate::procfs::own_pid;
use crate::signal::{SigSet, Signal};
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::time::{Duration, Instant};

/// How long SIGCHLD stops waking a subreaper once a wake-up has reaped an
/// orphan (see [`SignalFd::hold_children`]).
pub const CHILD_HOLD: Duration = Duration::from_millis(5);

/// A signal as it was received.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Received {
    pub signal: Signal,
    /// The sender's pid (0 for the kernel, e.g. a terminal's Ctrl-C).
    pub from: i32,
    /// `si_code`: `SI_USER` for kill(2), `SI_QUEUE`, `SI_KERNEL`, ...
    pub code: i32,
}

/// A non-blocking, close-on-exec `signalfd` for a set of blocked signals.
pub struct SignalFd {
    fd: OwnedFd,
    set: SigSet,
    /// SIGCHLD is left out of the descriptor's set until then.
    held: Option<Instant>,
    /// Failed reads in a row (see [`SignalFd::drain_into`]).
    failures: std::cell::Cell<u32>,
}

impl SignalFd {
    /// Open a `signalfd` for `set`. The signals must already be blocked
    /// (`startup` blocks them before `main`).
    pub fn open(set: SigSet) -> io::Result<SignalFd> {
        Ok(SignalFd {
            fd: crate::sigraw::signalfd(set)?,
            set,
            held: None,
            failures: std::cell::Cell::new(0),
        })
    }

    /// Stop waking for SIGCHLD for [`CHILD_HOLD`] from `now` (a hold that
    /// runs is extended, without a system call). A subreaper calls it when
    /// a wake-up has reaped an orphan: when orphans exit one after another,
    /// each exit would otherwise be a wake-up of its own (a `ppoll`, a
    /// `read`, two `waitid`s); held, the exits of the next few milliseconds
    /// are reaped together at the hold's end. Only the tool's own
    /// COMMAND's exit must be seen at once, and that comes by its pidfd:
    /// a caller without one does not hold. The other signals are not
    /// affected; SIGCHLD stays pending, blocked, and wakes the tool as soon
    /// as the hold ends.
    pub fn hold_children(&mut self, now: Instant) {
        if self.held.is_none() {
            if !self.set.contains(Signal::CHLD) {
                return;
            }
            let without = self.set.minus(SigSet::of(&[Signal::CHLD]));
            if crate::sigraw::signalfd_set(self.fd.as_fd(), without).is_err() {
                return;
            }
        }
        self.held = Some(now + CHILD_HOLD);
    }

    /// The deadline to sleep until: `deadline`, or the end of the hold
    /// that still runs if that comes first. A hold whose time has come is
    /// ended here (SIGCHLD is watched again, and the descriptor is readable
    /// at once if one is pending). The clock is read (`now`) only while a
    /// hold runs: the wait right after a signal is passed on reads none.
    pub fn wake_by(
        &mut self,
        deadline: Option<Instant>,
        now: impl FnOnce() -> Instant,
    ) -> Option<Instant> {
        if let Some(end) = self.held {
            let now = now();
            if now >= end {
                // Cannot fail on a live signalfd; were it to, the next try is
                // a hold later (the wake-ups still reap), never a busy loop.
                let watched = crate::sigraw::signalfd_set(self.fd.as_fd(), self.set).is_ok();
                self.held = (!watched).then(|| now + CHILD_HOLD);
            }
        }
        deadline.into_iter().chain(self.held).min()
    }

    /// Every signal pending now, in arrival order per signal; empty if none.
    /// Drain first, then act: acting first could miss a signal that arrives
    /// in between and is not seen until the next wake-up.
    ///
    /// A read that does not fill the buffer has taken every queued signal:
    /// no second read is made just to meet EAGAIN.
    ///
    /// A SIGPIPE this process raised on itself, by writing to a pipe (or a
    /// stderr) nobody reads any more, is left out: the write's EPIPE already
    /// says it, it is nobody's request to pass on (not even with
    /// `--forward PIPE`), and logging it to a broken stderr would raise the
    /// next one. The kernel sends that SIGPIPE as `SI_USER` from the writer
    /// itself, so it is told apart by its sender: this very process.
    pub fn drain(&self) -> Vec<Received> {
        let mut out = Vec::new();
        let _ = self.drain_into(&mut out);
        out
    }

    /// Whether a child of the tool may have changed, by what a wake
    /// brought (`got`): a CHLD, or no record (the wake was a pidfd's, a
    /// timer's), or SIGCHLD is held. Every exit, stop or continue of a
    /// child sends a CHLD, so a wake that brought other signals only has
    /// no child to look at: no `waitid` before the tool acts on them, or
    /// before it sleeps.
    pub fn children_may_have_changed(&self, got: &[Received]) -> bool {
        self.held.is_some() || got.is_empty() || got.iter().any(|r| r.signal == Signal::CHLD)
    }

    /// [`SignalFd::drain`], appended to `out`.
    ///
    /// A read refused (a seccomp profile; anything but EAGAIN) is returned:
    /// a tool reads once before it starts COMMAND, and ends there with 125
    /// and one line naming the call. Should one fail later, the descriptor
    /// stays readable and every wait would return at once to the same
    /// failure: so sleep instead, as a failed wait does (5 ms, doubling to
    /// a second), and the loop never spins.
    pub fn drain_into(&self, out: &mut Vec<Received>) -> io::Result<()> {
        const RECORDS: usize = 4;
        let field = |record: &[u8], at: usize| {
            u32::from_ne_bytes(record[at..at + 4].try_into().expect("4 bytes"))
        };
        let mut buf = [0u8; RECORDS * SIGINFO_SIZE];
        loop {
            let got = match rustix::io::read(&self.fd, &mut buf) {
                Ok(n) => &buf[..n],
                Err(rustix::io::Errno::INTR) => continue,
                Err(rustix::io::Errno::AGAIN) => return Ok(()),
                Err(e) => {
                    let n = self.failures.get();
                    self.failures.set(n.saturating_add(1));
                    if n > 0 {
                        std::thread::sleep(
                            Duration::from_millis(5u64 << (n - 1).min(8))
                                .min(Duration::from_secs(1)),
                        );
                    }
                    return Err(e.into());
                }
            };
            self.failures.set(0);
            // A signalfd returns whole records only.
            for record in got.chunks_exact(SIGINFO_SIZE) {
                let [signo, from, code] =
                    [SSI_SIGNO, SSI_PID, SSI_CODE].map(|at| field(record, at));
                let (from, code) = (from as i32, code as i32);
                if signo == libc::SIGPIPE as u32 && code == libc::SI_USER && from == own_pid() {
                    continue;
                }
                let signal = Signal::from_raw(signo as i32);
                out.extend(signal.map(|signal| Received { signal, from, code }));
            }
            if got.len() < RECORDS * SIGINFO_SIZE {
                return Ok(());
            }
        }
    }
}

/// The size of a `struct signalfd_siginfo`, and where its fields are: the
/// records are read as bytes, so reading them needs no `unsafe`.
const SIGINFO_SIZE: usize = std::mem::size_of::<libc::signalfd_siginfo>();
const SSI_SIGNO: usize = std::mem::offset_of!(libc::signalfd_siginfo, ssi_signo);
const SSI_CODE: usize = std::mem::offset_of!(libc::signalfd_siginfo, ssi_code);
const SSI_PID: usize = std::mem::offset_of!(libc::signalfd_siginfo, ssi_pid);

impl AsFd for SignalFd {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}
