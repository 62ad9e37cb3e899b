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
//! The other way round, the front is a child subreaper too: if the back
//! dies without having said it finished (an OOM kill, a stray `kill -9`),
//! COMMAND and the rest of the back's orphans are re-parented to the front,
//! not to init, and the front does what the back could not (phases.rs,
//! [`crate::phases::Back::recover`]): it kills COMMAND's tree at once, runs
//! the cleanup with `REAP_CAUSE=lost` unless the back had started it, says
//! so on one line and exits 125.
//!
//! Front to back, the pipe carries one 12-byte record per signal (number,
//! sender, `si_code`), written whole (atomic below `PIPE_BUF`). Back to
//! front, a second pipe carries 8-byte records (tag, value) for what the
//! front must act on at once: each stop of COMMAND by the terminal, which
//! the front repeats on itself so the shell sees the job stopped, the
//! start of the cleanup (STOPPING=1 to a service manager), and how long
//! reap still needs to stop (EXTEND_TIMEOUT_USEC=, the value in ms). The front never
//! blocks on either: both ends are non-blocking, and once the back is gone
//! or has become the cleanup (`--exec-cleanup`) the records are dropped,
//! which is what the contract wants then.
//!
//! What the front needs only once the back has ended — COMMAND's pid once
//! started, its status once reaped, the cleanup's pid once started,
//! "finished" right before the back exits or execs the cleanup — the back
//! leaves on a shared page ([`pgkit::board`]) instead: writing it wakes
//! nobody, so a start and an exit of COMMAND cost the front no wake-up.
//!
//! A storm of signals can fill the pipe (64 KiB, about 5 000 records) faster
//! than the back empties it. The front then keeps the records it could not
//! write and stops reading its signalfd until the pipe has room again: the
//! signals wait in the kernel meanwhile (realtime ones queued, standard ones
//! pending), so none is lost and the front's memory stays bounded.

use crate::outcome::Cause;
use crate::phases::KEPT;
use pgkit::board::Board;
use pgkit::error::TOOL_FAILED;
use pgkit::notify::Relay;
use pgkit::sigfd::{Received, SignalFd};
use pgkit::{exit, fork, poll, reap, tty, verbose, Child, Error, SigSet, Signal, Status};
use std::fs::File;
use std::io::{ErrorKind, Read, Write};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::rc::Rc;

/// A signal record, front to back.
const RECORD: usize = 12;
/// A record back to front: tag, value.
const NEWS: usize = 8;

/// The tags of the back's records.
const STOPPED: u32 = 1;
const STOPPING: u32 = 2;
/// Extend the unit's stop timeout by the value, in ms.
const EXTEND: u32 = 3;

/// The slots of the board, each written once by the back.
#[derive(Clone, Copy)]
enum Slot {
    /// COMMAND's pid, once started.
    Command,
    /// COMMAND's status ([`encode_status`]), once known.
    Status,
    /// The cleanup's pid, once started.
    Cleanup,
    /// The cleanup's start on CLOCK_MONOTONIC, in ms: low and high words.
    CleanupAtLow,
    CleanupAtHigh,
    /// REAP_CAUSE as the cleanup got it ([`encode_cause`]).
    Cause,
    /// The cleanup is about to be spawned (set before, its pid after).
    Starting,
    /// The back is about to exit or exec the cleanup.
    Finished,
    /// The status the back exits with ([`encode_status`]), written right
    /// before: where `waitid` is refused the front still ends as it did.
    Exit,
}

impl Slot {
    fn at(self) -> usize {
        self as usize
    }
}

// Every slot on the board: a slot past its end would be dropped unsaid.
const _: () = assert!((Slot::Exit as usize) < pgkit::board::SLOTS);

/// Which side of the split this process is.
pub enum Split {
    Front(Front),
    /// The back: the front's pipe, the way to the front, and the back's own
    /// signalfd (opened, and emptied, right after it left the front's group).
    Back(BackLink, ToFront, SignalFd),
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
pub fn split(detach: Detach, caught: SigSet) -> Result<Split, Error> {
    let (sig_read, sig_write) = fork::pipe().map_err(|e| Error::sys("create a pipe", e))?;
    let (ctl_read, ctl_write) = fork::pipe().map_err(|e| Error::sys("create a pipe", e))?;
    let board = Board::new().map_err(|e| Error::sys("map a page for the subreaper process", e))?;
    let front_pgid = tty::own_group();
    let front_pid = std::process::id() as i32;
    // If the back dies, its orphans (COMMAND first) come to the front, not
    // to init, and it can still keep the promise. Before the fork, as the
    // front's signalfd: where either is refused, the back's would be too
    // (a seccomp filter is inherited), and the one line is the front's,
    // with nothing started.
    reap::become_subreaper().map_err(|e| Error::sys("become a child subreaper", e))?;
    let front_signals = SignalFd::open(caught).map_err(|e| Error::sys("open a signalfd", e))?;
    // Read once before the fork: a refused read ends reap here, with
    // nothing started (the back would meet the same refusal). What came
    // already is the front's to hand over, first thing.
    let mut early = Vec::with_capacity(KEPT);
    front_signals
        .drain_into(&mut early)
        .map_err(|e| Error::sys("read its signalfd", e))?;
    match fork::fork().map_err(|e| Error::sys("fork the subreaper process", e))? {
        Some(back) => {
            drop(sig_read);
            Ok(Split::Front(Front {
                early,
                signals: Some(front_signals),
                back,
                to_back: Some(File::from(sig_write)),
                backlog: Vec::new(),
                from_back: Some(File::from(ctl_read)),
                _hold: ctl_write,
                partial: Vec::new(),
                board,
                relay: None,
            }))
        }
        None => {
            drop((sig_write, ctl_read, front_signals));
            let moved = match detach {
                Detach::Session => fork::new_session(),
                Detach::Group => fork::new_group(),
            };
            if let Err(e) = moved {
                // Still in the front's group: a kill of that group would
                // take the back with it. Say so; carry on regardless.
                pgkit::warn!(
                    "unable to leave the caller's process group: {}",
                    pgkit::error::describe(&e)
                );
            }
            let signals = SignalFd::open(caught).map_err(|e| {
                // The front ends as the back does, without a line of its own.
                board.set(Slot::Exit.at(), encode_status(Status::Exited(TOOL_FAILED)));
                board.set(Slot::Finished.at(), 1);
                Error::sys("open a signalfd", e)
            })?;
            // A signal pending now was sent to the front's group before we
            // left it: the front got it too and hands it over, so taken
            // here as well it would reach COMMAND twice. Signals meant for
            // the back alone cannot be among them: nobody knew its pid.
            for r in signals.drain() {
                verbose!(
                    "received {} from pid {} before leaving the caller's group: \
                     left to the front",
                    r.signal,
                    r.from
                );
            }
            Ok(Split::Back(
                BackLink {
                    from_front: Some(File::from(sig_read)),
                    // Records of the front's pipe: kept, as the back's
                    // other vectors on the way of a signal.
                    buf: Vec::with_capacity(RECORD * 64),
                },
                ToFront {
                    to_front: Rc::new(File::from(ctl_write)),
                    board: Rc::new(board),
                    front_pgid,
                    front_pid,
                    relays: false,
                },
                signals,
            ))
        }
    }
}

/// What the back told the front about its work.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BackNews {
    /// COMMAND's pid, once started.
    pub command: Option<i32>,
    /// COMMAND's status, once reaped (the back reaps it after the sweep).
    pub status: Option<Status>,
    /// The cleanup's pid, once started (not with `--exec-cleanup`).
    pub cleanup: Option<i32>,
    /// The back was about to spawn the cleanup (COMMAND's tree was gone
    /// by then): with no pid noted, a child of the front now is that
    /// cleanup, spawned in the instant before the note.
    pub cleanup_starting: bool,
    /// When the cleanup started, on CLOCK_MONOTONIC in ms ([`pgkit::deadline::monotonic_ms`]).
    pub cleanup_at_ms: Option<u64>,
    /// The REAP_CAUSE the cleanup was started with.
    pub cause: Option<Cause>,
    /// The back is about to exit, or to become the cleanup: how it then
    /// ends is reap's final status.
    pub finished: bool,
}

impl BackNews {
    fn from_board(board: &Board) -> BackNews {
        BackNews {
            command: board.get(Slot::Command.at()),
            status: board.get(Slot::Status.at()).and_then(decode_status),
            cleanup: board.get(Slot::Cleanup.at()),
            cleanup_starting: board.get(Slot::Starting.at()).is_some(),
            cleanup_at_ms: board
                .get(Slot::CleanupAtLow.at())
                .zip(board.get(Slot::CleanupAtHigh.at()))
                .map(|(low, high)| u64::from(low as u32) | u64::from(high as u32) << 32),
            cause: board.get(Slot::Cause.at()).and_then(decode_cause),
            finished: board.get(Slot::Finished.at()).is_some(),
        }
    }
}

/// The back ended without saying it finished: killed (or crashed). The
/// front carries on with this (see [`crate::phases::Back::recover`]).
pub struct LostBack {
    /// The back's pid (reaped) and how it ended.
    pub pid: i32,
    pub status: Status,
    pub news: BackNews,
}

/// The front: hand signals to the back, follow job control, end as it ends.
pub struct Front {
    /// Signals read before the fork, handed over first.
    early: Vec<Received>,
    back: Child,
    /// Opened before the fork (see [`split`]); taken by [`Front::run`].
    signals: Option<SignalFd>,
    to_back: Option<File>,
    /// Records for the back that did not fit in the pipe yet.
    backlog: Vec<u8>,
    from_back: Option<File>,
    /// A write end of the back's pipe, never written: the pipe then never
    /// reaches end of file, which the back's exit would otherwise signal
    /// to `poll` a moment before its pidfd, as a wake-up of its own. The
    /// pidfd (or SIGCHLD) says when the back has ended.
    _hold: OwnedFd,
    /// The start of a record from the back, not read whole yet.
    partial: Vec<u8>,
    /// What the back has left for us (read once it has ended).
    board: Board,
    /// COMMAND's notification socket: the front, the unit's main process,
    /// relays it (systemd takes messages from the main pid only).
    relay: Option<Relay>,
}

impl Front {
    /// Relay until the back ends. If it finished, end the same way (this
    /// never returns); if not, return what the front needs to take over,
    /// and its signalfd.
    pub fn run(
        mut self,
        caught: SigSet,
        relay: Option<Relay>,
    ) -> (LostBack, SignalFd, Option<Relay>) {
        self.relay = relay;
        let signals = match self.signals.take() {
            Some(signals) => signals,
            None => {
                SignalFd::open(caught).unwrap_or_else(|e| Error::sys("open a signalfd", e).exit())
            }
        };
        // The back says a failed wait for events on its one line: the same
        // filter refuses the front's.
        poll::quiet_failures();
        verbose!("subreaper process is pid {}", self.back.pid());
        // What the last poll found readable: the back's pidfd (its exit)
        // and its pipe; until a poll says otherwise, both are looked at.
        // On the path of every signal, the two calls that would find
        // nothing are left out.
        let (mut back_ready, mut news_ready) = (true, true);
        // Kept from wake to wake, so that the way of a signal allocates
        // nothing, and written once now: after the fork the first write to
        // a page the back still shares is a copy-on-write fault, which
        // would come on the way of the first signal.
        let mut ready = Vec::with_capacity(8);
        let none = Received {
            signal: Signal::CHLD,
            from: 0,
            code: 0,
        };
        let mut received = vec![none; KEPT];
        received.clear();
        received.append(&mut self.early);
        self.backlog.resize(KEPT * RECORD, 0);
        self.backlog.clear();
        loop {
            // While the pipe is full, the signals wait in the kernel.
            if self.backlog.is_empty() {
                // A read that fails now waits a while (see drain_into).
                let _ = signals.drain_into(&mut received);
                for r in received.drain(..) {
                    if r.signal != Signal::CHLD {
                        self.hand_over(r);
                    }
                }
            }
            self.flush();
            if let Some(relay) = self.relay.as_mut() {
                relay.relay();
            }
            let exited = if back_ready {
                match self.back.try_peek_exit() {
                    Ok(exited) => exited.map(|s| (s, true)),
                    Err(e) => self.ended_unread(&e).map(|s| (s, false)),
                }
            } else {
                None
            };
            if let Some((status, read)) = exited {
                if read {
                    self.back.reap();
                }
                // Everything it wrote before it ended is in the pipe, and
                // on the board.
                self.read_back(false);
                let news = BackNews::from_board(&self.board);
                if news.finished {
                    // The socket goes with the relay.
                    drop(self.relay.take());
                    // A back that said the status it exits with is done:
                    // a kill that overtook its exit (a slow machine, a
                    // stray `kill -9`) changes nothing of reap's end. No
                    // status said: it became the cleanup, whose end is
                    // reap's.
                    let said = self.board.get(Slot::Exit.at()).and_then(decode_status);
                    exit::finish(said.unwrap_or(status));
                }
                let lost = LostBack {
                    pid: self.back.pid(),
                    status,
                    news,
                };
                return (lost, signals, self.relay.take());
            }
            if news_ready {
                self.read_back(true);
            }
            self.flush();
            let full = !self.backlog.is_empty();
            let mut fds = poll::Fds::new(signals.as_fd());
            if !full {
                fds.push(signals.as_fd());
            }
            let back_at = self.back.pidfd().map(|fd| fds.push(fd));
            let news_at = self.from_back.as_ref().map(|f| fds.push(f.as_fd()));
            if let Some(r) = self.relay.as_ref() {
                fds.push(r.as_fd());
            }
            let pipe = self.to_back.as_ref().filter(|_| full).map(|f| f.as_fd());
            poll::wait_io(&fds, pipe.as_slice(), None, &mut ready);
            // Without a pidfd the back's exit is looked for on every wake.
            back_ready = back_at.map_or(true, |i| ready.contains(&i));
            news_ready = news_at.is_some_and(|i| ready.contains(&i));
        }
    }

    /// `waitid` is refused (a seccomp profile): the back's status cannot
    /// be read, nor the back reaped (its zombie goes to init once the
    /// front exits). Whether it has ended is in `/proc`; how, on the
    /// board, where it wrote its exit status before it exited. A back
    /// that finished without leaving one (it became the cleanup) ends
    /// reap with 125 and one line naming the call.
    fn ended_unread(&mut self, e: &std::io::Error) -> Option<Status> {
        let pid = self.back.pid();
        if !pgkit::procfs::stat(pid).map_or(true, |p| p.is_zombie()) {
            return None;
        }
        let news = BackNews::from_board(&self.board);
        let exit = self.board.get(Slot::Exit.at()).and_then(decode_status);
        match exit {
            Some(status) if news.finished => Some(status),
            _ if news.finished => {
                pgkit::warn!(
                    "unable to wait for the subreaper process (pid {pid}): waitid: {}; its exit \
                     status is lost",
                    pgkit::error::describe(e)
                );
                exit::exit_code(pgkit::error::TOOL_FAILED)
            }
            _ => Some(Status::Exited(pgkit::error::TOOL_FAILED)),
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

    /// Read what the back has written, without blocking (the pipe never
    /// reaches end of file: we hold a write end). `follow`: act on stops — the back
    /// says COMMAND was stopped from the terminal: stop the same way (the
    /// shell then sees its job stopped); once continued, tell the back,
    /// which continues COMMAND. A stop read after the back exited is moot.
    fn read_back(&mut self, follow: bool) {
        let mut stopped = false;
        while let Some(pipe) = self.from_back.as_mut() {
            let mut buf = [0u8; NEWS * 16];
            let n = match pipe.read(&mut buf) {
                Ok(n) if n > 0 => n,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                _ => {
                    self.from_back = None;
                    break;
                }
            };
            self.partial.extend_from_slice(&buf[..n]);
            let whole = self.partial.len() / NEWS * NEWS;
            let records: Vec<[u8; NEWS]> = self.partial[..whole]
                .chunks_exact(NEWS)
                .map(|c| c.try_into().unwrap_or([0; NEWS]))
                .collect();
            self.partial.drain(..whole);
            for rec in records {
                let tag = u32::from_ne_bytes([rec[0], rec[1], rec[2], rec[3]]);
                let value = i32::from_ne_bytes([rec[4], rec[5], rec[6], rec[7]]);
                match tag {
                    STOPPED => match Signal::from_raw(value) {
                        Some(sig) if follow => {
                            verbose!("COMMAND stopped by {sig}; stopping too");
                            // A read or write in the background, in an
                            // orphaned group (the stop discarded): COMMAND
                            // stays stopped, or it would stop again at once.
                            let background_io = sig == Signal::TTIN || sig == Signal::TTOU;
                            stopped |= tty::stop_self(sig) || !background_io;
                        }
                        _ => {}
                    },
                    STOPPING => {
                        if let Some(relay) = &self.relay {
                            verbose!("the cleanup starts: STOPPING=1 to the service manager");
                            relay.send("STOPPING=1");
                        }
                    }
                    EXTEND => {
                        if let Some(relay) = &self.relay {
                            relay.extend(u64::try_from(value).unwrap_or(0));
                        }
                    }
                    _ => {}
                }
            }
            if n < buf.len() {
                break;
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

fn encode_cause(cause: Cause) -> i32 {
    match cause {
        Cause::Cancel => 1,
        Cause::Lost => 2,
        Cause::Signal => 3,
        Cause::Exit => 4,
    }
}

fn decode_cause(value: i32) -> Option<Cause> {
    Some(match value {
        1 => Cause::Cancel,
        2 => Cause::Lost,
        3 => Cause::Signal,
        4 => Cause::Exit,
        _ => return None,
    })
}

/// A status as one record value: N for an exit, -S for a death by S.
fn encode_status(status: Status) -> i32 {
    match status {
        Status::Exited(n) => n,
        Status::Signaled(s) => -s.raw(),
    }
}

fn decode_status(value: i32) -> Option<Status> {
    if value >= 0 {
        Some(Status::Exited(value))
    } else {
        Signal::from_raw(-value).map(Status::Signaled)
    }
}

/// The back's end of the front's pipe: signals handed over, and the
/// front's death.
pub struct BackLink {
    from_front: Option<File>,
    buf: Vec<u8>,
}

impl BackLink {
    /// The descriptor to poll, until the front is gone.
    pub fn fd(&self) -> Option<BorrowedFd<'_>> {
        self.from_front.as_ref().map(|f| f.as_fd())
    }

    /// Read everything there is, without blocking: the signals handed
    /// over go into `signals`; true if the front is gone (end of file).
    pub fn read_into(&mut self, signals: &mut Vec<Received>) -> bool {
        let mut lost = false;
        let Some(pipe) = self.from_front.as_mut() else {
            return lost;
        };
        let mut chunk = [0u8; RECORD * 64];
        loop {
            match pipe.read(&mut chunk) {
                Ok(0) => {
                    lost = true;
                    self.from_front = None;
                    break;
                }
                Ok(n) => {
                    self.buf.extend_from_slice(&chunk[..n]);
                    // A short read took all the pipe held: no second read
                    // just to meet EAGAIN (what comes later wakes the poll).
                    if n < chunk.len() {
                        break;
                    }
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(_) => {
                    lost = true;
                    self.from_front = None;
                    break;
                }
            }
        }
        let whole = self.buf.len() / RECORD * RECORD;
        for rec in self.buf[..whole].chunks_exact(RECORD) {
            let int = |i: usize| i32::from_ne_bytes([rec[i], rec[i + 1], rec[i + 2], rec[i + 3]]);
            if let Some(signal) = Signal::from_raw(int(0)) {
                signals.push(Received {
                    signal,
                    from: int(4),
                    code: int(8),
                });
            }
        }
        self.buf.drain(..whole);
        lost
    }
}

/// The back's way to the front: COMMAND's and the cleanup's progress, and
/// the request to stop as COMMAND stopped. Cloned, it is the same pipe.
#[derive(Clone)]
pub struct ToFront {
    to_front: Rc<File>,
    board: Rc<Board>,
    /// The front's process group: the shell's job, which gets the terminal
    /// back while COMMAND is stopped or gone.
    pub front_pgid: i32,
    /// The front's pid (the process the supervisor started).
    pub front_pid: i32,
    /// The front relays COMMAND's notification socket (see [`ToFront::stopping`]).
    pub relays: bool,
}

impl ToFront {
    /// One record, written whole; `false` if the front no longer reads.
    fn send(&self, tag: u32, value: i32) -> bool {
        let mut record = [0u8; NEWS];
        record[0..4].copy_from_slice(&tag.to_ne_bytes());
        record[4..8].copy_from_slice(&value.to_ne_bytes());
        (&*self.to_front).write(&record).is_ok_and(|n| n == NEWS)
    }

    pub fn stop_front(&self, sig: Signal) -> bool {
        self.send(STOPPED, sig.raw())
    }

    pub fn command_started(&self, pid: i32) {
        self.board.set(Slot::Command.at(), pid);
    }

    pub fn command_status(&self, status: Status) {
        self.board.set(Slot::Status.at(), encode_status(status));
    }

    /// The cleanup starts now, with `cause` as its REAP_CAUSE: what a
    /// front that takes over needs to let it finish (its timeout counts
    /// from this start). Said before the spawn: a back killed right after
    /// it, before [`ToFront::cleanup_started`], leaves the front a cleanup
    /// it must not run again.
    pub fn cleanup_starting(&self, cause: Cause) {
        let at = pgkit::deadline::monotonic_ms();
        self.board.set(Slot::CleanupAtLow.at(), at as u32 as i32);
        self.board
            .set(Slot::CleanupAtHigh.at(), (at >> 32) as u32 as i32);
        self.board.set(Slot::Cause.at(), encode_cause(cause));
        // Last: a front that reads the mark reads the rest too (each set is
        // a release, each get an acquire).
        self.board.set(Slot::Starting.at(), 1);
    }

    /// The cleanup was spawned: its pid.
    pub fn cleanup_started(&self, pid: i32) {
        self.board.set(Slot::Cleanup.at(), pid);
    }

    /// The cleanup starts: the front sends `STOPPING=1` to the service
    /// manager (it is the unit's main process).
    pub fn stopping(&self) {
        // Without a service manager to tell, there is no reason to wake the
        // front.
        if self.relays {
            self.send(STOPPING, 0);
        }
    }

    /// reap needs `ms` more to stop: the front extends the unit's stop
    /// timeout (EXTEND_TIMEOUT_USEC=).
    pub fn extend(&self, ms: u64) {
        if self.relays {
            self.send(EXTEND, i32::try_from(ms).unwrap_or(i32::MAX));
        }
    }

    /// Right before the back exits (after [`ToFront::exiting`]), or execs
    /// the cleanup: from now on reap ends with the status the back said,
    /// or, having said none, as the back (the cleanup) ends; not a loss.
    pub fn finished(&self) {
        self.board.set(Slot::Finished.at(), 1);
    }

    /// The status the back is about to exit with.
    pub fn exiting(&self, status: Status) {
        self.board.set(Slot::Exit.at(), encode_status(status));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_records() {
        for s in [
            Status::Exited(0),
            Status::Exited(255),
            Status::Signaled(Signal::KILL),
            Status::Signaled(Signal::TERM),
        ] {
            assert_eq!(decode_status(encode_status(s)), Some(s));
        }
    }
}
