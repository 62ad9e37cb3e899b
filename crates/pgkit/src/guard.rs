//! What an inner reap guards from an outer graceful's kill.
//!
//! graceful's deadline reaches every process below it, but not reap's
//! subreaper process (the back) nor the cleanup it runs: killing those
//! would break reap's guarantee. graceful recognises them by what the
//! kernel shows of their descriptors, not by a name a process could carry
//! by accident:
//!
//! - graceful makes two pipes and keeps only their read ends, the *back
//!   mark* and the *cleanup mark*; each pipe is one inode, `pipe:[N]` in
//!   `/proc/PID/fd/`. It tells COMMAND where they are in
//!   `GRACEFUL_GUARD=PID:INODE:BACK:CLEANUP` (graceful's pid, the back
//!   mark's inode number, the two descriptor numbers), appended to the
//!   entries of the gracefuls above it (space-separated, the last
//!   [`MAX_ENTRIES`]).
//! - reap's back opens `/proc/PID/fd/BACK`, for writing, of every graceful
//!   listed whose `/proc/PID/fd/BACK` is still that inode, before the open
//!   and after it (another process that got the pid, or a `/proc` of
//!   another PID namespace, holds no descriptor of that pipe: it is not
//!   taken for graceful), and keeps the
//!   descriptor, close-on-exec, as long as it lives. Before it starts the
//!   cleanup it opens the cleanup mark the same way, and writes into it
//!   the cleanup's first process, `PID:START` (its child once spawned, or
//!   itself before the exec of `--exec-cleanup`); it closes the mark once
//!   that process has ended (the exec closes it at once).
//! - At its deadline graceful reads the descriptors of the processes below
//!   it: one that holds its back mark is spared; one that holds its cleanup
//!   mark is spared with everything below it (the cleanup, before it is
//!   written in); a cleanup written in is spared with everything below it,
//!   even once re-parented elsewhere, while it lives, and nothing of its
//!   tree once it has ended. Marks are close-on-exec: no descriptor of
//!   graceful's reaches the cleanup or what it starts.
//!
//! A mark opened for writing is also seen without reading any `/proc`: a
//! pipe's read end polls `POLLHUP` exactly while no process holds a write
//! end of it, and graceful closed its own. So [`Spare::any_held`] tells at
//! the cost of one `poll` whether an inner reap is there at all; reap's
//! `--cgroup` sweep, which otherwise reads no `/proc`, walks only then.
//!
//! Only a process that opens the path on purpose carries a mark: the
//! variable names where the marks are, holding it marks nothing. A reap
//! that cannot open the path (another user, `/proc` of another PID
//! namespace) is not recognised: its back is killed with the rest.

use crate::procfs::{self, Proc};
use crate::sorted::{Map, Set};
use rustix::fs::{Mode, OFlags};
use std::ffi::OsString;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};

/// The variable's name.
pub const VAR: &str = "GRACEFUL_GUARD";

/// The gracefuls of one chain a reap marks itself for, innermost last.
pub const MAX_ENTRIES: usize = 8;

/// Which marks a process holds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Held {
    /// The back mark: this process is an inner reap's back.
    pub back: bool,
    /// The cleanup mark: it and everything below it are a cleanup's.
    pub cleanup: bool,
}

/// What `/proc/PID/fd/N` reads for a descriptor of the pipe `ino`.
fn pipe_link(ino: u64) -> String {
    format!("pipe:[{ino}]")
}

/// graceful's two marks (the read ends of two pipes, write ends closed),
/// and what they spared so far: graceful's deadline and reap's sweep both
/// leave alone what an inner reap guards.
pub struct Spare {
    back: OwnedFd,
    cleanup: OwnedFd,
    back_link: String,
    cleanup_link: String,
    /// The back mark's inode number, which names this graceful in `VAR`.
    back_ino: u64,
    /// The cleanups written into the cleanup mark (pid, start time), while
    /// they live.
    cleanups: Set<(i32, u64)>,
    /// The back mark read end of file: no inner reap holds it any more, so
    /// a wait on it would return at once (see [`Spare::news`]).
    backs_gone: bool,
    /// Processes spared as part of a written cleanup's tree, and that
    /// cleanup (pid, start time): one re-parented elsewhere (a cleanup's
    /// child whose parent died) stays spared while the cleanup lives.
    cleanup_tree: Map<(i32, u64), (i32, u64)>,
}

impl Spare {
    /// Two new marks; `None` (nothing is spared) if the pipes cannot be
    /// made.
    pub fn new() -> Option<Spare> {
        let made = (|| -> io::Result<Spare> {
            let ((back, _), (cleanup, _)) = (crate::fork::pipe()?, crate::fork::pipe()?);
            let back_ino = rustix::fs::fstat(&back)?.st_ino as u64;
            Ok(Spare {
                back_link: pipe_link(back_ino),
                cleanup_link: pipe_link(rustix::fs::fstat(&cleanup)?.st_ino as u64),
                back_ino,
                back,
                cleanup,
                cleanups: Set::new(),
                cleanup_tree: Map::new(),
                backs_gone: false,
            })
        })();
        made.map_err(|e| crate::verbose!("no marks for an inner reap ({e}): it is not spared"))
            .ok()
    }

    /// The value COMMAND gets: the entries of the tool's own `VAR`
    /// (well-formed ones, the newest kept), then this graceful's. The back
    /// mark's inode, not graceful's start time, says which process is
    /// graceful: it costs no read of `/proc/self/stat` at start.
    pub fn export(&self) -> OsString {
        let own = format!(
            "{}:{}:{}:{}",
            procfs::own_pid(),
            self.back_ino,
            self.back.as_raw_fd(),
            self.cleanup.as_raw_fd()
        );
        let outer = crate::spawn::var(VAR).unwrap_or_default();
        let outer = outer.to_string_lossy();
        let well_formed = |e: &&str| parse(e).next().is_some();
        let mut entries: Vec<&str> = outer.split_ascii_whitespace().filter(well_formed).collect();
        entries.push(&own);
        let skip = entries.len().saturating_sub(MAX_ENTRIES);
        entries[skip..].join(" ").into()
    }

    /// Whether any process holds either mark now (a read end polls
    /// `POLLHUP` while no write end of its pipe is open), or a cleanup
    /// written in may live or is not read yet: if not, nothing is guarded
    /// and nothing need be read. If the poll fails, say yes (the caller
    /// then reads the marks themselves).
    pub fn any_held(&self) -> bool {
        use rustix::event::{poll, PollFd, PollFlags};
        let mut fds = [
            PollFd::new(&self.back, PollFlags::empty()),
            PollFd::new(&self.cleanup, PollFlags::IN),
        ];
        let held = |f: &PollFd<'_>| {
            !f.revents().contains(PollFlags::HUP) || f.revents().contains(PollFlags::IN)
        };
        !self.cleanups.is_empty()
            || poll(&mut fds, Some(&rustix::time::Timespec::default()))
                .map_or(true, |_| fds.iter().any(held))
    }

    /// The cleanups written into the cleanup mark since the last call
    /// (well-formed lines `PID:START`).
    fn written(&self) -> Vec<(i32, u64)> {
        let mut text = Vec::new();
        let mut buf = [0u8; 512];
        while let Ok(n @ 1..) = rustix::io::read(&self.cleanup, &mut buf) {
            text.extend_from_slice(&buf[..n]);
        }
        (text.split(|&b| b == b'\n'))
            .filter_map(|l| {
                let (pid, start) = std::str::from_utf8(l).ok()?.split_once(':')?;
                Some((
                    pid.parse().ok().filter(|&p: &i32| p > 0)?,
                    start.parse().ok()?,
                ))
            })
            .collect()
    }

    /// The marks `pid` holds now (none if its descriptors cannot be read).
    pub fn held(&self, pid: i32) -> Held {
        let mut held = Held::default();
        let dir = format!("/proc/{pid}/fd");
        let _ = crate::procfs::each_name(&dir, |fd| {
            if held.back && held.cleanup {
                return;
            }
            let path = [dir.as_bytes(), b"/", fd].concat();
            if let Some(target) = crate::procfs::link(&*path) {
                held.back |= target == self.back_link.as_bytes();
                held.cleanup |= target == self.cleanup_link.as_bytes();
            }
        });
        held
    }

    /// What a wait watches once the deadline has passed: the back mark's
    /// read end, readable when an inner reap's cleanup has ended
    /// ([`Marked::cleanup_ended`]), so that what it left, spared no more,
    /// gets the kill at once. `None` once no inner reap holds the mark.
    pub fn news(&self) -> Option<std::os::fd::BorrowedFd<'_>> {
        use std::os::fd::AsFd;
        (!self.backs_gone).then(|| self.back.as_fd())
    }

    /// The live processes of `tree` (a walk of this process's descendants)
    /// that an inner reap guards. Every mark is read after the walk: a
    /// process the walk found was started after its parent took its mark
    /// (reap marks itself before it starts the cleanup), so it is seen. The
    /// cleanups written in are read after the marks: one whose reap no
    /// longer holds the mark was written in before it let go.
    pub fn guarded(&mut self, tree: &[Proc]) -> Set<i32> {
        let live: Map<i32, &Proc> = (tree.iter().filter(|p| !p.is_zombie()))
            .map(|p| (p.pid, p))
            .collect();
        let held: Map<i32, Held> = live.keys().map(|&p| (p, self.held(p))).collect();
        // A cleanup known before the walk is in it while it lives.
        let lives = |c: &(i32, u64)| live.get(&c.0).is_some_and(|p| p.start == c.1);
        self.cleanups.retain(lives);
        self.cleanups.extend(self.written());
        // The news of ended cleanups, read: this walk is what it asked for.
        let mut buf = [0u8; 64];
        let mut reads = std::iter::repeat_with(|| rustix::io::read(&self.back, &mut buf));
        // Until nothing more now, or end of file: no inner reap holds it.
        self.backs_gone |= reads.find(|r| !matches!(r, Ok(1..))) == Some(Ok(0));
        let cleanups = &self.cleanups;
        self.cleanup_tree.retain(|_, c| cleanups.contains(c));
        let mut guarded = Set::new();
        for p in live.values() {
            if held.get(&p.pid).is_some_and(|h| h.back) {
                guarded.insert(p.pid);
                continue;
            }
            // Up the tree, to our own children (we hold the marks
            // ourselves): a cleanup's, or below one?
            let mut at = Some(*p);
            while let Some(a) = at {
                let id = (a.pid, a.start);
                let cleanup =
                    (cleanups.get(&id).copied()).or_else(|| self.cleanup_tree.get(&id).copied());
                if let Some(c) = cleanup {
                    self.cleanup_tree.insert((p.pid, p.start), c);
                }
                if cleanup.is_some() || held.get(&a.pid).is_some_and(|h| h.cleanup) {
                    guarded.insert(p.pid);
                    break;
                }
                at = live.get(&a.ppid).copied();
            }
        }
        guarded
    }
}

/// One graceful of the variable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Entry {
    pid: i32,
    ino: u64,
    back: i32,
    cleanup: i32,
}

/// The well-formed entries of a value.
fn parse(value: &str) -> impl Iterator<Item = Entry> + '_ {
    value.split_ascii_whitespace().filter_map(|e| {
        let mut it = e.split(':');
        let entry = Entry {
            pid: it.next()?.parse().ok().filter(|&p: &i32| p > 0)?,
            ino: it.next()?.parse().ok()?,
            back: it.next()?.parse().ok().filter(|&f: &i32| f >= 0)?,
            cleanup: it.next()?.parse().ok().filter(|&f: &i32| f >= 0)?,
        };
        it.next().is_none().then_some(entry)
    })
}

/// What reap marks itself as, in the order of an entry's descriptors
/// (`[back, cleanup][role as usize]`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Its back: spare this process.
    Back,
    /// The back about to run its cleanup: spare it and all below it.
    Cleanup,
}

/// The marks a process opened, close-on-exec: held while this lives.
#[derive(Default)]
pub struct Marked(Vec<OwnedFd>);

impl Marked {
    /// For how many gracefuls.
    pub fn count(&self) -> usize {
        self.0.len()
    }

    /// The cleanup's first process has ended (said into each back mark):
    /// an outer graceful past its deadline looks again, and kills what the
    /// cleanup left.
    pub fn cleanup_ended(&self) {
        for fd in &self.0 {
            let _ = rustix::io::write(fd, b"\n");
        }
    }

    /// Write the cleanup's first process into each cleanup mark: spared,
    /// and its tree, while it lives (see the module's documentation).
    pub fn cleanup_is(&self, pid: i32) {
        let Some(p) = procfs::stat(pid) else { return };
        let line = format!("{pid}:{}\n", p.start);
        for fd in &self.0 {
            // One write below PIPE_BUF: whole, or not at all (a full pipe).
            let _ = rustix::io::write(fd, line.as_bytes());
        }
    }
}

/// Mark this process for every graceful its environment names (see the
/// module's documentation), until it drops what this returns or ends
/// (an `execve` closes the marks).
pub fn mark(role: Role) -> Marked {
    let mut marked = Marked::default();
    let value = crate::spawn::var(VAR).unwrap_or_default();
    // The graceful named, not a later owner of its pid: its back mark is
    // still that pipe (`pipe:[INODE]`; a pid is not reused while its
    // process lives).
    let named = |e: &Entry| {
        let back = procfs::link(format!("/proc/{}/fd/{}", e.pid, e.back));
        back == Some(pipe_link(e.ino).into_bytes())
    };
    for e in parse(&value.to_string_lossy()).filter(named) {
        let fd = [e.back, e.cleanup][role as usize];
        let path = format!("/proc/{}/fd/{fd}", e.pid);
        // For writing: the read end graceful keeps then polls no POLLHUP
        // (Spare::any_held); written to by Marked::cleanup_is alone.
        // Non-blocking: a FIFO's open waits for a reader otherwise
        // (graceful is one while it lives), and so does a write to a full
        // pipe.
        let flags = OFlags::WRONLY | OFlags::NONBLOCK | OFlags::CLOEXEC | OFlags::NOCTTY;
        let Ok(opened) = rustix::fs::open(path.as_str(), flags, Mode::empty()) else {
            continue;
        };
        // A pipe, and still the graceful's: checked after the open.
        let fifo = rustix::fs::fstat(&opened)
            .is_ok_and(|st| rustix::fs::FileType::from_raw_mode(st.st_mode).is_fifo());
        if fifo && named(&e) {
            marked.0.push(opened);
        }
    }
    marked
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_are_parsed_strictly() {
        let got: Vec<Entry> = parse("12:34:5:6 junk 1:2:3 7:8:9:10:11 -1:2:3:4 13:0:3:4").collect();
        assert_eq!(
            got,
            [
                Entry {
                    pid: 12,
                    ino: 34,
                    back: 5,
                    cleanup: 6
                },
                Entry {
                    pid: 13,
                    ino: 0,
                    back: 3,
                    cleanup: 4
                }
            ]
        );
    }

    #[test]
    fn a_process_that_opens_the_path_holds_the_mark() {
        let marks = Spare::new().unwrap();
        std::env::remove_var(VAR);
        let value = marks.export();
        std::env::set_var(VAR, &value);
        let count = |link: &str| {
            std::fs::read_dir("/proc/self/fd")
                .unwrap()
                .flatten()
                .filter(|e| {
                    std::fs::read_link(e.path())
                        .is_ok_and(|t| t.as_os_str() == std::ffi::OsStr::new(link))
                })
                .count()
        };
        assert_eq!(count(&marks.back_link), 1, "graceful's own read end");
        assert!(!marks.any_held(), "no write end is open");
        let marked = mark(Role::Back);
        assert_eq!(marked.count(), 1);
        assert!(marks.any_held(), "the write end opened by path");
        assert_eq!(count(&marks.back_link), 2, "and the one opened by path");
        assert_eq!(count(&marks.cleanup_link), 1, "not the cleanup mark");
        drop(marked);
        assert!(!marks.any_held(), "dropped, the mark is let go");
        let me = procfs::own_pid();
        mark(Role::Cleanup).cleanup_is(me);
        assert!(marks.any_held(), "let go, but a cleanup is written in");
        let start = procfs::stat(me).unwrap().start;
        assert_eq!(marks.written(), [(me, start)]);
        assert!(!marks.any_held(), "read");
        std::env::set_var(VAR, "1:2:3:4 bad");
        let exported = marks.export();
        std::env::remove_var(VAR);
        let text = exported.to_string_lossy();
        assert!(text.starts_with("1:2:3:4 "), "{text}");
        assert_eq!(text.split(' ').count(), 2);
    }
}
