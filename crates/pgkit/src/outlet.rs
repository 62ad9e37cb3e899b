//! The cleanup's stdout and stderr, kept writable when the caller stops
//! reading.
//!
//! A CI agent reads a job's output through a pipe, and once it has killed
//! the job it closes that pipe. A cleanup that inherited the pipe would die
//! of SIGPIPE at its next line (or fail with EPIPE where SIGPIPE is
//! ignored): the very cleanup the tool exists to run. Only a pipe or a
//! socket can close under a writer; a terminal, a file or `/dev/null`
//! cannot, and those the cleanup gets as they are.
//!
//! So where stdout or stderr is a pipe or a socket, the cleanup writes to a
//! pipe of ours instead (one pipe for both when they are the same file, so
//! their lines keep their order), and the tool's loop copies what comes
//! through to the caller's stream for as long as someone reads it; once no
//! one does, what comes is read and dropped, and the cleanup goes on as if
//! it were still read. The copy never blocks the tool: it writes through an
//! open file description of its own (the pipe opened again through
//! `/proc/self/fd`, non-blocking: the caller's and COMMAND's stay as they
//! are), or to a socket with `MSG_DONTWAIT`; while the reader is slow the
//! tool stops reading, so the cleanup waits at its full pipe as it would at
//! the caller's. What it costs: the cleanup's stdout and stderr are pipes
//! (not the caller's socket), stdout's lines and stderr's may interleave
//! otherwise when they go to two different readers, and where `/proc` is
//! not there to reopen a pipe that stream is not relayed (the cleanup gets
//! the caller's, as without this).
//!
//! The pipes are made before reap splits in two, so its front holds them
//! too: a back lost while the cleanup runs leaves the copy to the front,
//! which carries on, and a front that runs the cleanup itself (the back was
//! lost before it) gives it the same pipes. No end of file is waited for:
//! at the end what the pipes hold is read until they are empty.

use rustix::event::{PollFd, PollFlags};
use rustix::fs::{fstat, FileType, Mode, OFlags};
use rustix::io::Errno;
use rustix::net::SendFlags;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};

/// What one read moves at most.
const CHUNK: usize = 16 * 1024;

/// Where a stream's bytes go.
enum Into {
    /// The caller's pipe, through a non-blocking description of our own.
    Pipe(OwnedFd),
    /// The caller's socket (its descriptor number), written with
    /// `MSG_DONTWAIT` and `MSG_NOSIGNAL`.
    Socket(RawFd),
    /// No one reads any more: dropped.
    Gone,
}

/// One of the cleanup's streams (or both, when they are one file).
struct Stream {
    /// The descriptors of the caller it stands for (1, 2, or both).
    targets: Vec<RawFd>,
    /// Our pipe: read end (non-blocking), write end until the cleanup has it.
    from: OwnedFd,
    to_cleanup: Option<OwnedFd>,
    into: Option<Into>,
    /// Read, not yet written.
    pending: Vec<u8>,
    /// The read end reached end of file.
    ended: bool,
}

/// The cleanup's relayed streams.
pub struct Outlet {
    streams: Vec<Stream>,
}

/// Whether `fd` is a pipe (or FIFO) or a socket: what can lose its reader.
fn can_close(fd: BorrowedFd<'_>) -> Option<(FileType, u64, u64)> {
    let st = fstat(fd).ok()?;
    let kind = FileType::from_raw_mode(st.st_mode);
    let id = (kind, st.st_dev as u64, st.st_ino as u64);
    matches!(kind, FileType::Fifo | FileType::Socket).then_some(id)
}

/// The caller's descriptor `n` (1 or 2), borrowed.
fn caller(n: RawFd) -> BorrowedFd<'static> {
    match n {
        1 => rustix::stdio::stdout(),
        _ => rustix::stdio::stderr(),
    }
}

impl Outlet {
    /// The pipes for whichever of stdout and stderr is a pipe or a socket;
    /// `None` when neither is (nothing to relay) or a pipe cannot be made
    /// (the cleanup then gets the caller's, as without an outlet).
    pub fn open() -> Option<Outlet> {
        let mut streams: Vec<Stream> = Vec::new();
        let mut seen: Vec<(FileType, u64, u64)> = Vec::new();
        for n in [1, 2] {
            let Some(id) = can_close(caller(n)) else {
                continue;
            };
            if let Some(i) = seen.iter().position(|s| *s == id) {
                streams[i].targets.push(n);
                continue;
            }
            let (from, to) = crate::fork::pipe().ok()?;
            // The cleanup's end blocks, as the caller's would.
            rustix::fs::fcntl_setfl(&to, OFlags::empty()).ok()?;
            seen.push(id);
            streams.push(Stream {
                targets: vec![n],
                from,
                to_cleanup: Some(to),
                into: None,
                pending: Vec::new(),
                ended: false,
            });
        }
        (!streams.is_empty()).then_some(Outlet { streams })
    }

    /// Right before the cleanup starts: where each stream goes from now on.
    /// Returns, for the spawn, what the cleanup's descriptor 1 and 2 become
    /// (`None`: the caller's, unchanged).
    pub fn start(&mut self) -> [Option<BorrowedFd<'_>>; 2] {
        for s in self.streams.iter_mut().filter(|s| s.into.is_none()) {
            s.into = into(s.targets[0]);
        }
        let mut ends = [None, None];
        for s in &self.streams {
            // A stream that cannot be relayed goes to the caller's.
            if let (Some(to), Some(_)) = (&s.to_cleanup, &s.into) {
                for &n in &s.targets {
                    ends[n as usize - 1] = Some(to.as_fd());
                }
            }
        }
        ends
    }

    /// Once the cleanup has its ends: ours are closed, so its end of file
    /// (and a relay that was not started) is seen.
    pub fn started(&mut self) {
        self.streams.iter_mut().for_each(|s| s.to_cleanup = None);
        self.streams.retain(|s| s.into.is_some());
    }

    /// The descriptors a wait watches: read ends with nothing pending, and
    /// the caller's streams that have something pending.
    pub fn watch<'a>(
        &'a self,
        readable: &mut crate::poll::Fds<'a>,
        writable: &mut Vec<BorrowedFd<'a>>,
    ) {
        for s in self.streams.iter().filter(|s| s.into.is_some()) {
            if !s.pending.is_empty() {
                writable.extend(s.out());
            } else if !s.ended {
                readable.push(s.from.as_fd());
            }
        }
    }

    /// Move what can be moved without blocking: read what came, write what
    /// the reader takes, drop it once the reader is gone.
    pub fn pump(&mut self) {
        for s in self.streams.iter_mut().filter(|s| s.into.is_some()) {
            s.pump();
        }
    }

    /// At the tool's end, when the cleanup and what it left are gone:
    /// everything still in the pipes reaches a reader that is still there,
    /// waiting for it as long as it reads. A pipe some process outside the
    /// tree still writes to is not waited for.
    pub fn finish(&mut self) {
        loop {
            self.pump();
            let writable: Vec<BorrowedFd<'_>> = (self.streams.iter())
                .filter(|s| !s.pending.is_empty())
                .filter_map(Stream::out)
                .collect();
            if writable.is_empty() {
                return;
            }
            crate::poll::wait_all(&[], &writable, &[], None);
        }
    }
}

/// For a cleanup that replaces the tool (`--exec-cleanup`), which no
/// process of ours outlives to relay for: each of stdout and stderr whose
/// reader is already gone (a pipe without a reader, a socket whose peer
/// closed) becomes `/dev/null`, so the cleanup's first line does not kill
/// it. A reader that goes later is not seen.
pub fn mute_unread() {
    for n in [1, 2] {
        let mut pfd = [PollFd::from_borrowed_fd(caller(n), PollFlags::OUT)];
        let zero = rustix::event::Timespec::default();
        let gone = can_close(caller(n)).is_some()
            && rustix::event::poll(&mut pfd, Some(&zero)).is_ok()
            && pfd[0].revents().intersects(PollFlags::ERR | PollFlags::HUP);
        let null =
            || rustix::fs::open("/dev/null", OFlags::WRONLY | OFlags::CLOEXEC, Mode::empty());
        let _ = match (gone.then(null), n) {
            (Some(Ok(null)), 1) => rustix::stdio::dup2_stdout(&null),
            (Some(Ok(null)), _) => rustix::stdio::dup2_stderr(&null),
            _ => Ok(()),
        };
    }
}

/// How the caller's stream `n` is written without blocking: its pipe
/// reopened, or its socket; `Gone` when no one reads it already; `None`
/// when it cannot be (no `/proc`).
fn into(n: RawFd) -> Option<Into> {
    let fd = caller(n);
    let (kind, _, _) = can_close(fd)?;
    if kind == FileType::Socket {
        return Some(Into::Socket(n));
    }
    let path = format!("/proc/self/fd/{}", fd.as_raw_fd());
    let flags = OFlags::WRONLY | OFlags::NONBLOCK | OFlags::CLOEXEC;
    match rustix::fs::open(path.as_str(), flags, Mode::empty()) {
        Ok(own) => Some(Into::Pipe(own)),
        // A FIFO opened for writing without a reader.
        Err(Errno::NXIO) => Some(Into::Gone),
        Err(_) => None,
    }
}

impl Stream {
    /// Where the copy writes, while there is a reader to write to.
    fn out(&self) -> Option<BorrowedFd<'_>> {
        match &self.into {
            Some(Into::Pipe(fd)) => Some(fd.as_fd()),
            Some(Into::Socket(n)) => Some(caller(*n)),
            _ => None,
        }
    }

    fn pump(&mut self) {
        loop {
            if !self.pending.is_empty() {
                if !self.write() {
                    return;
                }
                continue;
            }
            if self.ended {
                return;
            }
            self.pending.resize(CHUNK, 0);
            match rustix::io::read(&self.from, &mut self.pending) {
                Ok(0) => {
                    self.pending.clear();
                    self.ended = true;
                }
                Ok(n) => self.pending.truncate(n),
                Err(Errno::INTR) => self.pending.clear(),
                Err(_) => {
                    // EAGAIN: nothing more for now.
                    self.pending.clear();
                    return;
                }
            }
            if matches!(self.into, Some(Into::Gone)) {
                self.pending.clear();
            }
        }
    }

    /// Write some of `pending`; false when the reader takes no more now.
    fn write(&mut self) -> bool {
        let done = match &self.into {
            Some(Into::Pipe(fd)) => rustix::io::write(fd, &self.pending),
            Some(Into::Socket(n)) => rustix::net::send(
                caller(*n),
                &self.pending,
                SendFlags::DONTWAIT | SendFlags::NOSIGNAL,
            ),
            _ => Ok(self.pending.len()),
        };
        match done {
            Ok(n) => {
                self.pending.drain(..n);
                true
            }
            Err(Errno::AGAIN) => false,
            Err(Errno::INTR) => true,
            Err(_) => {
                // EPIPE, ECONNRESET: the reader is gone; from now on what
                // comes is dropped. (The SIGPIPE of a pipe stays blocked,
                // and is never passed on: see `sigfd`.)
                self.into = Some(Into::Gone);
                self.pending.clear();
                true
            }
        }
    }
}
