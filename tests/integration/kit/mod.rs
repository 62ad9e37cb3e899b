//! Shared helpers for the integration tests: locating the binaries, running a process with its
//! stdout read line by line in the background, and cleaning up every process a test started.

#![allow(dead_code)]

/// Readers of /proc for "eventually" facts about processes.
pub mod procfs;
/// Helpers for the reap tests.
pub mod reap;
/// The test kit and the sigprobe handshake child themselves.
mod selftest;
/// Skipped tests say why and are counted (PGWRAP_SKIP_LOG).
pub mod skip;
/// A real terminal: a private tmux server running an interactive shell.
pub mod tmux;

use std::collections::VecDeque;
use std::ffi::OsStr;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, TryRecvError};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Default patience for anything a test waits for. Generous on purpose: tests never assert speed.
pub const TIMEOUT: Duration = Duration::from_secs(10);

/// After this long, a [`Run`] kills everything it owns, even if the test is stuck.
pub const WATCHDOG: Duration = Duration::from_secs(60);

/// A native machine's time to start and reap `chaosproc` (which exits at
/// once), in microseconds: a few milliseconds at most, under load.
pub const NATIVE_SPAWN_US: u64 = 4000;

/// How many times slower than a native machine this one runs processes, 1
/// to 10 (1 on a native machine), with the median start it was measured
/// from, in microseconds. Measured once per test run: the median time of 15
/// starts of `chaosproc`, in units of [`NATIVE_SPAWN_US`]. An emulated CPU
/// (qemu's TCG) runs the tools and their trees several times slower while
/// timers keep wall time, so a bound on CPU time or on a wait that holds a
/// native machine's work grows by this factor. `PGWRAP_CHAOS_SLOW=N` sets it.
pub fn slowdown_measured() -> (u64, u64) {
    static SLOWDOWN: std::sync::OnceLock<(u64, u64)> = std::sync::OnceLock::new();
    *SLOWDOWN.get_or_init(|| {
        let mut times: Vec<u64> = (0..15)
            .map(|_| {
                let t = Instant::now();
                let _ = Command::new(bin("chaosproc"))
                    .stdin(Stdio::null())
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .status();
                t.elapsed().as_micros() as u64
            })
            .collect();
        times.sort_unstable();
        let median = times[times.len() / 2];
        let factor = std::env::var("PGWRAP_CHAOS_SLOW")
            .ok()
            .and_then(|v| v.trim().parse::<u64>().ok())
            .unwrap_or(median.div_ceil(NATIVE_SPAWN_US));
        (factor.clamp(1, 10), median)
    })
}

/// The factor of [`slowdown_measured`].
pub fn slowdown() -> u32 {
    slowdown_measured().0 as u32
}

/// A native machine's bound `d` on this machine: `d` times [`slowdown`].
pub fn slowed(d: Duration) -> Duration {
    d * slowdown()
}

/// The message of a line `TOOL[PID]: message` (every line a tool prints
/// while it runs, with or without -v, carries its pid), if `line` is one
/// of `tool`'s.
pub fn said<'a>(line: &'a str, tool: &str) -> Option<&'a str> {
    let rest = line.strip_prefix(tool)?.strip_prefix('[')?;
    let (pid, msg) = rest.split_once("]: ")?;
    (!pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit())).then_some(msg)
}

/// Path of a binary of this package (`pgwrap`, `graceful`, `reap`, `sigprobe`).
///
/// With `PGWRAP_TEST_STATIC=1` (`scripts/check --static`) the three tools
/// are those of the static build ([`static_bin`]: musl), so the same tests
/// run against the binaries images carry; the test helpers stay the default
/// build's.
pub fn bin(name: &str) -> PathBuf {
    if matches!(name, "pgwrap" | "graceful" | "reap") && static_pass() {
        return static_bin(name);
    }
    let from_cargo = match name {
        "pgwrap" => option_env!("CARGO_BIN_EXE_pgwrap"),
        "graceful" => option_env!("CARGO_BIN_EXE_graceful"),
        "reap" => option_env!("CARGO_BIN_EXE_reap"),
        "sigprobe" => option_env!("CARGO_BIN_EXE_sigprobe"),
        _ => None,
    };
    if let Some(path) = from_cargo {
        return PathBuf::from(path);
    }
    // target/debug/deps/integration-HASH -> target/debug/NAME
    let exe = std::env::current_exe().expect("current_exe");
    let deps = exe.parent().expect("test binary has a parent directory");
    deps.join("..").join(name)
}

/// The tools under test are the static build's (`PGWRAP_TEST_STATIC=1`).
pub fn static_pass() -> bool {
    std::env::var_os("PGWRAP_TEST_STATIC").is_some_and(|v| v == "1")
}

/// Path of a binary of the static build (`scripts/build-static`, the
/// release build that images and the static package carry, made once per
/// run, or found up to date where scripts/package built it): what runs in an empty root or a FROM scratch image,
/// where the default build, linked against the system's glibc, finds no
/// loader. PGWRAP_STATIC_DIR names a directory of static tools to take
/// instead (the VM tier's, from scripts/cross-build, where no build runs).
pub fn static_bin(name: &str) -> PathBuf {
    if let Some(dir) = std::env::var_os("PGWRAP_STATIC_DIR") {
        return PathBuf::from(dir).join(name);
    }
    static DIR: std::sync::OnceLock<Result<PathBuf, String>> = std::sync::OnceLock::new();
    let dir = DIR.get_or_init(|| {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/build-static");
        let out = Command::new(&script)
            .arg("--locked")
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("{}: {e}", script.display()))?;
        if !out.status.success() {
            return Err(format!(
                "{} --locked: {}\n{}",
                script.display(),
                out.status,
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        let dir = String::from_utf8_lossy(&out.stdout).trim().to_string();
        Ok(PathBuf::from(dir))
    });
    match dir {
        Ok(dir) => dir.join(name),
        Err(e) => panic!("the static build failed: {e}"),
    }
}

/// Lock a mutex, ignoring poisoning (a panicking test must still be able to clean up).
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

// ---------------------------------------------------------------------------------------------
// Ready lines

/// A parsed `ready pid=.. pgid=.. sid=.. ppid=.. role=..` line of sigprobe.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ready {
    pub pid: i32,
    pub pgid: i32,
    pub sid: i32,
    pub ppid: i32,
    pub role: String,
}

impl Ready {
    /// Parse a line that contains `ready pid=...` (anything before it is ignored).
    pub fn parse(line: &str) -> Option<Ready> {
        let start = line.find("ready pid=")?;
        let mut ready = Ready {
            pid: 0,
            pgid: 0,
            sid: 0,
            ppid: 0,
            role: String::new(),
        };
        let mut seen = 0;
        for token in line[start + "ready ".len()..].split_whitespace() {
            let Some((key, value)) = token.split_once('=') else {
                continue;
            };
            match key {
                "pid" => ready.pid = value.parse().ok()?,
                "pgid" => ready.pgid = value.parse().ok()?,
                "sid" => ready.sid = value.parse().ok()?,
                "ppid" => ready.ppid = value.parse().ok()?,
                "role" => ready.role = value.to_string(),
                _ => continue,
            }
            seen += 1;
        }
        (seen == 5 && ready.pid > 0).then_some(ready)
    }
}

// ---------------------------------------------------------------------------------------------
// Run

/// Builder for [`Run`]; see [`Run::new`].
pub struct RunBuilder {
    cmd: Command,
    display: String,
    stdin_piped: bool,
    stderr_piped: bool,
    setpgid: bool,
    watchdog: Duration,
}

impl RunBuilder {
    pub fn arg(mut self, arg: impl AsRef<OsStr>) -> Self {
        self.display.push(' ');
        self.display.push_str(&arg.as_ref().to_string_lossy());
        self.cmd.arg(arg);
        self
    }

    pub fn args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        for arg in args {
            self = self.arg(arg);
        }
        self
    }

    pub fn env(mut self, key: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> Self {
        self.cmd.env(key, value);
        self
    }

    pub fn env_remove(mut self, key: impl AsRef<OsStr>) -> Self {
        self.cmd.env_remove(key);
        self
    }

    pub fn current_dir(mut self, dir: impl AsRef<Path>) -> Self {
        self.cmd.current_dir(dir);
        self
    }

    /// Give the process a pipe as stdin (default: /dev/null). See [`Run::write_stdin`].
    pub fn stdin_piped(mut self) -> Self {
        self.stdin_piped = true;
        self
    }

    /// Capture stderr (default: inherited, so it shows in the test output).
    /// See [`Run::stderr_all`].
    pub fn stderr_piped(mut self) -> Self {
        self.stderr_piped = true;
        self
    }

    /// Put the started process in a process group of its own (default true).
    pub fn setpgid(mut self, own_group: bool) -> Self {
        self.setpgid = own_group;
        self
    }

    /// Kill everything this run owns after `limit` (default [`WATCHDOG`]).
    pub fn watchdog(mut self, limit: Duration) -> Self {
        self.watchdog = limit;
        self
    }

    /// Any other adjustment of the underlying [`Command`] (e.g. a `pre_exec` hook).
    pub fn configure(mut self, f: impl FnOnce(&mut Command)) -> Self {
        f(&mut self.cmd);
        self
    }

    pub fn spawn(mut self) -> Run {
        use std::os::unix::process::CommandExt;

        self.cmd.stdout(Stdio::piped());
        self.cmd.stdin(if self.stdin_piped {
            Stdio::piped()
        } else {
            Stdio::null()
        });
        self.cmd.stderr(if self.stderr_piped {
            Stdio::piped()
        } else {
            Stdio::inherit()
        });
        if self.setpgid {
            self.cmd.process_group(0);
        }
        let mut child = match self.cmd.spawn() {
            Ok(child) => child,
            Err(e) => panic!("cannot start `{}`: {e}", self.display),
        };
        let pid = child.id() as i32;
        let stdin = child.stdin.take();
        let pgid = if self.setpgid {
            pid
        } else {
            // SAFETY: plain syscall.
            unsafe { libc::getpgrp() }
        };

        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                waited: false,
                done: false,
                lines: Vec::new(),
                pids: Vec::new(),
                pgids: Vec::new(),
            }),
            cond: Condvar::new(),
            child_pid: pid,
            // The child is not reaped yet, so this is its start time.
            child_start: procfs::start_time(pid),
            own_group: self.setpgid,
        });

        // stdout reader: record every line (and the processes announced in ready lines) before
        // handing it to the test.
        let (tx, rx) = mpsc::channel();
        let stdout = child.stdout.take().expect("stdout is piped");
        let reader_shared = Arc::clone(&shared);
        let stdout_thread = std::thread::spawn(move || {
            let mut reader = BufReader::new(stdout);
            let mut buf = Vec::new();
            loop {
                buf.clear();
                match reader.read_until(b'\n', &mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {}
                }
                if buf.last() == Some(&b'\n') {
                    buf.pop();
                }
                let line = String::from_utf8_lossy(&buf).into_owned();
                reader_shared.record_line(&line);
                if tx.send(line).is_err() {
                    // The Run is gone; keep draining so writers never block.
                    continue;
                }
            }
        });

        let stderr_buf = Arc::new(Mutex::new(Vec::new()));
        let (stderr_done_tx, stderr_done_rx) = mpsc::channel::<()>();
        let stderr_thread = child.stderr.take().map(|mut stderr| {
            let buf = Arc::clone(&stderr_buf);
            std::thread::spawn(move || {
                let mut chunk = [0u8; 4096];
                loop {
                    match stderr.read(&mut chunk) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => lock(&buf).extend_from_slice(&chunk[..n]),
                    }
                }
                let _ = stderr_done_tx.send(());
            })
        });

        let dog_shared = Arc::clone(&shared);
        let limit = self.watchdog;
        let display = self.display.clone();
        let watchdog_thread = std::thread::spawn(move || {
            let deadline = Instant::now() + limit;
            let mut state = lock(&dog_shared.state);
            while !state.done {
                let now = Instant::now();
                if now >= deadline {
                    eprintln!("kit: watchdog: `{display}` still running after {limit:?}, killing");
                    dog_shared.kill_all(&state);
                    return;
                }
                state = dog_shared
                    .cond
                    .wait_timeout(state, deadline - now)
                    .unwrap_or_else(|e| e.into_inner())
                    .0;
            }
        });

        Run {
            display: self.display,
            child,
            pid,
            pgid,
            shared,
            rx,
            unmatched: VecDeque::new(),
            stdout_closed: false,
            stdin,
            status: None,
            stderr_buf,
            stderr_done: stderr_done_rx,
            stderr_finished: stderr_thread.is_none(),
            threads: [Some(stdout_thread), stderr_thread, Some(watchdog_thread)],
        }
    }
}

struct State {
    /// The direct child has been reaped: its pid must not be signalled any more.
    waited: bool,
    /// The Run was dropped: the watchdog stands down.
    done: bool,
    /// Every stdout line so far.
    lines: Vec<String>,
    /// (pid, start time) of every process announced by a ready line.
    pids: Vec<(i32, u64)>,
    /// Process groups announced by ready lines, with the start time of
    /// their leader then (`None` if it was already gone).
    pgids: Vec<(i32, Option<u64>)>,
}

struct Shared {
    state: Mutex<State>,
    cond: Condvar,
    child_pid: i32,
    child_start: Option<u64>,
    own_group: bool,
}

impl Shared {
    fn record_line(&self, line: &str) {
        let mut state = lock(&self.state);
        // Only a line whose pid, seen from here, has the announced group and
        // session: a probe in another PID namespace announces numbers that
        // name other processes here, which must never be killed.
        let ours =
            |r: &Ready| procfs::pgid(r.pid) == Some(r.pgid) && procfs::sid(r.pid) == Some(r.sid);
        if let Some(ready) = Ready::parse(line).filter(ours) {
            if let Some(start) = procfs::start_time(ready.pid) {
                if !state.pids.iter().any(|&(p, _)| p == ready.pid) {
                    state.pids.push((ready.pid, start));
                }
            }
            if !state.pgids.iter().any(|&(g, _)| g == ready.pgid) {
                state
                    .pgids
                    .push((ready.pgid, procfs::start_time(ready.pgid)));
            }
        }
        state.lines.push(line.to_string());
    }

    /// SIGKILL everything owned. Called with the state locked, so the direct child cannot be
    /// reaped (and its pid reused) meanwhile.
    fn kill_all(&self, state: &State) {
        // SAFETY: plain syscalls.
        let (me, my_group) = unsafe { (libc::getpid(), libc::getpgrp()) };
        let kill = |pid: i32| {
            if pid > 1 && pid != me {
                // SAFETY: plain syscall.
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
        };
        // A group is killed only if its id cannot have been given to a new
        // group: once every member is gone the id is free, and a process
        // that later gets that pid leads a stranger's group. So not if a
        // process with the group's id exists that is not the leader seen.
        let kill_group = |pgid: i32, leader_start: Option<u64>| {
            let reused = procfs::start_time(pgid).is_some_and(|now| Some(now) != leader_start);
            // SAFETY: plain syscalls; kill(-pgid, 0) checks that the group still exists.
            unsafe {
                if !reused && pgid > 1 && pgid != my_group && libc::kill(-pgid, 0) == 0 {
                    libc::kill(-pgid, libc::SIGKILL);
                }
            }
        };
        if !state.waited {
            // Descendants still attached to the child, even those that never said ready.
            let descendants = procfs::descendants(self.child_pid);
            kill(self.child_pid);
            for pid in descendants {
                kill(pid);
            }
        }
        if self.own_group {
            // The group created for the child, also after the child was reaped: its id cannot
            // be handed out again while any member is left (and kill_group checks the leader).
            kill_group(self.child_pid, self.child_start);
        }
        for &(pid, start) in &state.pids {
            if procfs::start_time(pid) == Some(start) {
                kill(pid);
            }
        }
        for &(pgid, leader_start) in &state.pgids {
            kill_group(pgid, leader_start);
        }
    }
}

/// A started process whose stdout is read line by line in the background.
///
/// On drop (or when its watchdog fires) it SIGKILLs the process, every process announced by a
/// `ready pid=N` line, and every process group announced by a ready line, then reaps the child.
pub struct Run {
    display: String,
    child: Child,
    pid: i32,
    pgid: i32,
    shared: Arc<Shared>,
    rx: Receiver<String>,
    /// Lines received but not yet matched by an `expect_*` call, in order.
    unmatched: VecDeque<String>,
    stdout_closed: bool,
    stdin: Option<ChildStdin>,
    status: Option<ExitStatus>,
    stderr_buf: Arc<Mutex<Vec<u8>>>,
    stderr_done: Receiver<()>,
    stderr_finished: bool,
    threads: [Option<JoinHandle<()>>; 3],
}

impl Run {
    /// Start building a run of `program` (e.g. `Run::new(bin("sigprobe"))`).
    #[allow(clippy::new_ret_no_self)]
    pub fn new(program: impl AsRef<OsStr>) -> RunBuilder {
        let program = program.as_ref();
        RunBuilder {
            cmd: Command::new(program),
            display: program.to_string_lossy().into_owned(),
            stdin_piped: false,
            stderr_piped: false,
            setpgid: true,
            watchdog: WATCHDOG,
        }
    }

    pub fn pid(&self) -> i32 {
        self.pid
    }

    /// The process group of the started process: its own pid with `setpgid(true)`, else the
    /// test's group.
    pub fn pgid(&self) -> i32 {
        self.pgid
    }

    /// Every stdout line received so far (matched or not), in order.
    pub fn lines_so_far(&self) -> Vec<String> {
        lock(&self.shared.state).lines.clone()
    }

    /// Processes announced by ready lines so far (pids only).
    pub fn announced_pids(&self) -> Vec<i32> {
        lock(&self.shared.state)
            .pids
            .iter()
            .map(|&(p, _)| p)
            .collect()
    }

    /// Wait for the first not-yet-matched stdout line containing `needle` and return it.
    /// Lines that do not match stay available for later `expect_*` calls.
    pub fn expect_line(&mut self, needle: &str, timeout: Duration) -> String {
        self.expect_line_with(&format!("a line containing {needle:?}"), timeout, |line| {
            line.contains(needle)
        })
    }

    /// Like [`Run::expect_line`] with a predicate; `what` describes it in the panic message.
    pub fn expect_line_with(
        &mut self,
        what: &str,
        timeout: Duration,
        pred: impl Fn(&str) -> bool,
    ) -> String {
        let deadline = Instant::now() + timeout;
        if let Some(pos) = self.unmatched.iter().position(|l| pred(l)) {
            return self.unmatched.remove(pos).unwrap_or_default();
        }
        loop {
            if self.stdout_closed {
                self.fail(&format!("stdout closed before {what}"));
            }
            let now = Instant::now();
            if now >= deadline {
                self.fail(&format!("timed out after {timeout:?} waiting for {what}"));
            }
            match self.rx.recv_timeout(deadline - now) {
                Ok(line) => {
                    if pred(&line) {
                        return line;
                    }
                    self.unmatched.push_back(line);
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => self.stdout_closed = true,
            }
        }
    }

    /// Wait for the next not-yet-matched ready line.
    pub fn expect_ready(&mut self, timeout: Duration) -> Ready {
        let line = self.expect_line_with("a ready line", timeout, |l| Ready::parse(l).is_some());
        Ready::parse(&line).expect("matched a ready line")
    }

    /// Wait for `n` ready lines (in arrival order).
    pub fn expect_readies(&mut self, n: usize, timeout: Duration) -> Vec<Ready> {
        let deadline = Instant::now() + timeout;
        (0..n)
            .map(|_| self.expect_ready(deadline.saturating_duration_since(Instant::now())))
            .collect()
    }

    /// Whether every process holding stdout has closed it, so that
    /// [`Run::lines_so_far`] holds all it will ever hold; without waiting.
    pub fn stdout_done(&mut self) -> bool {
        while !self.stdout_closed {
            match self.rx.try_recv() {
                Ok(line) => self.unmatched.push_back(line),
                Err(TryRecvError::Empty) => return false,
                Err(TryRecvError::Disconnected) => self.stdout_closed = true,
            }
        }
        true
    }

    /// Wait until stdout is closed by every process holding it; returns the lines that were
    /// never matched.
    pub fn expect_eof(&mut self, timeout: Duration) -> Vec<String> {
        let deadline = Instant::now() + timeout;
        while !self.stdout_closed {
            let now = Instant::now();
            if now >= deadline {
                self.fail(&format!(
                    "timed out after {timeout:?} waiting for stdout to close"
                ));
            }
            match self.rx.recv_timeout(deadline - now) {
                Ok(line) => self.unmatched.push_back(line),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => self.stdout_closed = true,
            }
        }
        self.unmatched.iter().cloned().collect()
    }

    /// Try to reap the child without blocking (with the state locked, see `kill_all`).
    fn try_reap(&mut self) -> Option<ExitStatus> {
        if self.status.is_some() {
            return self.status;
        }
        let mut state = lock(&self.shared.state);
        match self.child.try_wait() {
            Ok(Some(status)) => {
                state.waited = true;
                self.status = Some(status);
            }
            Ok(None) => {}
            Err(e) => {
                drop(state);
                panic!("waiting for `{}` failed: {e}", self.display);
            }
        }
        self.status
    }

    /// The exit status if the child has already exited (reaping it), without waiting.
    pub fn try_exit(&mut self) -> Option<ExitStatus> {
        self.try_reap()
    }

    /// Wait for the started process to exit. On timeout, kill everything and panic.
    pub fn wait_exit(&mut self, timeout: Duration) -> ExitStatus {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.try_reap() {
                return status;
            }
            if Instant::now() >= deadline {
                self.fail(&format!("timed out after {timeout:?} waiting for exit"));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Everything written to stderr (needs `stderr_piped()`). Waits for the process to exit and
    /// for stderr to close (each up to [`TIMEOUT`]); returns what was read either way.
    pub fn stderr_all(&mut self) -> String {
        self.wait_exit(TIMEOUT);
        if !self.stderr_finished {
            self.stderr_finished = self.stderr_done.recv_timeout(TIMEOUT).is_ok();
        }
        self.stderr_so_far()
    }

    /// What was read from stderr so far (needs `stderr_piped()`).
    pub fn stderr_so_far(&self) -> String {
        String::from_utf8_lossy(&lock(&self.stderr_buf)).into_owned()
    }

    /// Write to the process's stdin (needs `stdin_piped()`).
    pub fn write_stdin(&mut self, text: &str) {
        let stdin = match self.stdin.as_mut() {
            Some(stdin) => stdin,
            None => panic!(
                "write_stdin: stdin of `{}` is not piped or closed",
                self.display
            ),
        };
        if let Err(e) = stdin.write_all(text.as_bytes()).and_then(|_| stdin.flush()) {
            panic!("write_stdin to `{}` failed: {e}", self.display);
        }
    }

    /// Close our end of stdin (the process then sees end of input).
    pub fn close_stdin(&mut self) {
        self.stdin = None;
    }

    /// Send `sig` to the started process. Panics if it was already reaped.
    pub fn signal(&mut self, sig: i32) {
        let state = lock(&self.shared.state);
        assert!(
            !state.waited,
            "signal({sig}): `{}` was already reaped",
            self.display
        );
        // SAFETY: plain syscall; the child is not reaped, so its pid is still ours.
        if unsafe { libc::kill(self.pid, sig) } != 0 {
            let e = std::io::Error::last_os_error();
            drop(state);
            panic!("kill({}, {sig}) failed: {e}", self.pid);
        }
    }

    /// Send `sig` to the started process's own group (needs `setpgid(true)`).
    pub fn signal_group(&mut self, sig: i32) {
        // SAFETY: plain syscall.
        let my_group = unsafe { libc::getpgrp() };
        assert!(
            self.pgid != my_group,
            "signal_group: `{}` shares the test's process group (setpgid(false))",
            self.display
        );
        // SAFETY: plain syscall.
        if unsafe { libc::kill(-self.pgid, sig) } != 0 {
            panic!(
                "kill(-{}, {sig}) failed: {}",
                self.pgid,
                std::io::Error::last_os_error()
            );
        }
    }

    /// Kill everything owned now (as on drop), without reaping.
    pub fn kill_all(&mut self) {
        let state = lock(&self.shared.state);
        self.shared.kill_all(&state);
    }

    fn fail(&mut self, why: &str) -> ! {
        // Pull in whatever is already queued so the message is complete.
        while let Ok(line) = self.rx.try_recv() {
            self.unmatched.push_back(line);
        }
        let lines = self.lines_so_far();
        let stderr = self.stderr_so_far();
        self.kill_all();
        let mut msg = format!(
            "`{}` (pid {}): {why}\nstdout lines so far:\n",
            self.display, self.pid
        );
        for line in &lines {
            msg.push_str("  | ");
            msg.push_str(line);
            msg.push('\n');
        }
        if !stderr.is_empty() {
            msg.push_str("stderr so far:\n");
            for line in stderr.lines() {
                msg.push_str("  ! ");
                msg.push_str(line);
                msg.push('\n');
            }
        }
        panic!("{msg}");
    }
}

impl Drop for Run {
    fn drop(&mut self) {
        {
            let mut state = lock(&self.shared.state);
            state.done = true;
            self.shared.kill_all(&state);
        }
        self.shared.cond.notify_all();
        self.stdin = None;
        if self.status.is_none() {
            let mut state = lock(&self.shared.state);
            if let Ok(status) = self.child.wait() {
                self.status = Some(status);
            }
            state.waited = true;
        }
        if let Some(dog) = self.threads[2].take() {
            let _ = dog.join();
        }
        // The stdout/stderr threads end when the last holder of the pipes is gone; they are
        // not joined, so a process that escaped everything cannot hang the test.
    }
}

// ---------------------------------------------------------------------------------------------
// Temporary directories

/// A directory removed (recursively) on drop.
pub struct TempDir {
    path: PathBuf,
}

impl TempDir {
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// `self.path().join(name)`.
    pub fn join(&self, name: impl AsRef<Path>) -> PathBuf {
        self.path.join(name)
    }
}

impl std::ops::Deref for TempDir {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.path
    }
}

impl AsRef<Path> for TempDir {
    fn as_ref(&self) -> &Path {
        &self.path
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// A fresh, empty directory under the system temp dir, unique per call.
pub fn temp_dir(tag: &str) -> TempDir {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let tag: String = tag
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    loop {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let path = std::env::temp_dir().join(format!(
            "pgwrap-test-{tag}-{}-{n}-{nanos}",
            std::process::id()
        ));
        match std::fs::create_dir(&path) {
            Ok(()) => return TempDir { path },
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => panic!("cannot create {}: {e}", path.display()),
        }
    }
}
