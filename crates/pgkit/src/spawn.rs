//! Starting COMMAND: a new process group (or session) that exists before the
//! tool can forward a single signal, the caller's signal state restored, the
//! parent-death signal armed, and 126 told apart from 127.
//!
//! The child is created with `clone(CLONE_VM | CLONE_VFORK | CLONE_PIDFD)`,
//! as `posix_spawn` does: no copy of the tool's memory, and the tool resumes
//! only once the child has called `execve` (or failed to), so when
//! [`Spawn::spawn`] returns, the group exists and signalling it is safe. The
//! pidfd comes from the same call, so a full descriptor table makes the spawn
//! fail before COMMAND exists, never after.
//!
//! Between clone and exec the child shares the tool's memory: it runs
//! [`child_main`], which only reads what the parent prepared and makes plain
//! system calls (no allocation, no locks). The tool's signals stay blocked
//! across the clone, so no signal meant for the tool can run anything in the
//! child; the child unblocks only once its dispositions are back to the
//! caller's, and then a pending signal simply acts on COMMAND.
//!
//! But one kind of signal must not act in the child before exec: a
//! job-control stop (TSTP, TTIN, TTOU: a Ctrl-Z once COMMAND's group has
//! the terminal). It would stop the child while the tool waits in clone for
//! an exec that cannot come, so the tool could neither follow nor forward,
//! and the shell would wait on a job it does not see stopped. So where
//! COMMAND would take such a signal's default action, the child catches it
//! until exec (which puts the default action back, the caller's) and notes
//! it; once the child has exec'd, the tool sends it again, to COMMAND.

use crate::child::Child;
use crate::error::{describe, Error, CANNOT_EXEC, NOT_FOUND};
use crate::pidfd;
use crate::signal::Signal;
use crate::startup::{Restorer, Startup};
use rustix::process::{getpid, getppid, setpgid, setsid, Pid, WaitOptions};
use rustix::stdio::stdin;
use rustix::termios::tcsetpgrp;
use std::cell::Cell;
use std::ffi::{CStr, CString, OsStr, OsString};
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::raw::{c_char, c_int, c_void};
use std::os::unix::ffi::OsStrExt;
use std::sync::atomic::{AtomicPtr, AtomicU32, Ordering};

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
    argv: Vec<OsString>,
    env: Vec<(OsString, Option<OsString>)>,
    /// Variables set to COMMAND's own pid, filled in by the child.
    own_pid_vars: Vec<OsString>,
    isolation: Isolation,
    pdeathsig: Option<Signal>,
    foreground: bool,
    /// The cgroup COMMAND enters before exec: its directory and its
    /// `cgroup.procs` (see [`Spawn::cgroup`]).
    cgroup: Option<(RawFd, RawFd)>,
}

impl Spawn {
    /// COMMAND is `argv[0]` (looked up in PATH) with the rest as arguments.
    pub fn new(argv: &[OsString]) -> Spawn {
        Spawn {
            argv: argv.to_vec(),
            env: Vec::new(),
            own_pid_vars: Vec::new(),
            isolation: Isolation::Group,
            pdeathsig: None,
            foreground: false,
            cgroup: None,
        }
    }

    /// Start COMMAND in this cgroup v2 (its directory, and its
    /// `cgroup.procs` open for writing; both must stay open until the
    /// spawn returns): `clone3` with `CLONE_INTO_CGROUP` where the kernel
    /// has it, else the child writes `0` to `cgroup.procs` before exec.
    /// Either way not one instruction of COMMAND runs outside it.
    pub fn cgroup(&mut self, dir: BorrowedFd<'_>, procs: BorrowedFd<'_>) -> &mut Spawn {
        self.cgroup = Some((dir.as_raw_fd(), procs.as_raw_fd()));
        self
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
        self.env
            .push((key.as_ref().to_owned(), Some(value.as_ref().to_owned())));
        self
    }

    /// Set a variable to COMMAND's own pid (`LISTEN_PID`, `WATCHDOG_PID`):
    /// the entry is made here with room for the digits, and the child
    /// writes its pid into it before exec, so nothing is allocated after
    /// the clone.
    pub fn env_own_pid(&mut self, key: impl AsRef<OsStr>) -> &mut Spawn {
        self.env.push((key.as_ref().to_owned(), None));
        self.own_pid_vars.push(key.as_ref().to_owned());
        self
    }

    /// Remove a variable from COMMAND's environment.
    pub fn env_remove(&mut self, key: impl AsRef<OsStr>) -> &mut Spawn {
        self.env.push((key.as_ref().to_owned(), None));
        self
    }

    /// Start COMMAND. Errors: 127 not found, 126 not executable, 125 the
    /// tool could not create the process.
    pub fn spawn(&mut self, startup: &Startup) -> Result<Child, Error> {
        self.spawn_with_output(startup, [None, None])
    }

    /// [`Spawn::spawn`], with COMMAND's descriptors 1 and 2 made copies of
    /// these where given (`crate::outlet`).
    pub fn spawn_with_output(
        &mut self,
        startup: &Startup,
        output: [Option<BorrowedFd<'_>>; 2],
    ) -> Result<Child, Error> {
        let image = self.image()?;
        let local = Failure::default();
        // clone3 without CLONE_VM: the child writes its failure to a page
        // both processes share.
        let shared = match self.cgroup {
            Some(_) => Some(SharedFailure::new().map_err(|e| Error::sys("start a process", e))?),
            None => None,
        };
        let mut job = ChildJob {
            image: &image,
            restorer: startup.restorer(),
            isolation: self.isolation,
            pdeathsig: self.pdeathsig,
            foreground: self.foreground,
            parent: rustix::process::getpid(),
            enter: None,
            output,
            failure: shared.as_ref().map_or(&local, |s| s.get()),
        };
        // Where the child's catcher notes a job-control stop (shared with
        // the child either way: its memory, or the shared page).
        HELD.store(
            &job.failure.held as *const AtomicU32 as *mut AtomicU32,
            Ordering::Relaxed,
        );
        let cloned = match self.cgroup {
            Some((dir, procs)) => match clone3_into(&job, dir) {
                Err(e) if clone3_missing(&e) => {
                    job.enter = Some(procs);
                    clone_vfork(&job)
                }
                other => other,
            },
            None => clone_vfork(&job),
        };
        let (pid, pidfd) = cloned.map_err(|e| match e.raw_os_error() {
            Some(libc::EBUSY | libc::EOPNOTSUPP) => Error::usage(format!(
                "--cgroup: COMMAND cannot be started in its cgroup ({}): cgroup v2's \
                 \"no internal processes\" rule (run reap in a domain cgroup of its own)",
                describe(&e)
            )),
            _ if self.cgroup.is_some() => Error::sys("start a process in its cgroup", e),
            _ => Error::sys("start a process", e),
        })?;
        HELD.store(std::ptr::null_mut(), Ordering::Relaxed);
        if job.failure.errno.get() != 0 {
            // The child failed before or at exec and has exited: reap it.
            let _ = rustix::process::waitpid(Some(pid), WaitOptions::empty());
            return Err(self.failure(job.failure));
        }
        let held = job.failure.held.load(Ordering::Relaxed);
        for sig in JOB_STOPS.into_iter().filter(|s| held & bit(*s) != 0) {
            crate::verbose!("COMMAND got {sig} before its exec: sent to it again");
            let _ = crate::signal::kill(pid.as_raw_pid(), sig);
        }
        // Without CLONE_PIDFD (older kernels): a pidfd of the unreaped child,
        // or none, and SIGCHLD alone watches it.
        let pidfd = pidfd.or_else(|| pidfd::open_pinned(pid));
        Ok(Child::new(pid, pidfd))
    }

    /// Replace this very process with COMMAND (no new process: same pid,
    /// same group, and a subreaper stays one). The caller's signal state is
    /// put back first, as for [`Spawn::spawn`]; isolation, parent-death
    /// signal and terminal hand-over do not apply. Returns only if the exec
    /// failed (127 not found, 126 not executable); the tool's signals are
    /// then blocked again.
    pub fn exec(&mut self, startup: &Startup) -> Error {
        let image = match self.image() {
            Ok(image) => image,
            Err(e) => return e,
        };
        let restorer = startup.restorer();
        restorer.restore();
        let failure = image.exec();
        // Back to the tool's own state: SIGCHLD waited for, signals blocked.
        let _ = crate::sigraw::set_disposition(crate::Signal::CHLD, false);
        crate::startup::block(crate::SigSet::blockable());
        self.failure(&failure)
    }

    /// Everything `execve` needs, prepared before the child exists.
    fn image(&self) -> Result<Image, Error> {
        let program = self.argv.first().cloned().unwrap_or_default();
        let args: Vec<CString> = self
            .argv
            .iter()
            .map(|a| cstr(a, "argument"))
            .collect::<Result<_, _>>()?;
        let candidates = candidates(&program)
            .iter()
            .map(|c| cstr(c, "path"))
            .collect::<Result<_, _>>()?;
        let env = if self.env.is_empty() && self.own_pid_vars.is_empty() {
            None
        } else {
            Some(self.environment()?)
        };
        Ok(Image::new(candidates, args, env))
    }

    /// COMMAND's environment where `env`/`env_remove` change it: the tool's
    /// own entries less every one of a changed name, then the new values.
    /// The kept entries are pointed at where the C library keeps them, not
    /// copied: copying every variable cost graceful (which sets
    /// `GRACEFUL_GRACE_MS`) some 80,000 instructions and 50 us per start.
    fn environment(&self) -> Result<Environment, Error> {
        // The last change of a name wins; new values go last, in the order
        // of their last change.
        let mut added = Vec::new();
        for (i, (key, value)) in self.env.iter().enumerate() {
            let changed_later = self.env[i + 1..].iter().any(|(k, _)| k == key);
            if let (Some(value), false) = (value, changed_later) {
                let mut entry = key.clone();
                entry.push("=");
                entry.push(value);
                added.push(cstr(&entry, "variable")?);
            }
        }
        let changed = |name: &[u8]| self.env.iter().any(|(k, _)| k.as_bytes() == name);
        let mut pointers = Vec::new();
        // SAFETY: `environ` is the C library's environment: null, or a
        // null-terminated array of NUL-terminated strings. The tools change
        // no variable (they have one thread and never call setenv), so the
        // strings stay where they are until COMMAND's execve, which reads
        // them in the same memory (the child shares it until then).
        unsafe {
            let mut entry = environ;
            while !entry.is_null() && !(*entry).is_null() {
                let text = CStr::from_ptr(*entry).to_bytes();
                // As std::env::vars_os reads it: the name is at least one
                // byte long, and an entry without '=' after it is skipped.
                if let Some(eq) = text.iter().skip(1).position(|&b| b == b'=') {
                    if !changed(&text[..eq + 1]) {
                        pointers.push(*entry);
                    }
                }
                entry = entry.add(1);
            }
        }
        pointers.extend(added.iter().map(|c| c.as_ptr()));
        let mut pid_slots = Vec::new();
        for key in &self.own_pid_vars {
            // KEY= then room for any pid's digits and the NUL; all NULs
            // until the child writes them.
            let mut slot = key.as_bytes().to_vec();
            slot.push(b'=');
            let at = slot.len();
            slot.extend_from_slice(&[0u8; 12]);
            let slot: Box<[Cell<u8>]> = slot.into_iter().map(Cell::new).collect();
            // Cell<u8> has the layout of u8: the entry is a C string.
            pointers.push(slot.as_ptr().cast());
            pid_slots.push((slot, at));
        }
        pointers.push(std::ptr::null());
        Ok(Environment {
            _added: added,
            pid_slots,
            pointers,
        })
    }

    fn failure(&self, failure: &Failure) -> Error {
        let name = self
            .argv
            .first()
            .map(|p| p.to_string_lossy())
            .unwrap_or_default();
        let err = io::Error::from_raw_os_error(failure.errno.get());
        let what = match failure.stage.get() {
            Stage::Group => "setpgid",
            Stage::Session => "setsid",
            Stage::Cgroup => "entering the cgroup",
            Stage::Output => "the output descriptors",
            Stage::Exec => "",
        };
        if !what.is_empty() {
            return Error::sys(&format!("{what} for '{name}'"), err);
        }
        match failure.errno.get() {
            libc::ENOENT => match self.argv.first().and_then(|p| missing_interpreter(p)) {
                // The file is there: what is missing is its `#!` interpreter.
                Some((path, interpreter)) => Error {
                    code: NOT_FOUND,
                    msg: format!(
                        "'{}': its interpreter '{}' not found (the #! line names it; \
                         install it or change the line)",
                        path.to_string_lossy(),
                        interpreter.to_string_lossy()
                    ),
                },
                None => Error {
                    code: NOT_FOUND,
                    msg: format!("'{name}': command not found"),
                },
            },
            _ => Error {
                code: CANNOT_EXEC,
                msg: format!("'{name}': cannot execute: {}", describe(&err)),
            },
        }
    }
}

/// After `execve` said ENOENT: the first candidate for `program` that is
/// a file starting with `#!`, and the interpreter that line names (the
/// kernel's ENOENT was about it, not about the file).
fn missing_interpreter(program: &OsStr) -> Option<(OsString, OsString)> {
    use std::io::Read;
    candidates(program).into_iter().find_map(|path| {
        let mut head = [0u8; 256];
        let mut file = std::fs::File::open(&path).ok()?;
        if !file.metadata().ok()?.is_file() {
            return None;
        }
        let n = file.read(&mut head).ok()?;
        let line = head[..n].strip_prefix(b"#!")?;
        let line = &line[..line.iter().position(|&b| b == b'\n').unwrap_or(line.len())];
        let interpreter = line
            .split(|&b| b == b' ' || b == b'\t')
            .find(|w| !w.is_empty())?;
        Some((path, OsStr::from_bytes(interpreter).to_owned()))
    })
}

/// `s` as a C string; a NUL byte in it is the caller's error (125).
fn cstr(s: &OsStr, what: &str) -> Result<CString, Error> {
    CString::new(s.as_bytes()).map_err(|_| {
        Error::usage(format!(
            "{what} '{}' contains a NUL byte",
            s.to_string_lossy()
        ))
    })
}

extern "C" {
    /// The C library's environment (`environ(7)`).
    static environ: *const *const c_char;
}

/// COMMAND's own environment: the pointers `execve` gets, and the strings
/// made for it that they point into (the others are the tool's own).
struct Environment {
    _added: Vec<CString>,
    /// Entries to be completed with COMMAND's pid: the buffer, and where
    /// its digits go.
    pid_slots: Vec<(Box<[Cell<u8>]>, usize)>,
    pointers: Vec<*const c_char>,
}

impl Environment {
    /// Write `pid` into every slot. Async-signal-safe and allocation-free:
    /// runs in the vfork child, which alone uses this environment (the
    /// parent is suspended until the child has exec'd).
    fn fill_pid(&self, pid: i32) {
        let mut digits = [0u8; 11];
        let mut n = pid.unsigned_abs();
        let mut len = 0;
        loop {
            digits[len] = b'0' + (n % 10) as u8;
            len += 1;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        for (slot, at) in &self.pid_slots {
            // Each slot has 12 bytes from `at`: at most 10 digits, then the
            // NUL that follows them (already zero).
            for (i, cell) in slot[*at..].iter().take(len).enumerate() {
                cell.set(digits[len - 1 - i]);
            }
        }
    }
}

/// The paths `execvp` would try: PROGRAM itself if it holds a slash, else
/// each PATH entry joined with it (an empty entry is the current directory;
/// no PATH means `/usr/local/bin:/usr/bin:/bin`).
fn candidates(program: &OsStr) -> Vec<OsString> {
    if program.as_bytes().contains(&b'/') {
        return vec![program.to_owned()];
    }
    if program.is_empty() {
        return Vec::new();
    }
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into());
    path.as_bytes()
        .split(|&b| b == b':')
        .map(|dir| {
            let mut full = if dir.is_empty() {
                OsString::from(".")
            } else {
                OsStr::from_bytes(dir).to_owned()
            };
            full.push("/");
            full.push(program);
            full
        })
        .collect()
}

/// A prepared `execve`: C strings and the pointer arrays into them.
struct Image {
    candidates: Vec<CString>,
    _args: Vec<CString>,
    argv: Vec<*const c_char>,
    /// For a file the kernel refuses with ENOEXEC (a script without `#!`):
    /// `/bin/sh FILE ARG...`, as `execvp(3)` runs it. Slot 1 is the file,
    /// written by the child once it knows which candidate it was.
    sh_argv: Vec<Cell<*const c_char>>,
    env: Option<Environment>,
}

/// The shell `execvp(3)` runs a file with when the kernel cannot.
const SHELL: &CStr = c"/bin/sh";

impl Image {
    fn new(candidates: Vec<CString>, args: Vec<CString>, env: Option<Environment>) -> Image {
        let argv = args
            .iter()
            .map(|c| c.as_ptr())
            .chain(std::iter::once(std::ptr::null()))
            .collect();
        let sh_argv = std::iter::once(SHELL.as_ptr())
            .chain(std::iter::once(std::ptr::null()))
            .chain(args.iter().skip(1).map(|c| c.as_ptr()))
            .chain(std::iter::once(std::ptr::null()))
            .map(Cell::new)
            .collect();
        Image {
            candidates,
            _args: args,
            argv,
            sh_argv,
            env,
        }
    }

    /// Try each candidate as `execvp` does; returns only on failure.
    /// Async-signal-safe and allocation-free: runs in the vfork child.
    fn exec(&self) -> Failure {
        // SAFETY: `environ` is the C library's environment, valid here.
        let envp = self
            .env
            .as_ref()
            .map_or(unsafe { environ }, |e| e.pointers.as_ptr());
        let mut errno = libc::ENOENT;
        let mut saw_eacces = false;
        for path in &self.candidates {
            // SAFETY: path, argv and envp are NUL-terminated C strings and
            // null-terminated pointer arrays that outlive the call.
            unsafe { libc::execve(path.as_ptr(), self.argv.as_ptr(), envp) };
            errno = io::Error::last_os_error()
                .raw_os_error()
                .unwrap_or(libc::ENOENT);
            if errno == libc::ENOEXEC {
                // A file without `#!` that is executable: a shell script,
                // as `execvp`, `env`, `timeout` and tini take it.
                self.sh_argv[1].set(path.as_ptr());
                // SAFETY: as above; `Cell<*const c_char>` has the layout of
                // `*const c_char`, so `sh_argv` is a null-terminated
                // pointer array, its slot 1 now the file's path.
                unsafe { libc::execve(SHELL.as_ptr(), self.sh_argv.as_ptr().cast(), envp) };
                // No shell to run it with: the file stays one that cannot
                // be executed (126), as it was.
                break;
            }
            match errno {
                libc::EACCES => saw_eacces = true,
                libc::ENOENT | libc::ENOTDIR | libc::ESTALE | libc::ENODEV | libc::ETIMEDOUT => {}
                _ => break,
            }
        }
        if saw_eacces && matches!(errno, libc::ENOENT | libc::ENOTDIR) {
            errno = libc::EACCES;
        }
        Failure {
            stage: Cell::new(Stage::Exec),
            errno: Cell::new(errno),
            held: AtomicU32::new(0),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
enum Stage {
    Group,
    Session,
    Cgroup,
    Output,
    #[default]
    Exec,
}

/// Written by the child (shared memory) when it fails; errno 0 means exec
/// succeeded. Cells: the child writes through the shared `ChildJob` while
/// the parent is suspended.
#[derive(Default)]
struct Failure {
    stage: Cell<Stage>,
    errno: Cell<c_int>,
    /// The job-control stops the child caught before exec (a bit per
    /// signal number), to be sent again once it has exec'd.
    held: AtomicU32,
}

impl Failure {
    fn record(&self, stage: Stage, errno: c_int) {
        self.stage.set(stage);
        self.errno.set(errno);
    }
}

/// What the vfork child reads (and, on failure, writes).
struct ChildJob<'a> {
    image: &'a Image,
    restorer: Restorer,
    isolation: Isolation,
    pdeathsig: Option<Signal>,
    foreground: bool,
    parent: Pid,
    /// `cgroup.procs` to write `0` to before exec (the way into the
    /// cgroup where clone3 cannot put the child there itself).
    enter: Option<RawFd>,
    /// What descriptors 1 and 2 become, where given.
    output: [Option<BorrowedFd<'a>>; 2],
    failure: &'a Failure,
}

/// A [`Failure`] in a page shared with a child that does not share the
/// tool's memory (clone3 without CLONE_VM).
struct SharedFailure {
    page: *mut c_void,
}

const PAGE: usize = 4096;

impl SharedFailure {
    fn new() -> io::Result<SharedFailure> {
        // SAFETY: an anonymous shared mapping, checked for MAP_FAILED and
        // unmapped on drop; a Failure (a few bytes) fits in it.
        let page = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                PAGE,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if page == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: the mapping is page-aligned (aligned for Failure), ours,
        // and large enough; it is written once before any read.
        unsafe { page.cast::<Failure>().write(Failure::default()) };
        Ok(SharedFailure { page })
    }

    fn get(&self) -> &Failure {
        // SAFETY: initialised in new; lives as long as self.
        unsafe { &*self.page.cast::<Failure>() }
    }
}

impl Drop for SharedFailure {
    fn drop(&mut self) {
        // SAFETY: our mapping; no reference to it outlives self (get's
        // borrow), and the child has exec'd or exited.
        unsafe { libc::munmap(self.page, PAGE) };
    }
}

/// `clone3` refused for want of it (before Linux 5.7 it has no
/// CLONE_INTO_CGROUP; a seccomp profile may refuse the call): the caller
/// then falls back to the vfork clone and a write to `cgroup.procs`.
fn clone3_missing(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::ENOSYS | libc::E2BIG | libc::EINVAL | libc::EPERM)
    )
}

/// `clone3(CLONE_VFORK | CLONE_PIDFD | CLONE_INTO_CGROUP)` running
/// [`child_main`] in the cgroup `dir`: a copy of the tool's memory (no
/// CLONE_VM, so the child returns from the call on its own copy of this
/// stack, as after fork), the tool suspended until the child exec'd or
/// exited, its failure written to the shared page of `job.failure`.
fn clone3_into(job: &ChildJob<'_>, dir: RawFd) -> io::Result<(Pid, Option<OwnedFd>)> {
    use linux_raw_sys::general::{clone_args, CLONE_INTO_CGROUP, CLONE_PIDFD, CLONE_VFORK};
    let mut pidfd: c_int = -1;
    let args = clone_args {
        flags: u64::from(CLONE_VFORK) | u64::from(CLONE_PIDFD) | CLONE_INTO_CGROUP,
        pidfd: &mut pidfd as *mut c_int as u64,
        child_tid: 0,
        parent_tid: 0,
        exit_signal: libc::SIGCHLD as u64,
        stack: 0,
        stack_size: 0,
        tls: 0,
        set_tid: 0,
        set_tid_size: 0,
        cgroup: dir as u64,
    };
    // SAFETY: `args` is the kernel's own struct (linux-raw-sys), its size
    // passed with it; the pidfd pointer outlives the call. Without CLONE_VM
    // the child runs on a copy of this process's memory: it only calls
    // child_main (plain system calls) and exits.
    let pid = unsafe {
        libc::syscall(
            libc::SYS_clone3,
            &args as *const clone_args,
            std::mem::size_of::<clone_args>(),
        )
    };
    if pid == 0 {
        let arg = job as *const ChildJob<'_> as *mut c_void;
        let code = child_main(arg);
        // SAFETY: the child ends here without running the tool's exit
        // handlers or flushing its buffers (a copy of the tool's).
        unsafe { libc::_exit(code) };
    }
    let err = io::Error::last_os_error();
    let Some(pid) = i32::try_from(pid).ok().and_then(crate::typed_pid) else {
        return Err(err);
    };
    // SAFETY: a new close-on-exec descriptor from CLONE_PIDFD, owned by us.
    let pidfd = (pidfd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(pidfd) });
    Ok((pid, pidfd))
}

const CHILD_STACK: usize = 64 * 1024;

/// Below the child's stack, a page it may not touch: an overflow faults
/// (SIGSEGV in the child, never a silent write into whatever the kernel
/// mapped below). The largest base page of the architectures the suite
/// builds for (64 KiB on some arm64 and ppc64el kernels) is whole in it.
const GUARD: usize = 64 * 1024;

/// `clone(CLONE_VM | CLONE_VFORK | CLONE_PIDFD | SIGCHLD)` running
/// [`child_main`]; falls back to no pidfd on kernels without CLONE_PIDFD.
fn clone_vfork(job: &ChildJob<'_>) -> io::Result<(Pid, Option<OwnedFd>)> {
    // SAFETY: an anonymous private mapping; checked for MAP_FAILED below and
    // unmapped once the child has left it (after exec or exit).
    let stack = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            GUARD + CHILD_STACK,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_STACK,
            -1,
            0,
        )
    };
    if stack == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the lowest GUARD bytes of the mapping just made, page-aligned
    // (GUARD is a multiple of every page size), used by nothing yet.
    if unsafe { libc::mprotect(stack, GUARD, libc::PROT_NONE) } != 0 {
        let err = io::Error::last_os_error();
        // SAFETY: the mapping made above, not used.
        unsafe { libc::munmap(stack, GUARD + CHILD_STACK) };
        return Err(err);
    }
    // SAFETY: the top of the mapping; the stack grows down on every Linux
    // architecture this builds for.
    let top = unsafe { stack.cast::<u8>().add(GUARD + CHILD_STACK) }.cast::<c_void>();
    let arg = job as *const ChildJob<'_> as *mut c_void;
    let base = libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD;
    let mut pidfd: c_int = -1;
    // SAFETY: child_main only touches `job` (alive until clone returns: the
    // parent is suspended until the child execs or exits) and its own
    // stack; CLONE_PIDFD stores the pidfd into `pidfd`.
    let mut pid = unsafe {
        libc::clone(
            child_main,
            top,
            base | libc::CLONE_PIDFD,
            arg,
            &mut pidfd as *mut c_int,
        )
    };
    // EINVAL: a kernel before CLONE_PIDFD; EPERM, ENOSYS: a seccomp profile
    // that refuses the flag.
    if pid < 0
        && matches!(
            io::Error::last_os_error().raw_os_error(),
            Some(libc::EINVAL | libc::EPERM | libc::ENOSYS)
        )
    {
        pidfd = -1;
        // SAFETY: as above, without CLONE_PIDFD.
        pid = unsafe { libc::clone(child_main, top, base, arg) };
    }
    let err = io::Error::last_os_error();
    // SAFETY: the child no longer runs on this stack.
    unsafe { libc::munmap(stack, GUARD + CHILD_STACK) };
    let Some(pid) = crate::typed_pid(pid) else {
        return Err(err);
    };
    // SAFETY: a new close-on-exec descriptor from CLONE_PIDFD, owned by us.
    let pidfd = (pidfd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(pidfd) });
    Ok((pid, pidfd))
}

/// The child between clone and exec. Plain system calls only.
extern "C" fn child_main(arg: *mut c_void) -> c_int {
    // SAFETY: `arg` is the parent's `ChildJob`, alive and not touched by the
    // parent while it is suspended in clone; the child's only writes go to
    // its `failure` cells.
    let job = unsafe { &*(arg as *const ChildJob<'_>) };
    let fail = |stage: Stage, errno: rustix::io::Errno| -> c_int {
        job.failure.record(stage, errno.raw_os_error());
        127
    };
    // rustix's calls make the system call directly (its linux_raw backend):
    // no allocation, no lock and no errno, so they are as fit for the vfork
    // child as the raw calls they stand for.
    if let Some(procs) = job.enter {
        // SAFETY: the parent's open `cgroup.procs`, alive until the spawn
        // returns (the parent is suspended meanwhile).
        let procs = unsafe { BorrowedFd::borrow_raw(procs) };
        // `0`: the writer itself.
        if let Err(errno) = rustix::io::write(procs, b"0") {
            return fail(Stage::Cgroup, errno);
        }
    }
    let isolated = match job.isolation {
        Isolation::Group => setpgid(None, None).map_err(|e| (Stage::Group, e)),
        Isolation::Session => setsid().map(drop).map_err(|e| (Stage::Session, e)),
    };
    if let Err((stage, errno)) = isolated {
        return fail(stage, errno);
    }
    let outputs = [
        job.output[0].map(rustix::stdio::dup2_stdout),
        job.output[1].map(rustix::stdio::dup2_stderr),
    ];
    if let Some(Err(errno)) = outputs.into_iter().flatten().find(Result::is_err) {
        return fail(Stage::Output, errno);
    }
    let me = getpid();
    if job.foreground {
        // The child takes the terminal itself, before exec, so COMMAND
        // never runs a single instruction in the background. SIGTTOU is
        // still blocked (inherited), so the call cannot stop us.
        let _ = tcsetpgrp(stdin(), me);
    }
    if let Some(sig) = job.pdeathsig {
        set_pdeathsig(sig);
    }
    job.restorer.restore_with(hold_stops);
    if let Some(sig) = job.pdeathsig.filter(|_| getppid() != Some(job.parent)) {
        // The parent died before prctl: no one will send the signal.
        let _ = crate::signal::kill(me.as_raw_pid(), sig);
    }
    if let Some(env) = &job.image.env {
        env.fill_pid(me.as_raw_pid());
    }
    let failure = job.image.exec();
    job.failure.record(failure.stage.get(), failure.errno.get());
    127
}

/// The signals that stop a process for job control and can be caught.
const JOB_STOPS: [Signal; 3] = [Signal::TSTP, Signal::TTIN, Signal::TTOU];

/// `sig`'s bit in [`Failure::held`] (job-control stops are below 32).
fn bit(sig: Signal) -> u32 {
    1u32.checked_shl(sig.raw() as u32).unwrap_or(0)
}

/// The [`Failure::held`] of the spawn under way, for [`hold_stop`]: set by
/// the parent before the clone, cleared after (the tools have one thread).
static HELD: AtomicPtr<AtomicU32> = AtomicPtr::new(std::ptr::null_mut());

/// In the child, until exec: each job-control stop whose action is the
/// default (it would stop the child, the tool waiting in clone) is caught
/// by [`hold_stop`] instead. `execve` resets a caught signal to its default
/// action, so COMMAND starts with the caller's disposition all the same; an
/// ignored one stays ignored and is left alone. Plain system calls only.
fn hold_stops() {
    for sig in JOB_STOPS {
        if crate::sigraw::disposition(sig) != crate::sigraw::Disposition::Default {
            continue;
        }
        // SAFETY: an all-zero sigaction is valid (empty mask, no flags); the
        // handler is a plain function that only does an atomic store. The C
        // library's sigaction (it provides the return trampoline the kernel
        // needs) makes the system call and, in musl, sets two flags of its
        // own in memory shared with the parent, which never sets a handler:
        // no lock, no allocation, fit for the vfork child.
        unsafe {
            let mut act: libc::sigaction = std::mem::zeroed();
            act.sa_sigaction = hold_stop as extern "C" fn(c_int) as usize;
            act.sa_flags = libc::SA_RESTART;
            libc::sigaction(sig.raw(), &act, std::ptr::null_mut());
        }
    }
}

/// The child's catcher of a job-control stop before exec: notes it.
extern "C" fn hold_stop(sig: c_int) {
    let held = HELD.load(Ordering::Relaxed);
    // SAFETY: null, or the spawn's `Failure::held`, alive until the clone
    // returns, which is after every run of this handler (it runs only in the
    // child before exec, while the parent is suspended).
    if let Some(held) = unsafe { held.as_ref() } {
        held.fetch_or(1u32.checked_shl(sig as u32).unwrap_or(0), Ordering::Relaxed);
    }
}

/// `prctl(PR_SET_PDEATHSIG, sig)`. A raw call, not rustix's
/// `set_parent_process_death_signal`: the signal is the caller's choice and
/// may be one the C library reserves (32, 33), which rustix's `Signal` may
/// not carry (see [`crate::pidfd`]). Async-signal-safe: for the vfork child.
fn set_pdeathsig(sig: Signal) {
    // SAFETY: PR_SET_PDEATHSIG takes one integer, a signal number; no memory
    // of ours is read or written.
    unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, sig.raw() as libc::c_ulong, 0, 0, 0) };
}
