//! The guarantee: the cleanup runs even when the process the supervisor
//! started is SIGKILLed, alone or with its whole process group.
//!
//! reap splits in two at start-up:
//!
//! - the FRONT is the process the supervisor started. It stays where the
//!   supervisor put it (its group, its session), receives the signals meant
//!   for reap and hands each one to the back over a pipe, follows job control
//!   when the back asks it to, and finally ends exactly as the back ended
//!   (the back's exit status, or its death signal re-raised).
//! - the BACK is the front's child, in a process group of its own (and a
//!   session of its own unless stdin is a terminal), and the child subreaper
//!   that starts and owns COMMAND's tree, sweeps the leftovers and runs the
//!   cleanup.
//!
//! The back holds the read end of the front's pipe and no write end, so if
//! the front dies — however it dies — the pipe reaches end of file: the back
//! then kills COMMAND's tree at once and runs the cleanup with
//! `REAP_CAUSE=lost`. A kill of the front's group cannot reach the back,
//! which is in another group.
//!
//! Front to back, the pipe carries one 12-byte record per signal (number,
//! sender, `si_code`), written whole (atomic below `PIPE_BUF`). Back to
//! front, a second pipe carries one 4-byte record per stop of COMMAND by the
//! terminal, which the front repeats on itself so the shell sees the job
//! stopped. The front never blocks on either: both ends are non-blocking,
//! and once the back is gone or has become the cleanup (`--exec-cleanup`)
//! the records are dropped, which is what the contract wants then.
//!
//! A storm of signals can fill the pipe (64 KiB, about 5 000 records) faster
//! than the back empties it. The front then keeps the records it could not
//! write and stops reading its signalfd until the pipe has room again: the
//! signals wait in the kernel meanwhile (realtime ones queued, standard ones
//! pending), so none is lost and the front's memory stays bounded.

use pgkit::sigfd::{Received, SignalFd};
use pgkit::{exit, fork, poll, tty, verbose, Child, Error, SigSet, Signal};
use std::fs::File;
use std::io::{ErrorKind, Read, Write};
use std::os::fd::{AsFd, BorrowedFd};

const RECORD: usize = 12;

/// Which side of the split this process is.
pub enum Split {
    Front(Front),
    Back(BackLink, StopChannel),
}

/// Where the back goes: a session of its own, or (stdin is a terminal) a
/// group of its own in the caller's session, so COMMAND can have the
/// terminal and a background COMMAND still meets job control.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Detach {
    Session,
    Group,
}

/// Fork the back. Errors here are reap's own (125): nothing has started.
pub fn split(detach: Detach) -> Result<Split, Error> {
    let (sig_read, sig_write) = fork::pipe().map_err(|e| Error::sys("create a pipe", e))?;
    let (ctl_read, ctl_write) = fork::pipe().map_err(|e| Error::sys("create a pipe", e))?;
    let front_pgid = tty::own_group();
    match fork::fork().map_err(|e| Error::sys("fork the subreaper process", e))? {
        Some(back) => {
            drop((sig_read, ctl_write));
            Ok(Split::Front(Front {
                back,
                to_back: Some(File::from(sig_write)),
                backlog: Vec::new(),
                from_back: Some(File::from(ctl_read)),
            }))
        }
        None => {
            drop((sig_write, ctl_read));
            let moved = match detach {
                Detach::Session => fork::new_session(),
                Detach::Group => fork::new_group(),
            };
            if let Err(e) = moved {
                // Still in the front's group: a kill of that group would
                // take the back with it. Say so; carry on regardless.
                pgkit::warn!("unable to leave the caller's process group: {e}");
            }
            Ok(Split::Back(
                BackLink {
                    from_front: Some(File::from(sig_read)),
                    buf: Vec::new(),
                },
                StopChannel {
                    to_front: File::from(ctl_write),
                    front_pgid,
                },
            ))
        }
    }
}

/// The front: hand signals to the back, follow job control, end as it ends.
pub struct Front {
    back: Child,
    to_back: Option<File>,
    /// Records for the back that did not fit in the pipe yet.
    backlog: Vec<u8>,
    from_back: Option<File>,
}

impl Front {
    pub fn run(mut self, caught: SigSet) -> ! {
        let signals =
            SignalFd::open(caught).unwrap_or_else(|e| Error::sys("open a signalfd", e).exit());
        verbose!("subreaper process is pid {}", self.back.pid());
        loop {
            // While the pipe is full, the signals wait in the kernel.
            if self.backlog.is_empty() {
                for received in signals.drain() {
                    if received.signal != Signal::CHLD {
                        self.hand_over(received);
                    }
                }
            }
            self.flush();
            if let Some(status) = self.back.poll_exit() {
                self.back.reap();
                exit::finish(status);
            }
            self.follow_stops();
            self.flush();
            let full = !self.backlog.is_empty();
            let mut fds = Vec::new();
            if !full {
                fds.push(signals.as_fd());
            }
            fds.extend(self.back.pidfd());
            fds.extend(self.from_back.as_ref().map(|f| f.as_fd()));
            let pipe = self.to_back.as_ref().filter(|_| full).map(|f| f.as_fd());
            if let Err(e) = poll::wait_io(&fds, pipe.as_slice(), None) {
                pgkit::warn!("poll failed: {e}");
            }
        }
    }

    /// Write what the pipe takes of the backlog; keep the rest.
    fn flush(&mut self) {
        let Some(pipe) = self.to_back.as_mut() else {
            self.backlog.clear();
            return;
        };
        while !self.backlog.is_empty() {
            match pipe.write(&self.backlog) {
                Ok(0) => return,
                Ok(n) => drop(self.backlog.drain(..n)),
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) if e.kind() == ErrorKind::WouldBlock => return,
                Err(_) => {
                    // The back exited or became the cleanup: nobody reads
                    // any more, and each write would raise SIGPIPE again.
                    verbose!(
                        "{} signal(s) not passed on: the subreaper no longer reads",
                        self.backlog.len() / RECORD
                    );
                    self.to_back = None;
                    self.backlog.clear();
                    return;
                }
            }
        }
    }

    /// Pass one received signal on to the back (queued; see [`Front::flush`]).
    fn hand_over(&mut self, r: Received) {
        if self.to_back.is_none() {
            verbose!(
                "received {} from pid {}: not passed on (the subreaper no longer reads)",
                r.signal,
                r.from
            );
            return;
        }
        let mut record = [0u8; RECORD];
        record[0..4].copy_from_slice(&r.signal.raw().to_ne_bytes());
        record[4..8].copy_from_slice(&r.from.to_ne_bytes());
        record[8..12].copy_from_slice(&r.code.to_ne_bytes());
        self.backlog.extend_from_slice(&record);
        verbose!(
            "received {} from pid {}: handed to pid {}",
            r.signal,
            r.from,
            self.back.pid()
        );
    }

    /// The back says COMMAND was stopped from the terminal: stop the same
    /// way (the shell then sees its job stopped); once continued, tell the
    /// back, which continues COMMAND.
    fn follow_stops(&mut self) {
        let Some(pipe) = self.from_back.as_mut() else {
            return;
        };
        let mut buf = [0u8; 64];
        let (n, eof) = match pipe.read(&mut buf) {
            Ok(0) => (0, true),
            Ok(n) => (n, false),
            Err(e) if e.kind() == ErrorKind::WouldBlock || e.kind() == ErrorKind::Interrupted => {
                return
            }
            Err(_) => (0, true),
        };
        if eof {
            self.from_back = None;
            return;
        }
        let mut stopped = false;
        for chunk in buf[..n].chunks_exact(4) {
            let raw = i32::from_ne_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]);
            if let Some(sig) = Signal::from_raw(raw) {
                verbose!("COMMAND stopped by {sig}; stopping too");
                tty::stop_self(sig);
                stopped = true;
            }
        }
        if stopped {
            verbose!("continued; continuing COMMAND");
            // As if sent by the front itself, so the back's log names it.
            self.hand_over(Received {
                signal: Signal::CONT,
                from: std::process::id() as i32,
                code: 0,
            });
        }
    }
}

/// The back's end of the front's pipe: signals handed over, and the
/// front's death.
pub struct BackLink {
    from_front: Option<File>,
    buf: Vec<u8>,
}

/// What the front's pipe brought.
pub struct FromFront {
    pub signals: Vec<Received>,
    /// End of file: the front is gone.
    pub lost: bool,
}

impl BackLink {
    /// The descriptor to poll, until the front is gone.
    pub fn fd(&self) -> Option<BorrowedFd<'_>> {
        self.from_front.as_ref().map(|f| f.as_fd())
    }

    /// Read everything there is, without blocking.
    pub fn read(&mut self) -> FromFront {
        let mut out = FromFront {
            signals: Vec::new(),
            lost: false,
        };
        let Some(pipe) = self.from_front.as_mut() else {
            return out;
        };
        let mut chunk = [0u8; RECORD * 64];
        loop {
            match pipe.read(&mut chunk) {
                Ok(0) => {
                    out.lost = true;
                    self.from_front = None;
                    break;
                }
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(_) => {
                    out.lost = true;
                    self.from_front = None;
                    break;
                }
            }
        }
        let whole = self.buf.len() / RECORD * RECORD;
        for rec in self.buf[..whole].chunks_exact(RECORD) {
            let int = |i: usize| i32::from_ne_bytes([rec[i], rec[i + 1], rec[i + 2], rec[i + 3]]);
            if let Some(signal) = Signal::from_raw(int(0)) {
                out.signals.push(Received {
                    signal,
                    from: int(4),
                    code: int(8),
                });
            }
        }
        self.buf.drain(..whole);
        out
    }
}

/// The back's way to ask the front to stop as COMMAND stopped.
pub struct StopChannel {
    to_front: File,
    /// The front's process group: the shell's job, which gets the terminal
    /// back while COMMAND is stopped or gone.
    pub front_pgid: i32,
}

impl StopChannel {
    pub fn stop_front(&mut self, sig: Signal) -> bool {
        self.to_front
            .write(&sig.raw().to_ne_bytes())
            .is_ok_and(|n| n == 4)
    }
}
