//! The started COMMAND: signal it or its group, learn of its stops and its
//! exit, and reap it.
//!
//! A `Child` stays unreaped until [`Child::reap`] is called, and refuses to
//! signal after that: while the leader is unreaped (alive or a zombie) its PID
//! and its process group's ID cannot be given to another process, so neither
//! `kill(pid)` nor `kill(-pgid)` can ever hit a stranger. Exits are learnt
//! with `waitid(WNOWAIT)`, which reads the status and leaves the zombie.

use crate::pidfd;
/// Whether a failed signal was refused: with the pidfd calls, where it is
/// decided (so that `pidfd` need not import this module).
pub use crate::pidfd::refusal;
use crate::signal::Signal;
use rustix::process::{Pid, WaitId, WaitIdOptions, WaitIdStatus};
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

/// How a process ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    Exited(i32),
    Signaled(Signal),
}

impl Status {
    /// The status as a shell reports it in `$?`: N, or 128+S.
    pub fn shell_code(self) -> i32 {
        match self {
            Status::Exited(n) => n,
            Status::Signaled(s) => 128 + s.raw(),
        }
    }
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Status::Exited(n) => write!(f, "exited with {n}"),
            Status::Signaled(s) => write!(f, "killed by {s}"),
        }
    }
}

/// Who a signal is sent to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// COMMAND alone.
    Child,
    /// COMMAND's whole process group (its pgid is its pid).
    Group,
}

impl Target {
    /// How the lines name it (`group`, `pid`), and the calls that send to
    /// it, in the order [`Child::signal`] tries them.
    pub fn words(self) -> (&'static str, &'static str) {
        match self {
            Target::Group => ("group", "kill, then pidfd_send_signal"),
            Target::Child => ("pid", "pidfd_send_signal, then kill"),
        }
    }
}

/// A job-control change of COMMAND.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Job {
    Stopped(Signal),
    Continued,
}

/// COMMAND, started by `spawn` as the leader of a new group or session.
pub struct Child {
    pid: Pid,
    pidfd: Option<OwnedFd>,
    exit: Option<Status>,
    reaped: bool,
    /// A stop or continue found by the last [`Child::peek_exit`], for
    /// [`Child::poll_job`].
    job: Option<Job>,
    /// The last `peek_exit` also looked for stops and continues, so the
    /// next `poll_job` need not ask the kernel again.
    job_looked: bool,
    /// Exited and found the tool's only child, outside PID 1: see
    /// [`Child::nothing_below`].
    alone: bool,
}

/// `waitid(P_PID, pid, options | WNOHANG)`, EINTR retried: `None` when
/// there is nothing to report yet.
pub(crate) fn waitid(pid: Pid, options: WaitIdOptions) -> io::Result<Option<WaitIdStatus>> {
    loop {
        match rustix::process::waitid(WaitId::Pid(pid), options | WaitIdOptions::NOHANG) {
            Err(rustix::io::Errno::INTR) => continue,
            r => return Ok(r?),
        }
    }
}

/// Decode a status in `wait(2)`'s form (the `exit_code` of `/proc/PID/stat`).
fn wait_status(code: i32) -> Status {
    match code & 0x7f {
        0 => Status::Exited((code >> 8) & 0xff),
        sig => killed_by(sig),
    }
}

/// Decode an exit from `waitid`.
pub(crate) fn exit_status(s: &WaitIdStatus) -> Status {
    let killed = || killed_by(s.terminating_signal().unwrap_or(0));
    s.exit_status().map_or_else(killed, Status::Exited)
}

/// Killed by signal `n` (a number that is no signal: 128 + `n`, as a shell
/// says it).
fn killed_by(n: i32) -> Status {
    Signal::from_raw(n).map_or(Status::Exited(128 + n), Status::Signaled)
}

impl Child {
    pub(crate) fn new(pid: Pid, pidfd: Option<OwnedFd>) -> Child {
        Child {
            pid,
            pidfd,
            exit: None,
            reaped: false,
            job: None,
            job_looked: false,
            alone: false,
        }
    }

    /// A process this one did not start but was given: an orphan
    /// re-parented to it as a subreaper (or PID 1). `None` unless `pid` is
    /// a child of this process now, unreaped (running or a zombie), which
    /// `waitid(WNOWAIT)` tells without reaping it. From then on its pid, and
    /// the id of the group it leads, are pinned as for a started child,
    /// until [`Child::reap`].
    pub fn adopt(pid: i32) -> Option<Child> {
        let pid = crate::typed_pid(pid)?;
        // ECHILD: not our child (any more, or never).
        waitid(pid, WaitIdOptions::EXITED | WaitIdOptions::NOWAIT).ok()?;
        Some(Child::new(pid, pidfd::open(pid).ok()))
    }

    /// COMMAND's pid, which is also its process group's id.
    pub fn pid(&self) -> i32 {
        self.pid.as_raw_pid()
    }

    /// The pidfd, readable once COMMAND has exited (absent on kernels
    /// without `pidfd_open`; SIGCHLD then does its job).
    pub fn pidfd(&self) -> Option<BorrowedFd<'_>> {
        self.pidfd.as_ref().map(|fd| fd.as_fd())
    }

    /// How COMMAND ended, once it has.
    pub fn exit_status(&self) -> Option<Status> {
        self.exit
    }

    /// Whether COMMAND has been reaped (then nothing is signalled any more).
    pub fn is_reaped(&self) -> bool {
        self.reaped
    }

    /// `reap::reap_except` found it exited and the tool's only child.
    /// Outside PID 1 that lasts until it is reaped (see there); as PID 1 it
    /// is not kept.
    pub fn found_alone(&mut self) {
        self.alone = !crate::reap::is_pid1();
    }

    /// Nothing is left below the tool: it has exited, unreaped, and was
    /// found its only child.
    pub fn nothing_below(&self) -> bool {
        self.alone && !self.reaped
    }

    /// `pidfd_send_signal(2)` for `Target::Child`, `kill(-pgid)` for
    /// `Target::Group`; refused with ESRCH once COMMAND is reaped, because its
    /// pid or group id could then belong to someone else.
    pub fn signal(&self, target: Target, sig: Signal) -> io::Result<()> {
        if self.reaped {
            return Err(io::Error::from_raw_os_error(libc::ESRCH));
        }
        match target {
            // Without a pidfd, or where a seccomp filter refuses the pidfd
            // call itself, kill: the pid is pinned by our unreaped child.
            Target::Child => pidfd::send_or_kill(self.pidfd(), self.pid, sig),
            // The group's leader is our unreaped child, so the id is still
            // that group's.
            Target::Group => match crate::signal::kill(-self.pid(), sig) {
                Err(e) if refusal(&e) => self.signal_members(sig).map_err(|_| e),
                r => r,
            },
        }
    }

    /// A signal for COMMAND that every way of sending was refused
    /// ([`refusal`]): the request is not dropped in silence. One line names
    /// the calls, and the tool exits 125, so COMMAND gets its
    /// `--pdeathsig` (the one signal left to give it: the kernel's);
    /// with `--pdeathsig none` the line says COMMAND is left running.
    pub fn cannot_signal(
        &self,
        target: Target,
        sig: Signal,
        e: &io::Error,
        pdeathsig: Option<Signal>,
    ) -> ! {
        let (to, calls) = target.words();
        let pid = self.pid();
        let fate = match pdeathsig {
            Some(s) => format!("exiting, so COMMAND gets --pdeathsig {s}"),
            None => format!("exiting; COMMAND (pid {pid}) is left running (--pdeathsig none)"),
        };
        let e = crate::error::describe(e);
        crate::warn!("unable to send {sig} to {to} {pid}: {calls}: {e}; {fate}");
        std::process::exit(crate::error::TOOL_FAILED)
    }

    /// `kill(-pgid)` refused (a seccomp profile's EPERM or ENOSYS): the
    /// group's members one by one, each through a pidfd, the leader's own
    /// first (its pid is pinned), the others' opened from `/proc` and
    /// checked to be the same process, still in the group, after the open.
    /// An error unless the leader was reached.
    fn signal_members(&self, sig: Signal) -> io::Result<()> {
        let leader = match self.pidfd() {
            Some(fd) => pidfd::send(fd, sig),
            None => Err(io::Error::from_raw_os_error(libc::ENOSYS)),
        };
        let pgid = self.pid();
        for p in crate::procfs::all().unwrap_or_default() {
            if p.pgid != pgid || p.pid == pgid || p.is_zombie() {
                continue;
            }
            if let Some((fd, _)) = pidfd::pin(&p).filter(|(_, now)| now.pgid == pgid) {
                let _ = pidfd::send(fd.as_fd(), sig);
            }
        }
        leader
    }

    /// Has COMMAND exited? Never waits: reads the status without reaping
    /// (`waitid(WEXITED | WNOWAIT | WNOHANG)`), so the pid stays pinned. The
    /// same call also looks for a stop or continue, kept for the next
    /// [`Child::poll_job`]: one system call for both questions.
    pub fn peek_exit(&mut self) -> Option<Status> {
        if let Err(e) = self.try_peek_exit() {
            self.lost(Some(&e));
        }
        self.exit
    }

    /// [`Child::peek_exit`], but a refused `waitid` is the caller's to
    /// handle: returned, with nothing said and nothing changed.
    pub fn try_peek_exit(&mut self) -> io::Result<Option<Status>> {
        if self.exit.is_none() && !self.reaped {
            let options = WaitIdOptions::EXITED
                | WaitIdOptions::STOPPED
                | WaitIdOptions::CONTINUED
                | WaitIdOptions::NOWAIT;
            match waitid(self.pid, options) {
                // A stop or continue, not an exit.
                Ok(Some(info)) if info.stopped() || info.continued() || info.trapped() => {
                    // Taken from the kernel now, or it would be seen twice.
                    self.job = self.ask_job().or(self.job);
                    self.job_looked = true;
                }
                Ok(Some(info)) => self.exit = Some(exit_status(&info)),
                Ok(None) => self.job_looked = true,
                Err(e) if e.raw_os_error() == Some(libc::ECHILD) => self.lost(None),
                Err(e) => match self.unwaited() {
                    Some(found) => self.exit = found,
                    None => return Err(e),
                },
            }
        }
        Ok(self.exit)
    }

    /// `waitid` refused: whether COMMAND has exited, and how, by another
    /// route. `/proc/PID/stat` says when it is a zombie, and its
    /// `exit_code` field holds the status `waitid` would have read (shown
    /// only to a reader with the creds to trace it, checked against
    /// `/proc/PID/status`: else a zero there would pass for an exit with
    /// 0). Without `/proc`, its pidfd says whether it has ended.
    /// `Some(None)`: still running; `Some(Some(status))`: ended so;
    /// `None`: ended with its status unreadable, or no route tells.
    fn unwaited(&self) -> Option<Option<Status>> {
        let pid = self.pid();
        let Some(now) = crate::procfs::stat(pid) else {
            return match self.pidfd().map(pidfd::readable) {
                Some(Ok(false)) => Some(None),
                _ => None,
            };
        };
        if !now.is_zombie() {
            return Some(None);
        }
        let status = crate::procfs::exit_code(pid).map(wait_status)?;
        crate::verbose!("COMMAND (pid {pid}) {status}: waitid refused, the status read from /proc");
        Some(Some(status))
    }

    /// COMMAND's status is lost: the tool ends as for a status it could not
    /// get, 125, with one line, and the pidfd (readable for ever once
    /// COMMAND exits) is closed so no wait spins on it.
    ///
    /// `refused`: `waitid` itself is refused (a seccomp profile's EPERM or
    /// ENOSYS, a kernel's EINVAL) and no other route ([`Child::unwaited`])
    /// reads how COMMAND ended: it has ended (or nothing could ever tell),
    /// and waiting on would spin or hang. The pid stays pinned (not
    /// reaped), so COMMAND's group can still be stopped.
    ///
    /// `None`: COMMAND is no longer our child to wait for: something reaped
    /// it behind our back (SIGCHLD ignored with no exec in between, or a
    /// `waitid` of someone else's). Its pid may be reused already, so
    /// nothing is signalled any more.
    fn lost(&mut self, refused: Option<&io::Error>) {
        let pid = self.pid();
        match refused.map(crate::error::describe) {
            Some(e) => crate::warn!(
                "unable to wait for COMMAND (pid {pid}): waitid: {e}; its exit status is lost"
            ),
            None => crate::warn!(
                "COMMAND (pid {pid}) was reaped behind the tool's back: its exit status is lost"
            ),
        }
        self.exit = Some(Status::Exited(crate::error::TOOL_FAILED));
        self.reaped |= refused.is_none();
        self.pidfd = None;
    }

    /// A stop or continue of COMMAND since the last call, if any.
    pub fn poll_job(&mut self) -> Option<Job> {
        if self.exit.is_some() || self.reaped {
            return None;
        }
        let looked = std::mem::take(&mut self.job_looked);
        // What the last peek kept; else ask, unless that peek asked already.
        (self.job.take()).or_else(|| if looked { None } else { self.ask_job() })
    }

    /// `waitid(WSTOPPED | WCONTINUED)`: take the next stop or continue.
    fn ask_job(&self) -> Option<Job> {
        match waitid(self.pid, WaitIdOptions::STOPPED | WaitIdOptions::CONTINUED) {
            Ok(Some(s)) if s.continued() => Some(Job::Continued),
            Ok(Some(s)) => {
                Signal::from_raw(s.stopping_signal().or(s.trapping_signal())?).map(Job::Stopped)
            }
            _ => None,
        }
    }

    /// Reap COMMAND once it has exited; from now on nothing is signalled.
    pub fn reap(&mut self) -> Option<Status> {
        let status = self.peek_exit()?;
        if !self.reaped {
            match waitid(self.pid, WaitIdOptions::EXITED) {
                // Reaped now, or by someone else already: either way gone.
                Ok(Some(_)) => {}
                Err(e) if e.raw_os_error() == Some(libc::ECHILD) => {}
                // Not reaped (it has exited, so this is not "not yet"): keep
                // the pid pinned and say so rather than pretend.
                _ => return Some(status),
            }
            self.reaped = true;
            self.pidfd = None;
        }
        Some(status)
    }
}
