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
//! With a cgroup, the child's first act is a write of `0` to its
//! `cgroup.procs`, so not one instruction of COMMAND runs outside it.
//!
//! The child's whole path between clone and exec is [`child_path`], under
//! one contract: it runs on memory the tool prepared and does not touch
//! while it waits (the tool's own, under `CLONE_VM`; its stack is the
//! spawn's [`Arena`]), makes plain system calls only (no allocation, no
//! lock), and writes nothing but its [`Failure`]. The tool's signals stay blocked
//! across the clone, so no signal meant for the tool can run anything in
//! the child; the child unblocks only once its dispositions are back to
//! the caller's, and then a pending signal simply acts on COMMAND.
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
use crate::startup::Startup;
use rustix::process::{getpid, getppid, setpgid, setsid, Pid, WaitOptions};
use rustix::stdio::stdin;
use rustix::termios::tcsetpgrp;
use std::cell::Cell;
use std::ffi::{CStr, CString, OsStr, OsString};
use std::io;
use std::os::fd::{BorrowedFd, FromRawFd, OwnedFd};
use std::os::raw::{c_char, c_int, c_void};
use std::os::unix::ffi::OsStrExt;
use std::sync::atomic::{AtomicPtr, AtomicU32, Ordering};

/// Where COMMAND is put.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Isolation {
    /// `setpgid(0, 0)`: a new process group in the caller's session.
    #[default]
    Group,
    /// `setsid()`: a new session (and group), without a controlling terminal.
    Session,
}

/// How to start COMMAND.
#[derive(Default)]
pub struct Spawn<'a> {
    argv: Vec<OsString>,
    env: Vec<(OsString, Option<OsString>)>,
    /// Variables set to COMMAND's own pid, filled in by the child.
    own_pid_vars: Vec<OsString>,
    isolation: Isolation,
    pdeathsig: Option<Signal>,
    foreground: bool,
    /// The `cgroup.procs` of the cgroup COMMAND enters before exec.
    cgroup: Option<BorrowedFd<'a>>,
}

impl<'a> Spawn<'a> {
    /// COMMAND is `argv[0]` (looked up in PATH) with the rest as arguments.
    pub fn new(argv: &[OsString]) -> Spawn<'a> {
        Spawn {
            argv: argv.to_vec(),
            ..Spawn::default()
        }
    }

    /// Start COMMAND in the cgroup v2 of this `cgroup.procs` (open for
    /// writing): the child writes `0` to it before exec.
    pub fn cgroup(&mut self, procs: BorrowedFd<'a>) -> &mut Self {
        self.cgroup = Some(procs);
        self
    }

    pub fn isolation(&mut self, isolation: Isolation) -> &mut Self {
        self.isolation = isolation;
        self
    }

    /// The signal COMMAND gets if the tool dies (`PR_SET_PDEATHSIG`).
    pub fn pdeathsig(&mut self, sig: Option<Signal>) -> &mut Self {
        self.pdeathsig = sig;
        self
    }

    /// Make COMMAND's group the terminal's foreground group (stdin).
    pub fn foreground(&mut self, on: bool) -> &mut Self {
        self.foreground = on;
        self
    }

    /// Add a variable to COMMAND's environment.
    pub fn env(&mut self, key: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> &mut Self {
        self.env
            .push((key.as_ref().to_owned(), Some(value.as_ref().to_owned())));
        self
    }

    /// Set a variable to COMMAND's own pid (`LISTEN_PID`, `WATCHDOG_PID`):
    /// the entry is made here with room for the digits, and the child
    /// writes its pid into it before exec, so nothing is allocated after
    /// the clone.
    pub fn env_own_pid(&mut self, key: impl AsRef<OsStr>) -> &mut Self {
        self.env.push((key.as_ref().to_owned(), None));
        self.own_pid_vars.push(key.as_ref().to_owned());
        self
    }

    /// Remove a variable from COMMAND's environment.
    pub fn env_remove(&mut self, key: impl AsRef<OsStr>) -> &mut Self {
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
        let arena = Arena::new().map_err(|e| Error::sys("start a process", e))?;
        let failure = Failure::default();
        let job = ChildJob {
            image: &image,
            startup: *startup,
            how: self,
            parent: getpid(),
            output,
            failure: &failure,
        };
        // Where the child's catcher notes a job-control stop.
        HELD.store(&failure.held as *const _ as *mut _, Ordering::Relaxed);
        let cloned = clone_vfork(&job, &arena);
        HELD.store(std::ptr::null_mut(), Ordering::Relaxed);
        let (pid, pidfd) = cloned.map_err(|e| Error::sys("start a process", e))?;
        if failure.errno.get() != 0 {
            // The child failed before or at exec and has exited: reap it.
            let _ = rustix::process::waitpid(Some(pid), WaitOptions::empty());
            return Err(self.failure(failure.stage.get(), failure.errno.get()));
        }
        let held = failure.held.load(Ordering::Relaxed);
        for sig in JOB_STOPS.into_iter().filter(|s| held >> s.raw() & 1 != 0) {
            crate::verbose!("COMMAND got {sig} before its exec: sent to it again");
            let _ = crate::signal::kill(pid.as_raw_pid(), sig);
        }
        // Without CLONE_PIDFD (older kernels): a pidfd of the unreaped child,
        // or none, and SIGCHLD alone watches it.
        let pidfd = pidfd.or_else(|| pidfd::open(pid).ok());
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
        startup.restore();
        let errno = image.exec();
        // Back to the tool's own state: SIGCHLD waited for, signals blocked.
        let _ = crate::sigraw::set_disposition(crate::Signal::CHLD, false);
        crate::startup::block(crate::SigSet::blockable());
        self.failure("", errno)
    }

    /// Everything `execve` needs, prepared before the child exists.
    fn image(&self) -> Result<Image, Error> {
        let program = self.argv.first().cloned().unwrap_or_default();
        let args: Vec<CString> = Result::from_iter(self.argv.iter().map(|a| cstr(a, "argument")))?;
        let candidates = Result::from_iter(candidates(&program).iter().map(|c| cstr(c, "path")))?;
        let argv = (args.iter().map(|c| c.as_ptr()))
            .chain(std::iter::once(std::ptr::null()))
            .collect();
        let sh_argv = std::iter::once(SHELL.as_ptr())
            .chain(std::iter::once(std::ptr::null()))
            .chain(args.iter().skip(1).map(|c| c.as_ptr()))
            .chain(std::iter::once(std::ptr::null()))
            .map(Cell::new)
            .collect();
        let env = self.environment()?;
        Ok(Image {
            candidates,
            _args: args,
            argv,
            sh_argv,
            env,
        })
    }

    /// COMMAND's environment: the tool's own entries, less every one of a
    /// name `env`/`env_remove` changes, then the new values. The kept
    /// entries are pointed at where the C library keeps them, not copied:
    /// copying every variable cost graceful (which sets
    /// `GRACEFUL_GRACE_MS`) some 50,000 instructions per start with 24
    /// variables (docs/benchmarks.md).
    fn environment(&self) -> Result<Environment, Error> {
        let mut env = Environment {
            added: Vec::new(),
            pid_slots: Vec::new(),
            _pointers: Vec::new(),
            envp: environ(None),
        };
        if self.env.is_empty() {
            // Unchanged: passed on as it is.
            return Ok(env);
        }
        // The last change of a name wins; new values go last, in the order
        // of their last change.
        for (i, (key, value)) in self.env.iter().enumerate() {
            let changed_later = self.env[i + 1..].iter().any(|(k, _)| k == key);
            if let (Some(value), false) = (value, changed_later) {
                let mut entry = key.clone();
                entry.push("=");
                entry.push(value);
                env.added.push(cstr(&entry, "variable")?);
            }
        }
        let changed = |name: &[u8]| self.env.iter().any(|(k, _)| k.as_bytes() == name);
        // Read as std::env::vars_os reads it: the name is at least one byte
        // long, and an entry without '=' after it is skipped.
        let mut pointers = Vec::new();
        let mut keep = |entry: &'static CStr| {
            let text = entry.to_bytes();
            if let Some(eq) = text.iter().skip(1).position(|&b| b == b'=') {
                if !changed(&text[..eq + 1]) {
                    pointers.push(entry.as_ptr());
                }
            }
        };
        entries().iter().for_each(|&entry| keep(entry));
        pointers.extend(env.added.iter().map(|c| c.as_ptr()));
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
            env.pid_slots.push((slot, at));
        }
        pointers.push(std::ptr::null());
        env.envp = pointers.as_ptr();
        env._pointers = pointers;
        Ok(env)
    }

    /// The error for a child that failed at `stage` (what it was doing
    /// before exec; empty: the exec itself).
    fn failure(&self, stage: &str, errno: c_int) -> Error {
        let name = self.argv.first().map_or("".into(), |p| p.to_string_lossy());
        let err = io::Error::from_raw_os_error(errno);
        if stage == ENTER {
            return match errno {
                libc::EBUSY | libc::EOPNOTSUPP => Error::usage(format!(
                    "--cgroup: COMMAND cannot be started in its cgroup ({}): cgroup v2's \
                     \"no internal processes\" rule (run reap in a domain cgroup of its own)",
                    describe(&err)
                )),
                _ => Error::sys("start a process in its cgroup", err),
            };
        }
        if !stage.is_empty() {
            return Error::sys(&format!("{stage} for '{name}'"), err);
        }
        let (code, msg) = match errno {
            libc::ENOENT => (
                NOT_FOUND,
                match self.argv.first().and_then(|p| missing_interpreter(p)) {
                    // The file is there: what is missing is its `#!` interpreter.
                    Some((path, interpreter)) => format!(
                        "'{}': its interpreter '{}' not found (the #! line names it; \
                         install it or change the line)",
                        path.to_string_lossy(),
                        interpreter.to_string_lossy()
                    ),
                    None => format!(
                        "'{name}': command not found{}",
                        crate::cli::not_found_hint()
                    ),
                },
            ),
            _ => (
                CANNOT_EXEC,
                format!("'{name}': cannot execute: {}", describe(&err)),
            ),
        };
        Error { code, msg }
    }
}

/// After `execve` said ENOENT: the first candidate for `program` that is
/// a file starting with `#!`, and the interpreter that line names (the
/// kernel's ENOENT was about it, not about the file).
fn missing_interpreter(program: &OsStr) -> Option<(OsString, OsString)> {
    use std::io::Read;
    candidates(program).into_iter().find_map(|path| {
        let mut head = [0u8; 256];
        let mut file = crate::procfs::open(&*path).ok()?;
        let st = rustix::fs::fstat(&file).ok()?;
        if !rustix::fs::FileType::from_raw_mode(st.st_mode).is_file() {
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

/// The C library's environment (`environ(7)`): the array `execve` takes,
/// and each of its entries given to `each` where there is one.
fn environ(mut each: Option<&mut dyn FnMut(&'static CStr)>) -> *const *const c_char {
    extern "C" {
        static environ: *const *const c_char;
    }
    // SAFETY: `environ` is null or a null-terminated array of
    // NUL-terminated strings, walked no further than its null. The tools
    // change no variable (one thread, no setenv), so the array and its
    // strings stay where and as they are for the life of the process:
    // through COMMAND's execve, which reads them.
    unsafe {
        let array = environ;
        let mut at = array;
        while let Some(each) = each.as_mut().filter(|_| !at.is_null() && !(*at).is_null()) {
            each(CStr::from_ptr(*at));
            at = at.add(1);
        }
        array
    }
}

/// The environment's entries, listed once: the tools change no variable
/// (see [`environ`]), where `getenv` compares the name asked for with every
/// entry again at each call (a fifth of graceful's instructions at start).
/// (A mutex, which the allocator links in already, rather than a
/// `OnceLock`'s own code.)
fn entries() -> std::sync::MutexGuard<'static, Vec<&'static CStr>> {
    static ENTRIES: std::sync::Mutex<Vec<&'static CStr>> = std::sync::Mutex::new(Vec::new());
    let mut all = ENTRIES
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    // The unit tests set variables (the tools set none): listed again at
    // each call there.
    if all.is_empty() || cfg!(test) {
        all.clear();
        // Room for a usual environment at once: one block of the
        // allocator's, not one per doubling.
        all.reserve(64);
        environ(Some(&mut |entry| all.push(entry)));
    }
    all
}

/// `name`'s value as `getenv` (so `std::env::var_os`) finds it: the first
/// entry that starts with `name=`. The `=` is looked at first: one byte
/// rules out nearly every other entry.
pub fn var(name: &str) -> Option<&'static OsStr> {
    let n = name.len();
    let value = |e: &&'static CStr| {
        let e: &'static [u8] = e.to_bytes();
        (e.get(n) == Some(&b'=') && e[..n] == *name.as_bytes()).then(|| &e[n + 1..])
    };
    entries().iter().find_map(value).map(OsStr::from_bytes)
}

/// COMMAND's environment: the array `execve` gets (the tool's own where
/// nothing changes), and what it points into besides the tool's entries.
struct Environment {
    added: Vec<CString>,
    /// Entries to be completed with COMMAND's pid: the buffer, and where
    /// its digits go.
    pid_slots: Vec<(Box<[Cell<u8>]>, usize)>,
    _pointers: Vec<*const c_char>,
    envp: *const *const c_char,
}

impl Environment {
    /// Write `pid` into every slot. Async-signal-safe and allocation-free:
    /// runs in the vfork child, which alone uses this environment (the
    /// parent is suspended until the child has exec'd).
    fn fill_pid(&self, pid: i32) {
        let len = pid.unsigned_abs().checked_ilog10().unwrap_or(0) as usize + 1;
        for (slot, at) in &self.pid_slots {
            // Each slot has 12 bytes from `at`: at most 10 digits, written
            // from the last, then the NUL that follows them (already zero).
            let mut n = pid.unsigned_abs();
            for cell in slot[*at..*at + len].iter().rev() {
                cell.set(b'0' + (n % 10) as u8);
                n /= 10;
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
    let path = var("PATH").unwrap_or("/usr/local/bin:/usr/bin:/bin".as_ref());
    path.as_bytes()
        .split(|&b| b == b':')
        .map(|dir| {
            let mut full = OsStr::from_bytes(if dir.is_empty() { b"." } else { dir }).to_owned();
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
    env: Environment,
}

/// The shell `execvp(3)` runs a file with when the kernel cannot.
const SHELL: &CStr = c"/bin/sh";

impl Image {
    /// Try each candidate as `execvp` does; returns only on failure, with
    /// its errno. Allocation-free: runs in the child.
    fn exec(&self) -> c_int {
        let exec = |path: *const c_char, argv: *const *const c_char| {
            // SAFETY: `path` is a NUL-terminated string, `argv` and the
            // environment null-terminated arrays of them (a
            // `Cell<*const c_char>` has the layout of `*const c_char`), all
            // held by `self` through the call.
            unsafe { libc::execve(path, argv, self.env.envp) };
            io::Error::last_os_error()
                .raw_os_error()
                .unwrap_or(libc::ENOENT)
        };
        let mut errno = libc::ENOENT;
        let mut saw_eacces = false;
        for path in &self.candidates {
            errno = exec(path.as_ptr(), self.argv.as_ptr());
            if errno == libc::ENOEXEC {
                // A file without `#!` that is executable: a shell script,
                // as `execvp`, `env`, `timeout` and tini take it. No shell
                // to run it with: the file stays one that cannot be
                // executed (126), as it was.
                self.sh_argv[1].set(path.as_ptr());
                exec(SHELL.as_ptr(), self.sh_argv.as_ptr().cast());
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
        errno
    }
}

/// Written by the child when it fails (errno 0: it exec'd), read by the
/// tool once the clone has returned. Cells: the child writes them while the
/// tool, suspended, holds a shared reference.
#[derive(Default)]
struct Failure {
    /// What the child was doing ("setpgid"; empty: the exec).
    stage: Cell<&'static str>,
    errno: Cell<c_int>,
    /// The job-control stops the child caught before exec (a bit per
    /// signal number), to be sent again once it has exec'd.
    held: AtomicU32,
}

/// The stage of a child that could not enter its cgroup.
const ENTER: &str = "entering the cgroup";

/// What the child reads (and, on failure, writes).
struct ChildJob<'a> {
    image: &'a Image,
    startup: Startup,
    /// The spawn's isolation, parent-death signal and terminal hand-over.
    how: &'a Spawn<'a>,
    parent: Pid,
    /// What descriptors 1 and 2 become, where given.
    output: [Option<BorrowedFd<'a>>; 2],
    failure: &'a Failure,
}

/// Below the child's stack, a guard it may not touch: an overflow faults
/// (SIGSEGV in the child, never a silent write into whatever lies below).
/// The largest base page of the architectures the suite builds for (64 KiB
/// on some arm64 and ppc64el kernels) is whole in it.
const GUARD: usize = 64 * 1024;

const CHILD_STACK: usize = 64 * 1024;

/// The mapping's length, and its top: where the child's stack starts.
const TOP: usize = GUARD + CHILD_STACK;

/// The child's stack, below it a guard: one private anonymous mapping.
struct Arena {
    base: *mut c_void,
}

impl Arena {
    fn new() -> io::Result<Arena> {
        use rustix::mm::{mmap_anonymous, mprotect, munmap, MapFlags, MprotectFlags, ProtFlags};
        let rw = ProtFlags::READ | ProtFlags::WRITE;
        let flags = MapFlags::PRIVATE | MapFlags::STACK;
        // SAFETY: a new mapping, nobody else's: its lowest GUARD bytes made
        // inaccessible; unmapped again if the guard cannot be made.
        unsafe {
            let base = mmap_anonymous(std::ptr::null_mut(), TOP, rw, flags)?;
            if let Err(e) = mprotect(base, GUARD, MprotectFlags::empty()) {
                let _ = munmap(base, TOP);
                return Err(e.into());
            }
            Ok(Arena { base })
        }
    }

    /// The top of the child's stack (it grows down on every Linux
    /// architecture this builds for).
    fn top(&self) -> *mut c_void {
        self.base.cast::<u8>().wrapping_add(TOP).cast()
    }
}

impl Drop for Arena {
    fn drop(&mut self) {
        // SAFETY: our mapping, and the child has exec'd or exited.
        let _ = unsafe { rustix::mm::munmap(self.base, TOP) };
    }
}

/// `clone(CLONE_VM | CLONE_VFORK | CLONE_PIDFD | SIGCHLD)` running
/// [`child_main`] on the arena's stack; without CLONE_PIDFD where the
/// kernel refuses it (EINVAL: before 5.2; EPERM, ENOSYS: a seccomp profile).
fn clone_vfork(job: &ChildJob<'_>, arena: &Arena) -> io::Result<(Pid, Option<OwnedFd>)> {
    let arg = job as *const ChildJob<'_> as *mut c_void;
    let base = libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD;
    let mut pidfd: c_int = -1;
    let mut pid = -1;
    for flags in [base | libc::CLONE_PIDFD, base] {
        // SAFETY: child_main runs child_path, which keeps the contract of
        // the module doc; its stack is the arena's, below `top`, alive until
        // after clone returns (the tool is suspended until the child exec'd
        // or exited). Only CLONE_PIDFD makes the kernel write, to `pidfd`.
        pid = unsafe {
            libc::clone(
                child_main,
                arena.top(),
                flags,
                arg,
                &mut pidfd as *mut c_int,
            )
        };
        let refused = io::Error::last_os_error().raw_os_error();
        if pid >= 0 || !matches!(refused, Some(libc::EINVAL | libc::EPERM | libc::ENOSYS)) {
            break;
        }
    }
    let pid = crate::typed_pid(pid).ok_or_else(io::Error::last_os_error)?;
    // SAFETY: a new close-on-exec descriptor from CLONE_PIDFD, nobody else's.
    let pidfd = (pidfd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(pidfd) });
    Ok((pid, pidfd))
}

/// [`child_path`] as `clone`'s entry point.
extern "C" fn child_main(arg: *mut c_void) -> c_int {
    // SAFETY: `arg` is the tool's `ChildJob`, alive and untouched while the
    // tool is suspended in clone.
    child_path(unsafe { &*(arg as *const ChildJob<'_>) })
}

/// The child between clone and exec, all of it: plain system calls only,
/// and no write but to `job.failure`. Returns (as the child's exit code)
/// only on failure.
fn child_path(job: &ChildJob<'_>) -> c_int {
    // rustix's calls make the system call directly (its linux_raw backend):
    // no allocation, no lock and no errno, so they are as fit for the vfork
    // child as the raw calls they stand for.
    let setup = || -> Result<(), (&'static str, rustix::io::Errno)> {
        if let Some(procs) = job.how.cgroup {
            // `0`: the writer itself.
            rustix::io::write(procs, b"0").map_err(|e| (ENTER, e))?;
        }
        match job.how.isolation {
            Isolation::Group => setpgid(None, None).map_err(|e| ("setpgid", e))?,
            Isolation::Session => drop(setsid().map_err(|e| ("setsid", e))?),
        }
        let output = |e| ("the output descriptors", e);
        (job.output[0].map(rustix::stdio::dup2_stdout).transpose()).map_err(output)?;
        (job.output[1].map(rustix::stdio::dup2_stderr).transpose()).map_err(output)?;
        Ok(())
    };
    if let Err((stage, errno)) = setup() {
        job.failure.stage.set(stage);
        job.failure.errno.set(errno.raw_os_error());
        return 127;
    }
    let me = getpid();
    if job.how.foreground {
        // The child takes the terminal itself, before exec, so COMMAND
        // never runs a single instruction in the background. SIGTTOU is
        // still blocked (inherited), so the call cannot stop us.
        let _ = tcsetpgrp(stdin(), me);
    }
    if let Some(sig) = job.how.pdeathsig {
        let _ = crate::sigraw::int_call(crate::sigraw::IntCall::ParentDeathSignal(sig));
    }
    job.startup.restore_with(hold_stops);
    if let Some(sig) = job.how.pdeathsig.filter(|_| getppid() != Some(job.parent)) {
        // The parent died before prctl: no one will send the signal.
        let _ = crate::signal::kill(me.as_raw_pid(), sig);
    }
    job.image.env.fill_pid(me.as_raw_pid());
    // The stage stays empty: the exec itself.
    job.failure.errno.set(job.image.exec());
    127
}

/// The signals that stop a process for job control and can be caught (each
/// a bit of [`Failure::held`]: they are below 32).
const JOB_STOPS: [Signal; 3] = [Signal::TSTP, Signal::TTIN, Signal::TTOU];

/// The [`Failure::held`] of the spawn under way, for [`hold_stop`]: set by
/// the tool before the clone, cleared after (the tools have one thread).
static HELD: AtomicPtr<AtomicU32> = AtomicPtr::new(std::ptr::null_mut());

/// In the child, until exec: each job-control stop whose action is the
/// default (it would stop the child, the tool waiting in clone) is caught
/// by [`hold_stop`] instead. `execve` resets a caught signal to its default
/// action, so COMMAND starts with the caller's disposition all the same; an
/// ignored one stays ignored and is left alone. Plain system calls only.
fn hold_stops() {
    let default =
        |s: &Signal| crate::sigraw::disposition(*s) == crate::sigraw::Disposition::Default;
    for sig in JOB_STOPS.into_iter().filter(default) {
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
