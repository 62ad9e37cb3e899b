//! Starting COMMAND: a new process group (or session) that exists before the
//! tool can forward a single signal, the caller's signal state restored, the
//! parent-death signal armed, and 126 told apart from 127.
//!
//! Everything the child does between fork and exec happens in the `pre_exec`
//! closure, which std runs after its own set-up, right before `execvp`: the
//! closure makes only async-signal-safe calls. The tool's signals stay
//! blocked across the fork, so no signal meant for the tool can run anything
//! in the child; the child unblocks only once its dispositions are back to
//! the caller's, and then a pending signal simply acts on COMMAND.
//!
//! `Command::spawn` returns only after the child has called `execve` (or
//! failed to), so when [`Spawn::spawn`] returns, the group exists and
//! signalling it is safe.

use crate::child::Child;
use crate::error::{describe, Error, CANNOT_EXEC, NOT_FOUND};
use crate::signal::Signal;
use crate::startup::Startup;
use std::ffi::{OsStr, OsString};
use std::io;
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::Command;

/// Where COMMAND is put.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Isolation {
    /// `setpgid(0, 0)`: a new process group in the caller's session.
    Group,
    /// `setsid()`: a new session (and group), without a controlling terminal.
    Session,
}

/// How to start COMMAND.
pub struct Spawn {
    command: Command,
    program: OsString,
    isolation: Isolation,
    pdeathsig: Option<Signal>,
    foreground: bool,
}

impl Spawn {
    /// COMMAND is `argv[0]` (looked up in PATH) with the rest as arguments.
    pub fn new(argv: &[OsString]) -> Spawn {
        let program = argv.first().cloned().unwrap_or_default();
        let mut command = Command::new(&program);
        command.args(argv.iter().skip(1));
        Spawn {
            command,
            program,
            isolation: Isolation::Group,
            pdeathsig: None,
            foreground: false,
        }
    }

    pub fn isolation(&mut self, isolation: Isolation) -> &mut Spawn {
        self.isolation = isolation;
        self
    }

    /// The signal COMMAND gets if the tool dies (`PR_SET_PDEATHSIG`).
    pub fn pdeathsig(&mut self, sig: Option<Signal>) -> &mut Spawn {
        self.pdeathsig = sig;
        self
    }

    /// Make COMMAND's group the terminal's foreground group (stdin).
    pub fn foreground(&mut self, on: bool) -> &mut Spawn {
        self.foreground = on;
        self
    }

    /// Add a variable to COMMAND's environment.
    pub fn env(&mut self, key: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> &mut Spawn {
        self.command.env(key, value);
        self
    }

    /// Remove a variable from COMMAND's environment.
    pub fn env_remove(&mut self, key: impl AsRef<OsStr>) -> &mut Spawn {
        self.command.env_remove(key);
        self
    }

    /// Start COMMAND. Errors: 127 not found, 126 not executable, 125 the
    /// tool could not create the process.
    pub fn spawn(&mut self, startup: &Startup) -> Result<Child, Error> {
        let restorer = startup.restorer();
        let isolation = self.isolation;
        let pdeathsig = self.pdeathsig.map(|s| s.raw());
        let foreground = self.foreground;
        // SAFETY: getpid has no preconditions.
        let parent = unsafe { libc::getpid() };
        // SAFETY: the closure runs in the forked child before exec and makes
        // only async-signal-safe calls (setpgid, setsid, tcsetpgrp, prctl,
        // getppid, kill, sigaction, sigprocmask); it does not allocate.
        unsafe {
            self.command.pre_exec(move || {
                match isolation {
                    Isolation::Group => {
                        if libc::setpgid(0, 0) != 0 {
                            return Err(io::Error::last_os_error());
                        }
                    }
                    Isolation::Session => {
                        if libc::setsid() < 0 {
                            return Err(io::Error::last_os_error());
                        }
                    }
                }
                if foreground {
                    // The child takes the terminal itself, before exec, so
                    // COMMAND never runs a single instruction in the
                    // background. SIGTTOU is still blocked (inherited), so
                    // the call cannot stop us.
                    libc::tcsetpgrp(0, libc::getpid());
                }
                if let Some(sig) = pdeathsig {
                    libc::prctl(libc::PR_SET_PDEATHSIG, sig as libc::c_ulong, 0, 0, 0);
                }
                restorer.restore();
                if let Some(sig) = pdeathsig {
                    // The parent may have died before prctl: then no one will
                    // ever send the signal, so send it now.
                    if libc::getppid() != parent {
                        libc::kill(libc::getpid(), sig);
                    }
                }
                Ok(())
            });
        }
        // Keep one descriptor free for the pidfd: if the fd table is full,
        // the tool fails here, before COMMAND exists, and not after.
        let reserve = reserve_fd().map_err(|e| Error::sys("reserve a descriptor", e))?;
        let child = self.command.spawn().map_err(|e| self.spawn_error(e))?;
        drop(reserve);
        let pid = child.id() as i32;
        Ok(Child::new(pid, pidfd_open(pid)))
    }

    fn spawn_error(&self, err: io::Error) -> Error {
        let name = self.program.to_string_lossy();
        match err.raw_os_error() {
            Some(libc::ENOENT) => Error {
                code: NOT_FOUND,
                msg: format!("'{name}': command not found"),
            },
            Some(libc::EAGAIN) | Some(libc::ENOMEM) => Error::usage(format!(
                "unable to start a process for '{name}': {}",
                describe(&err)
            )),
            _ => Error {
                code: CANNOT_EXEC,
                msg: format!("'{name}': cannot execute: {}", describe(&err)),
            },
        }
    }
}

/// A close-on-exec descriptor that holds a slot in the fd table.
fn reserve_fd() -> io::Result<OwnedFd> {
    // SAFETY: eventfd has no pointer arguments.
    let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a new descriptor nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `pidfd_open(2)`; `None` where the kernel has none (COMMAND is then
/// watched through SIGCHLD alone).
fn pidfd_open(pid: i32) -> Option<OwnedFd> {
    // SAFETY: pidfd_open takes a pid and flags; the result is a new
    // close-on-exec descriptor or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) } as i32;
    // SAFETY: a new descriptor nothing else owns.
    (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd) })
}
