//! The tool's one source of signals: a `signalfd` over the blocked set.
//!
//! Why not handlers and a self-pipe: a pipe collapses repeats, while the
//! `signalfd` returns one record per queued realtime signal (so each one sent
//! to the tool is passed on), and each record names the sender, which `-v`
//! prints and `reap` uses to tell who asked it to stop.

use crate::signal::{SigSet, Signal};
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};

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
}

impl SignalFd {
    /// Open a `signalfd` for `set`. The signals must already be blocked
    /// (`startup` blocks them before `main`).
    pub fn open(set: SigSet) -> io::Result<SignalFd> {
        Ok(SignalFd {
            fd: crate::sigraw::signalfd(set)?,
        })
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
        let me = std::process::id();
        const RECORDS: usize = 16;
        let mut out = Vec::new();
        let size = std::mem::size_of::<libc::signalfd_siginfo>();
        loop {
            // Not zeroed first (2 KiB per wake-up): only what the kernel
            // wrote is read.
            let mut buf = std::mem::MaybeUninit::<[libc::signalfd_siginfo; RECORDS]>::uninit();
            // SAFETY: `buf` is writable for its whole size.
            let n =
                unsafe { libc::read(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), size * RECORDS) };
            if n <= 0 {
                if n < 0 && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return out;
            }
            let got = n as usize / size;
            // SAFETY: the kernel wrote `n` bytes from the start of `buf`:
            // whole records (a signalfd never returns part of one), `got`
            // of them, each plain old data.
            let records = unsafe {
                std::slice::from_raw_parts(buf.as_ptr().cast::<libc::signalfd_siginfo>(), got)
            };
            out.reserve(got);
            for info in records {
                let own_pipe = info.ssi_signo == libc::SIGPIPE as u32
                    && info.ssi_pid == me
                    && info.ssi_code == libc::SI_USER;
                if own_pipe {
                    continue;
                }
                if let Some(signal) = Signal::from_raw(info.ssi_signo as i32) {
                    out.push(Received {
                        signal,
                        from: info.ssi_pid as i32,
                        code: info.ssi_code,
                    });
                }
            }
            if got < RECORDS {
                return out;
            }
        }
    }
}

impl AsFd for SignalFd {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}
