//! The guarantee: the cleanup runs even when the process the supervisor
//! started is SIGKILLed, alone or with its whole process group.
//!
//! reap splits in two at start-up:
//!
//! - the FRONT is the process the supervisor started. It stays where the
//!   supervisor put it (its group, its session), passes the signals meant
//!   for reap on to the back, alone speaks to a service manager (it is the
//!   unit's main process), repeats on itself the terminal's stops of
//!   COMMAND, and finally ends exactly as the back ended (the status the
//!   back said, or the cleanup's it became).
//! - the BACK is the front's child, in a process group of its own (and a
//!   session of its own unless stdin is a terminal), and the child subreaper
//!   that starts and owns COMMAND's tree, sweeps the leftovers and runs the
//!   cleanup.
//!
//! They talk over one link: a pipe each way, both non-blocking and
//! close-on-exec, one 12-byte record type (a kind and a value), each record
//! written whole (atomic below `PIPE_BUF`) and read as it comes.
//!
//! - Front to back: each signal reap receives (its number, its sender), and
//!   [`ANSWER`] (kind 0) once the front has read its signals after the back
//!   said COMMAND's status: everything the front had received by then is
//!   before it in the pipe.
//! - Back to front, in the order of the run: COMMAND's pid; each stop of
//!   COMMAND by the terminal (the front stops the same way, then passes its
//!   CONT on); COMMAND's status (which asks for the answer); the cleanup's
//!   cause, its start time (the front sends `STOPPING=1` on) and its pid;
//!   the stop timeout's extensions, for the front to send on; last,
//!   "finished", with the status the back exits with (none: it became the
//!   cleanup, whose end is reap's; `STOPPING=1` then too).
//!
//! The back fixes REAP_CAUSE only once the front has answered, or is gone:
//! a stop request that reached a paused front before COMMAND ended still
//! counts (the back waits for the answer with no time bound; a front
//! stopped by job control delays the cleanup until `fg` or `bg`).
//!
//! When the other side is gone:
//! - the front's pipe reaches end of file (the back holds no write end of
//!   it): the back kills COMMAND's tree at once and runs the cleanup with
//!   `REAP_CAUSE=lost`. A kill of the front's group cannot reach the back.
//! - the back ends without having said "finished" (an OOM kill, a stray
//!   `kill -9`): the front has kept every record it read, reads the last
//!   ones, and does what the back could not ([`crate::phases::Back::recover`]):
//!   a child subreaper too, it has COMMAND and the back's other orphans, kills
//!   them at once, runs the cleanup with `REAP_CAUSE=lost` unless the back
//!   had started it (then lets it finish), says so on one line and exits 125.
//!
//! A storm of signals can fill the pipe (64 KiB, some 5 000 records) faster
//! than the back empties it. The front then keeps the records it could not
//! write and stops reading its signalfd until the pipe has room again: the
//! signals wait in the kernel meanwhile (realtime ones queued, standard ones
//! pending), so none is lost and the front's memory stays bounded.

use crate::machine::Event;
use crate::outcome::Cause;
use pgkit::error::TOOL_FAILED;
use pgkit::notify::{Leftover, Relay};
use pgkit::sigfd::{Received, SignalFd};
use pgkit::{exit, fork, poll, reap, tty, verbose, Child, Error, SigSet, Signal, Status};
use std::fs::File;
use std::io::{ErrorKind, Read, Write};
use std::os::fd::{AsFd, BorrowedFd};

/// A record, either way: a kind (4 bytes) and a value (8 bytes).
const RECORD: usize = 12;

/// Front to back: the kind of the answer (any other kind is a signal).
const ANSWER: i32 = 0;

/// Back to front, the kinds.
pub const COMMAND: i32 = 1;
pub const STOPPED: i32 = 2;
pub const STATUS: i32 = 3;
const CAUSE: i32 = 4;
/// The cleanup is about to be spawned: its start on CLOCK_MONOTONIC, in ms.
const STARTING: i32 = 5;
pub const CLEANUP: i32 = 6;
/// Extend the unit's stop timeout by the value, in ms.
const EXTEND: i32 = 8;
/// The back is about to exit (the value: its status) or exec the cleanup
/// ([`NO_STATUS`]).
pub const FINISHED: i32 = 9;
const NO_STATUS: i64 = i64::MIN;

const CAUSES: [Cause; 4] = [Cause::Cancel, Cause::Lost, Cause::Signal, Cause::Exit];

/// A status as a record's value: N for an exit, -S for a death by S.
fn encode_status(status: Status) -> i64 {
    match status {
        Status::Exited(n) => n.into(),
        Status::Signaled(s) => (-s.raw()).into(),
    }
}

fn decode_status(value: i64) -> Option<Status> {
    let value = i32::try_from(value).ok()?;
    match value {
        0.. => Some(Status::Exited(value)),
        _ => Signal::from_raw(-value).map(Status::Signaled),
    }
}

/// Each whole record `pipe` holds, read without blocking onto what `buf`
/// kept of the last read (a short read took all there was: no second read
/// only to meet EAGAIN); true once the other side is gone (end of file),
/// and `pipe` then `None`.
fn read_records(pipe: &mut Option<File>, buf: &mut Vec<u8>, mut f: impl FnMut(i32, i64)) -> bool {
    let Some(file) = pipe.as_mut() else {
        return false;
    };
    let mut chunk = [0u8; RECORD * 64];
    let end = loop {
        match file.read(&mut chunk) {
            Ok(0) => break true,
            Ok(n) => {
                buf.extend_from_slice(&chunk[..n]);
                if n < chunk.len() {
                    break false;
                }
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => break e.kind() != ErrorKind::WouldBlock,
        }
    };
    let whole = buf.len() / RECORD * RECORD;
    for rec in buf[..whole].chunks_exact(RECORD) {
        let (kind, value) = rec.split_at(4);
        let kind = i32::from_ne_bytes(kind.try_into().unwrap_or_default());
        let value = i64::from_ne_bytes(value.try_into().unwrap_or_default());
        f(kind, value);
    }
    buf.drain(..whole);
    if end {
        *pipe = None;
    }
    end
}

fn record(kind: i32, value: i64) -> [u8; RECORD] {
    let mut rec = [0u8; RECORD];
    rec[..4].copy_from_slice(&kind.to_ne_bytes());
    rec[4..].copy_from_slice(&value.to_ne_bytes());
    rec
}

/// Which side of the split this process is.
pub enum Split {
    Front(Front),
    /// The back: its link to the front, and its own signalfd (opened, and
    /// emptied, right after it left the front's group).
    Back(Link, SignalFd),
}

/// Fork the back. Errors here are reap's own (125): nothing has started.
/// The back goes to a session of its own or, with a terminal on stdin, to
/// a group of its own in the caller's session, so COMMAND can have the
/// terminal and a background COMMAND still meets job control (reap(1),
/// NOTES).
pub fn split(caught: SigSet) -> Result<Split, Error> {
    let group = tty::is_tty();
    let pipe = || fork::pipe().map_err(|e| Error::sys("create a pipe", e));
    let ((sig_read, sig_write), (news_read, news_write)) = (pipe()?, pipe()?);
    let front_pgid = tty::own_group();
    let front_pid = std::process::id() as i32;
    // If the back dies, its orphans (COMMAND first) come to the front, not
    // to init, and it can still keep the promise. Before the fork, as the
    // front's signalfd: where either is refused, the back's would be too
    // (a seccomp filter is inherited), and the one line is the front's,
    // with nothing started.
    let subreap =
        || reap::become_subreaper().map_err(|e| Error::sys("become a child subreaper", e));
    subreap()?;
    // Read once before the fork: a refused read ends reap here, with
    // nothing started (the back would meet the same refusal). What came
    // already is the front's to hand over, first thing.
    let (signals, early) = pgkit::cli::open_signals(caught)?;
    let Some(back) = fork::fork().map_err(|e| Error::sys("fork the subreaper process", e))? else {
        drop((sig_write, news_read, signals));
        if let Err(e) = fork::leave_group(group) {
            // Still in the front's group: a kill of that group would take
            // the back with it. Say so; carry on regardless.
            let e = pgkit::error::describe(&e);
            pgkit::warn!("unable to leave the caller's process group: {e}");
        }
        let link = Link {
            from_front: Some(File::from(sig_read)),
            to_front: File::from(news_write),
            buf: Vec::with_capacity(RECORD * 64),
            front_pgid,
            front_pid,
            leftover: None,
        };
        // Not inherited through the fork. Refused, the front ends as the
        // back does, without a line of its own.
        let signals = (SignalFd::open(caught).map_err(|e| Error::sys("open a signalfd", e)))
            .and_then(|s| subreap().map(|()| s))
            .inspect_err(|_| link.status(FINISHED, Some(Status::Exited(TOOL_FAILED))))?;
        // A signal pending now was sent to the front's group before we left
        // it: the front got it too and hands it over, so taken here as well
        // it would reach COMMAND twice. Signals meant for the back alone
        // cannot be among them: nobody knew its pid.
        for Received { signal, from, .. } in signals.drain() {
            verbose!(
                "received {signal} from pid {from} before leaving the caller's group: left \
                 to the front"
            );
        }
        return Ok(Split::Back(link, signals));
    };
    drop((sig_read, news_write));
    Ok(Split::Front(Front {
        early,
        signals,
        back,
        to_back: Some(File::from(sig_write)),
        backlog: Vec::with_capacity(16 * RECORD),
        from_back: Some(File::from(news_read)),
        partial: Vec::with_capacity(RECORD * 64),
        news: BackNews::default(),
        answer: false,
        relay: None,
    }))
}

/// What the back told the front of its work, kept as it came.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BackNews {
    /// COMMAND's pid, once started.
    pub command: Option<i32>,
    /// COMMAND's status, once known.
    pub status: Option<Status>,
    /// The cleanup's pid, once started (not with `--exec-cleanup`).
    pub cleanup: Option<i32>,
    /// The back was about to spawn the cleanup (COMMAND's tree was gone by
    /// then), at this time on CLOCK_MONOTONIC in ms: with no pid noted, a
    /// child of the front now is that cleanup, spawned in the instant
    /// before the note.
    pub cleanup_at_ms: Option<u64>,
    /// The REAP_CAUSE the cleanup was started with.
    pub cause: Option<Cause>,
    /// The back is about to exit with this status, or (`Some(None)`) to
    /// become the cleanup: how it then ends is reap's final status.
    pub finished: Option<Option<Status>>,
}

/// The back ended without saying it finished: killed (or crashed). The
/// front carries on with this (see [`crate::phases::Back::recover`]).
pub struct LostBack {
    /// The back's pid (reaped) and how it ended.
    pub pid: i32,
    pub status: Status,
    pub news: BackNews,
}

/// The front: pass signals on, follow job control, end as the back ends.
pub struct Front {
    /// Signals read before the fork, handed over first.
    early: Vec<Received>,
    signals: SignalFd,
    back: Child,
    to_back: Option<File>,
    /// Records for the back that did not fit in the pipe yet.
    backlog: Vec<u8>,
    from_back: Option<File>,
    /// The start of a record from the back, not read whole yet.
    partial: Vec<u8>,
    news: BackNews,
    /// The back said COMMAND's status: read the signals, then answer.
    answer: bool,
    /// COMMAND's notification socket: the front, the unit's main process,
    /// relays it (systemd takes messages from the main pid only).
    relay: Option<Relay>,
}

impl Front {
    /// Pass signals on until the back ends. If it finished, end the same
    /// way (this never returns); if not, return what the front needs to
    /// take over, and its signalfd.
    pub fn run(mut self, relay: Option<Relay>) -> (LostBack, SignalFd, Option<Relay>) {
        self.relay = relay;
        // The back says a failed wait for events on its one line: the same
        // filter refuses the front's.
        poll::quiet_failures();
        verbose!("subreaper process is pid {}", self.back.pid());
        // What the last poll found readable: the back's pidfd (its exit)
        // and its pipe; until a poll says otherwise, both are looked at.
        let (mut back_ready, mut news_ready) = (true, true);
        // The signals read before the fork first.
        let mut received = std::mem::take(&mut self.early);
        loop {
            // While the pipe is full, the signals wait in the kernel.
            if self.backlog.is_empty() {
                self.pass_on(&mut received);
            }
            self.flush();
            if let Some(relay) = self.relay.as_mut() {
                relay.relay();
            }
            let exited = match back_ready.then(|| self.back.try_peek_exit()) {
                Some(Ok(exited)) => exited.inspect(|_| {
                    self.back.reap();
                }),
                Some(Err(e)) => self.ended_unread(&e),
                None => None,
            };
            if let Some(status) = exited {
                // Everything it wrote before it ended is in the pipe.
                self.read_back(false);
                if let Some(said) = self.news.finished {
                    // The socket goes with the relay.
                    drop(self.relay.take());
                    // A back that said the status it exits with is done: a
                    // kill that overtook its exit changes nothing of reap's
                    // end. No status said: it became the cleanup, whose end
                    // is reap's.
                    exit::finish(said.unwrap_or(status));
                }
                let (pid, news) = (self.back.pid(), self.news);
                return (LostBack { pid, status, news }, self.signals, self.relay);
            }
            if news_ready {
                self.read_back(true);
            }
            if self.answer && self.backlog.is_empty() {
                self.pass_on(&mut received);
            }
            self.flush();
            let full = !self.backlog.is_empty();
            let mut fds = poll::Fds::default();
            if !full {
                fds.push(self.signals.as_fd());
            }
            let back_at = self.back.pidfd().map(|fd| fds.push(fd));
            let news_at = self.from_back.as_ref().map(|f| fds.push(f.as_fd()));
            if let Some(r) = self.relay.as_ref() {
                fds.push(r.as_fd());
            }
            let pipe = self.to_back.as_ref().filter(|_| full).map(|f| f.as_fd());
            let ready = poll::wait_all(&fds, pipe.as_slice(), &[], None);
            // Without a pidfd the back's exit is looked for on every wake.
            back_ready = back_at.map_or(true, |i| ready.contains(&i));
            news_ready = news_at.is_some_and(|i| ready.contains(&i));
        }
    }

    /// Read the signalfd and queue each signal for the back, then the
    /// answer if the back asked for it.
    fn pass_on(&mut self, received: &mut Vec<Received>) {
        // A read that fails now waits a while (see drain_into).
        let _ = self.signals.drain_into(received);
        for r in received.drain(..) {
            if r.signal != Signal::CHLD {
                self.hand_over(r);
            }
        }
        if std::mem::take(&mut self.answer) {
            self.backlog.extend_from_slice(&record(ANSWER, 0));
        }
    }

    /// `waitid` is refused (a seccomp profile): the back's status cannot
    /// be read, nor the back reaped (its zombie goes to init once the
    /// front exits). Whether it has ended is in `/proc`; how, in its last
    /// record, the status it exits with. A back that finished without one
    /// (it became the cleanup) ends reap with 125 and one line naming the
    /// call.
    fn ended_unread(&mut self, e: &std::io::Error) -> Option<Status> {
        let pid = self.back.pid();
        if !pgkit::procfs::stat(pid).map_or(true, |p| p.is_zombie()) {
            return None;
        }
        self.read_back(false);
        match self.news.finished {
            Some(Some(status)) => Some(status),
            Some(None) => {
                pgkit::warn!(
                    "unable to wait for the subreaper process (pid {pid}): waitid: {}; its exit \
                     status is lost",
                    pgkit::error::describe(e)
                );
                exit::exit_code(TOOL_FAILED)
            }
            None => Some(Status::Exited(TOOL_FAILED)),
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
                    let n = self.backlog.len() / RECORD;
                    verbose!("{n} signal(s) not passed on: the subreaper no longer reads");
                    self.to_back = None;
                    self.backlog.clear();
                    return;
                }
            }
        }
    }

    /// Pass one received signal on to the back (queued; see [`Front::flush`]).
    fn hand_over(&mut self, r: Received) {
        let (sig, from, back) = (r.signal, r.from, self.back.pid());
        if self.to_back.is_none() {
            verbose!(
                "received {sig} from pid {from}: not passed on (the subreaper no longer reads)"
            );
            return;
        }
        self.backlog
            .extend_from_slice(&record(sig.raw(), from.into()));
        verbose!("received {sig} from pid {from}: handed to pid {back}");
    }

    /// Read what the back has written, without blocking, and keep or act
    /// on each record. `follow`: act on stops — the back says COMMAND was
    /// stopped from the terminal: stop the same way (the shell then sees
    /// its job stopped); once continued, tell the back, which continues
    /// COMMAND. A stop read after the back exited is moot.
    fn read_back(&mut self, follow: bool) {
        let mut stopped = false;
        read_records(&mut self.from_back, &mut self.partial, |kind, value| {
            let news = &mut self.news;
            match kind {
                COMMAND => news.command = i32::try_from(value).ok(),
                STATUS => {
                    news.status = decode_status(value);
                    self.answer = true;
                }
                // Only the back writes here (an index of CAUSES).
                CAUSE => news.cause = CAUSES.get(value as usize).copied(),
                STARTING => news.cleanup_at_ms = u64::try_from(value).ok(),
                CLEANUP => news.cleanup = i32::try_from(value).ok(),
                FINISHED => news.finished = Some(decode_status(value)),
                STOPPED if follow => {
                    let Some(sig) = i32::try_from(value).ok().and_then(Signal::from_raw) else {
                        return;
                    };
                    verbose!("COMMAND stopped by {sig}; stopping too");
                    // A read or write in the background, in an orphaned
                    // group (the stop discarded): COMMAND stays stopped, or
                    // it would stop again at once.
                    stopped |= tty::stop_self(sig) || !tty::is_background_io(sig);
                }
                EXTEND => {
                    if let Some(relay) = &self.relay {
                        relay.extend(u64::try_from(value).unwrap_or(0));
                    }
                }
                _ => {}
            }
            // The cleanup starts, or replaces the back.
            let starting = kind == STARTING || kind == FINISHED && value == NO_STATUS;
            if let Some(relay) = self.relay.as_ref().filter(|_| starting) {
                verbose!("the cleanup starts: STOPPING=1 to the service manager");
                relay.send("STOPPING=1");
            }
        });
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

/// The back's end of the link.
pub struct Link {
    /// The front's pipe, until its end of file.
    from_front: Option<File>,
    to_front: File,
    /// Records of the front's pipe: kept, as the back's other vectors on
    /// the way of a signal.
    buf: Vec<u8>,
    /// The front's process group: the shell's job, which gets the terminal
    /// back while COMMAND is stopped or gone.
    pub front_pgid: i32,
    /// The front's pid (the process the supervisor started).
    pub front_pid: i32,
    /// The socket of COMMAND's notifications, where the front relays them:
    /// it sends the extensions of the stop timeout on (see `Back::extend`),
    /// and the back removes the socket and its directory if the front is
    /// lost (nobody relays any more), or as the cleanup replaces it.
    pub leftover: Option<Leftover>,
}

impl Link {
    /// The descriptor to poll, until the front is gone.
    pub fn fd(&self) -> Option<BorrowedFd<'_>> {
        self.from_front.as_ref().map(|f| f.as_fd())
    }

    /// Read everything there is, without blocking: each signal handed over
    /// and the answer as events, then [`Event::FrontLost`] at end of file.
    pub fn read_into(&mut self, events: &mut Vec<Event>) {
        let lost = read_records(&mut self.from_front, &mut self.buf, |kind, from| {
            let from = i32::try_from(from).unwrap_or_default();
            match Signal::from_raw(kind) {
                _ if kind == ANSWER => events.push(Event::Answered),
                Some(signal) => events.push(Event::Signal(signal, from)),
                None => {}
            }
        });
        if lost {
            if let Some(leftover) = &self.leftover {
                leftover.remove();
            }
            events.push(Event::FrontLost);
        }
    }

    /// One record, written whole; `false` if the front no longer reads.
    pub fn send(&self, kind: i32, value: i64) -> bool {
        let rec = record(kind, value);
        (&self.to_front).write(&rec).is_ok_and(|n| n == RECORD)
    }

    /// The cleanup starts now, with `cause` as its REAP_CAUSE: what a front
    /// that takes over needs to let it finish (its timeout counts from
    /// this start). Said before the spawn: a back killed right after it,
    /// before its pid is said ([`CLEANUP`]), leaves the front a cleanup it must
    /// not run again.
    pub fn cleanup_starting(&self, cause: Cause) {
        let at = CAUSES.iter().position(|&c| c == cause).unwrap_or_default();
        self.send(CAUSE, at as i64);
        let now = pgkit::deadline::monotonic_ms();
        self.send(STARTING, i64::try_from(now).unwrap_or(i64::MAX));
    }

    /// reap needs `ms` more to stop: the front extends the unit's stop
    /// timeout (EXTEND_TIMEOUT_USEC=).
    pub fn extend(&self, ms: u64) {
        self.send(EXTEND, i64::try_from(ms).unwrap_or(i64::MAX));
    }

    /// A status: COMMAND's ([`STATUS`]: the front answers once it has read
    /// its signals), or ([`FINISHED`]) the one the back is about to exit
    /// with, or (`None`) none: it execs the cleanup. From FINISHED on, reap
    /// ends with the status said or, with none, as the back (the cleanup)
    /// ends; not a loss.
    pub fn status(&self, kind: i32, status: Option<Status>) {
        self.send(kind, status.map_or(NO_STATUS, encode_status));
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
        assert_eq!(decode_status(NO_STATUS), None);
    }
}
