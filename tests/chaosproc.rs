//! `chaosproc`: the scenario processes of the chaos harness
//! (tests/integration/hostile/chaos.rs). Plain std + libc.
//!
//! Three modes:
//!
//! * `chaosproc node LOG SPEC`: one process of a scenario's tree (the root
//!   is COMMAND). SPEC lists every node, `;`-separated; node 0 is the root.
//!   A node is `PARENT.KIND.NAME.TERM.END.LIFE.BURST`:
//!   - PARENT: index of the node that forks it (`-` for the root);
//!   - KIND: `g` plain fork (stays in the parent's group), `s` setsid()
//!     child, `d` double-forked daemon (fork, setsid, fork, middle exits);
//!   - NAME: hex of the bytes given to PR_SET_NAME, `-` to keep the name;
//!   - TERM: what TERM, INT, HUP and QUIT do: `d` default, `i` ignored,
//!     `cMS` caught, then exit 3 after MS milliseconds;
//!   - END: after LIFE ms: `xN` exit N, `kN` die of signal N, `p` SIGSTOP
//!     itself (exit 0 if continued);
//!   - BURST: children forked at once that `_exit(0)` and are never reaped
//!     by the node.
//!
//!   Each node appends `ready node=I pid=P ppid=PP pgid=G` to LOG (one
//!   write(2), O_APPEND) before it forks its children. With `CHAOS_NOTIFY`
//!   set, the root first forks a notification sender that sends that text
//!   to `$NOTIFY_SOCKET` and exits at once (as user `CHAOS_NOTIFY_USER`
//!   when set: a tree that changes user), reaps it, and logs
//!   `notify node=0 sent=1` (or `sent=0`, `sent=nofork` where a process
//!   limit kept it from forking the sender, or `sent=unset` without
//!   `NOTIFY_SOCKET`) before its ready line.
//! * `chaosproc cleanup LOG CODE MS`: a reap cleanup: appends
//!   `cleanup pid=P status=.. signal=.. cause=..` (from REAP_STATUS,
//!   REAP_SIGNAL, REAP_CAUSE), sleeps MS ms, exits CODE.
//! * `chaosproc sup PLAN`: the scenario supervisor. A child subreaper (or
//!   PID 1 of a PID namespace) that starts the tool chain with the
//!   inherited state the plan asks for, fires the plan's events, recycles
//!   freed pids into decoys (ns_last_pid), watches for zombies and spinning,
//!   ends everything of the scenario by PID, and writes what it saw to the
//!   plan's result file. It judges nothing: the harness does.
//! * `chaosproc identity-race N`: the supervisor's look at a process in an
//!   execve, raced: see [`identity_race`].

use std::collections::HashMap;
use std::ffi::CString;
use std::io::Write;
use std::os::unix::process::CommandExt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    match args.get(1).map(String::as_str) {
        Some("node") if args.len() == 4 => {
            let nodes = parse_spec(&args[3]).unwrap_or_else(|e| die(&e));
            node(&args[2], &nodes, 0)
        }
        Some("cleanup") if args.len() == 5 => cleanup(&args[2], &args[3], &args[4]),
        Some("sup") if args.len() == 3 => sup(&args[2]),
        Some("identity-race") if args.len() == 3 => identity_race(&args[2]),
        _ => {
            die("usage: chaosproc node LOG SPEC | cleanup LOG CODE MS | sup PLAN | identity-race N")
        }
    }
}

fn die(msg: &str) -> ! {
    eprintln!("chaosproc: {msg}");
    std::process::exit(2)
}

// ---------------------------------------------------------------------------------------------
// Raw signal syscalls (glibc hides 32 and 33 from its wrappers).

// Through the engine's own calls (pgkit::sigraw), which take the kernel's
// structures for the target from linux-raw-sys: no layout of our own.

/// Set `sig` to SIG_DFL (0) or SIG_IGN (1), any signal number.
fn raw_disposition(sig: i32, handler: usize) {
    if let Some(sig) = pgkit::Signal::from_raw(sig) {
        let _ = pgkit::sigraw::set_disposition(sig, handler == 1);
    }
}

/// Make `set` (bit sig-1) the mask. Async-signal-safe (for pre_exec).
fn raw_mask(how: i32, set: u64) {
    debug_assert_eq!(how, libc::SIG_SETMASK);
    pgkit::sigraw::set_mask(pgkit::SigSet::from_bits(set));
}

fn raw_kill(pid: i32, sig: i32) -> bool {
    // SAFETY: plain syscall.
    unsafe { libc::syscall(libc::SYS_kill, pid, sig) == 0 }
}

fn bit(sig: i32) -> u64 {
    1u64 << (sig - 1)
}

fn sleep_ms(ms: u64) {
    std::thread::sleep(Duration::from_millis(ms));
}

/// Append one line to `path` with one write(2).
fn log_line(path: &str, line: &str) {
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
    {
        let _ = f.write_all(format!("{line}\n").as_bytes());
    }
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if s.len() % 2 != 0 {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).ok())
        .collect()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

// ---------------------------------------------------------------------------------------------
// node

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Group,
    Setsid,
    Daemon,
}

#[derive(Clone, Copy)]
enum Term {
    Default,
    Ignore,
    Catch(u64),
}

#[derive(Clone, Copy)]
enum End {
    Exit(i32),
    Signal(i32),
    Stop,
}

struct Node {
    parent: Option<usize>,
    kind: Kind,
    name: Option<Vec<u8>>,
    term: Term,
    end: End,
    life: u64,
    burst: u32,
}

fn parse_spec(spec: &str) -> Result<Vec<Node>, String> {
    spec.split(';')
        .map(|n| {
            let f: Vec<&str> = n.split('.').collect();
            let bad = || format!("bad node {n:?}");
            if f.len() != 7 {
                return Err(bad());
            }
            Ok(Node {
                parent: if f[0] == "-" {
                    None
                } else {
                    Some(f[0].parse().map_err(|_| bad())?)
                },
                kind: match f[1] {
                    "g" => Kind::Group,
                    "s" => Kind::Setsid,
                    "d" => Kind::Daemon,
                    _ => return Err(bad()),
                },
                name: if f[2] == "-" {
                    None
                } else {
                    Some(unhex(f[2]).ok_or_else(bad)?)
                },
                term: match f[3] {
                    "d" => Term::Default,
                    "i" => Term::Ignore,
                    c if c.starts_with('c') => Term::Catch(c[1..].parse().map_err(|_| bad())?),
                    _ => return Err(bad()),
                },
                end: match f[4] {
                    "p" => End::Stop,
                    e if e.starts_with('x') => End::Exit(e[1..].parse().map_err(|_| bad())?),
                    e if e.starts_with('k') => End::Signal(e[1..].parse().map_err(|_| bad())?),
                    _ => return Err(bad()),
                },
                life: f[5].parse().map_err(|_| bad())?,
                burst: f[6].parse().map_err(|_| bad())?,
            })
        })
        .collect()
}

static CAUGHT: AtomicBool = AtomicBool::new(false);

/// A short-lived notification sender: a child that sends `text` to
/// `$NOTIFY_SOCKET` (as `CHAOS_NOTIFY_USER`, if set and we may) and exits at
/// once, reaped here before anyone reads the datagram. `1` sent, `0` not,
/// `nofork` when the sender could not be forked (a process limit),
/// `unset` without `NOTIFY_SOCKET`.
fn notify_once(text: &std::ffi::OsStr) -> &'static str {
    use std::os::unix::ffi::OsStrExt;
    let Some(path) = std::env::var_os("NOTIFY_SOCKET") else {
        return "unset";
    };
    let uid: Option<u32> = std::env::var("CHAOS_NOTIFY_USER")
        .ok()
        .and_then(|v| v.parse().ok());
    // SAFETY: the process is single-threaded; the child only sends and exits.
    let forked = unsafe { libc::fork() };
    if forked == 0 {
        if let Some(id) = uid {
            // SAFETY: plain syscalls in the child; a failure (not root)
            // leaves it the user it was.
            unsafe {
                libc::setgroups(0, std::ptr::null());
                libc::setresgid(id, id, id);
                libc::setresuid(id, id, id);
            }
        }
        let ok = std::os::unix::net::UnixDatagram::unbound()
            .and_then(|s| s.send_to(text.as_bytes(), &path))
            .is_ok();
        // SAFETY: plain syscall.
        unsafe { libc::_exit(if ok { 0 } else { 1 }) };
    }
    if forked < 0 {
        // RLIMIT_NPROC: nothing was sent.
        return "nofork";
    }
    let mut status = 0;
    // SAFETY: waiting for our own child.
    if unsafe { libc::waitpid(forked, &mut status, 0) } != forked {
        return "0";
    }
    if libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0 {
        "1"
    } else {
        "0"
    }
}

/// The root's writes to its stdout, the pipe it shares with an event log:
/// `n` lines of 512 bytes (`D SEQ xxx...`, one write(2) each, atomic on a
/// pipe), from a thread of their own (every signal blocked there, so a
/// write is never interrupted and the node's clock runs as planned), as
/// fast as the pipe takes them. Then `shared node=0 wrote=K err=E` (E the
/// errno of a failed write, 0 when all went).
fn write_shared(log: &str, n: u64) {
    let path = log.to_string();
    // Every process of the tree is forked by now: the thread makes none.
    raw_mask(libc::SIG_SETMASK, !0);
    let spawned = std::thread::Builder::new().spawn(move || {
        let log = path;
        let mut line = [b'x'; 512];
        line[0] = b'D';
        line[1] = b' ';
        line[10] = b' ';
        line[511] = b'\n';
        let mut err = 0;
        let mut wrote = 0;
        while wrote < n {
            let digits = format!("{wrote:08}");
            line[2..10].copy_from_slice(&digits.as_bytes()[..8]);
            // SAFETY: a buffer of 512 bytes.
            let r = unsafe { libc::write(1, line.as_ptr().cast(), line.len()) };
            if r != line.len() as isize {
                err = if r < 0 {
                    std::io::Error::last_os_error().raw_os_error().unwrap_or(-1)
                } else {
                    -2 // a short write
                };
                break;
            }
            wrote += 1;
        }
        log_line(&log, &format!("shared node=0 wrote={wrote} err={err}"));
    });
    raw_mask(libc::SIG_SETMASK, 0);
    if spawned.is_err() {
        log_line(log, "shared node=0 wrote=0 err=-3");
    }
}

extern "C" fn on_stop_signal(_: i32) {
    CAUGHT.store(true, Ordering::SeqCst);
}

fn node(log: &str, nodes: &[Node], idx: usize) -> ! {
    let me = &nodes[idx];
    if let Some(name) = &me.name {
        let name = CString::new(name.clone()).unwrap_or_default();
        // SAFETY: a NUL-terminated name; the kernel copies at most 16 bytes.
        unsafe { libc::prctl(libc::PR_SET_NAME, name.as_ptr() as libc::c_ulong, 0, 0, 0) };
    }
    CAUGHT.store(false, Ordering::SeqCst);
    for sig in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP, libc::SIGQUIT] {
        match me.term {
            Term::Default => raw_disposition(sig, 0),
            Term::Ignore => raw_disposition(sig, 1),
            Term::Catch(_) => {
                // SAFETY: installing a handler that only stores an atomic; no SA_RESTART, so
                // the sleep is interrupted.
                unsafe {
                    let mut sa: libc::sigaction = std::mem::zeroed();
                    sa.sa_sigaction = on_stop_signal as extern "C" fn(i32) as usize;
                    libc::sigemptyset(&mut sa.sa_mask);
                    libc::sigaction(sig, &sa, std::ptr::null_mut());
                }
            }
        }
    }
    // Whatever the tool chain was given, a node takes its signals.
    raw_mask(libc::SIG_SETMASK, 0);
    if idx == 0 {
        if let Some(text) = std::env::var_os("CHAOS_NOTIFY") {
            let sent = notify_once(&text);
            log_line(log, &format!("notify node=0 sent={sent}"));
        }
    }
    // SAFETY: plain syscalls.
    let (pid, ppid, pgid) = unsafe { (libc::getpid(), libc::getppid(), libc::getpgrp()) };
    log_line(
        log,
        &format!("ready node={idx} pid={pid} ppid={ppid} pgid={pgid}"),
    );
    for (c, child) in nodes.iter().enumerate() {
        if child.parent != Some(idx) {
            continue;
        }
        // SAFETY: the process is single-threaded; the child only runs node().
        let forked = unsafe { libc::fork() };
        if forked == 0 {
            match child.kind {
                Kind::Group => {}
                Kind::Setsid => {
                    // SAFETY: plain syscall.
                    unsafe { libc::setsid() };
                }
                Kind::Daemon => {
                    // SAFETY: plain syscalls in a single-threaded child.
                    unsafe {
                        libc::setsid();
                        if libc::fork() != 0 {
                            libc::_exit(0);
                        }
                    }
                }
            }
            node(log, nodes, c);
        }
        if forked > 0 && child.kind == Kind::Daemon {
            // The middle process exits at once; reap it (the daemon is orphaned).
            // SAFETY: waiting for our own child.
            unsafe { libc::waitpid(forked, std::ptr::null_mut(), 0) };
        }
    }
    for _ in 0..me.burst {
        // SAFETY: the child exits at once.
        if unsafe { libc::fork() } == 0 {
            // SAFETY: plain syscall.
            unsafe { libc::_exit(0) };
        }
    }
    if idx == 0 {
        if let Some(n) = std::env::var("CHAOS_SHARED")
            .ok()
            .and_then(|v| v.parse::<u64>().ok())
        {
            write_shared(log, n);
        }
    }
    let deadline = Instant::now() + Duration::from_millis(me.life);
    loop {
        if CAUGHT.load(Ordering::SeqCst) {
            if let Term::Catch(delay) = me.term {
                sleep_ms(delay);
            }
            // SAFETY: plain syscall.
            unsafe { libc::_exit(3) };
        }
        let now = Instant::now();
        if now >= deadline {
            break;
        }
        // Short naps: a signal between the check and the nap costs at most 20 ms.
        let nap = (deadline - now).min(Duration::from_millis(20));
        let ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: nap.as_nanos() as libc::c_long,
        };
        // SAFETY: valid timespec; EINTR is expected.
        unsafe { libc::nanosleep(&ts, std::ptr::null_mut()) };
    }
    match me.end {
        End::Exit(code) => {
            // SAFETY: plain syscall.
            unsafe { libc::_exit(code) }
        }
        End::Signal(sig) => {
            raw_disposition(sig, 0);
            raw_mask(libc::SIG_SETMASK, 0);
            raw_kill(pid, sig);
            sleep_ms(200);
            // SAFETY: plain syscall.
            unsafe { libc::_exit(99) }
        }
        End::Stop => {
            raw_kill(pid, libc::SIGSTOP);
            // SAFETY: plain syscall.
            unsafe { libc::_exit(0) }
        }
    }
}

/// N times, a child goes from `sh -c "exec chaosproc cleanup ..."` to the
/// cleanup and exits, as reap's back does with `--exec-cleanup`, held as a
/// process of the chain; this process samples that one process as the
/// supervisor does, as fast as it can, and asks after each sample whether
/// the machinery still runs ([`Sup::machinery_running`]). Prints
/// `identity-race execs=N looks=L lost=K`: K the answers "no" given while
/// the child had not yet exited (its pidfd, read after the answer, not
/// readable), each one a moment the supervisor would have taken the
/// machinery for ended.
fn identity_race(n: &str) -> ! {
    let n: usize = n
        .parse()
        .unwrap_or_else(|_| die("identity-race: N is a count"));
    let me = std::env::current_exe().unwrap_or_else(|e| die(&format!("current_exe: {e}")));
    let script = format!("exec '{}' cleanup /dev/null 0 0", me.display());
    let plan = Plan {
        marker: "identity-race".into(),
        ..Plan::default()
    };
    let mut sup = Sup::new(plan, std::process::id() as i32);
    let (mut looks, mut lost) = (0u64, 0u64);
    for _ in 0..n {
        let mut child = std::process::Command::new("sh")
            .args(["-c", &script])
            .env("CHAOS_RUN", "identity-race")
            .spawn()
            .unwrap_or_else(|e| die(&format!("spawn sh: {e}")));
        let pid = child.id() as i32;
        let fd = pidfd_open(pid);
        sup.chain = vec![(pid, fd)];
        while fd.is_some_and(|fd| !pidfd_exited(fd)) {
            // What sample() does, for this one process.
            if let Some(st) = stat(pid) {
                sup.note(pid, &st);
            }
            let running = sup.machinery_running(false);
            looks += 1;
            if !running && fd.is_some_and(|fd| !pidfd_exited(fd)) {
                lost += 1;
            }
        }
        let _ = child.wait();
        if let Some(fd) = fd {
            // SAFETY: our own descriptor, closed once.
            unsafe { libc::close(fd) };
        }
    }
    println!("identity-race execs={n} looks={looks} lost={lost}");
    std::process::exit(0)
}

// ---------------------------------------------------------------------------------------------
// cleanup

fn cleanup(log: &str, code: &str, ms: &str) -> ! {
    let var = |k: &str| std::env::var(k).unwrap_or_default();
    log_line(
        log,
        &format!(
            "cleanup pid={} status={} signal={} cause={}",
            std::process::id(),
            var("REAP_STATUS"),
            var("REAP_SIGNAL"),
            var("REAP_CAUSE")
        ),
    );
    sleep_ms(ms.parse().unwrap_or(0));
    std::process::exit(code.parse().unwrap_or(0))
}

// ---------------------------------------------------------------------------------------------
// /proc readers (the supervisor sees /proc even when the tools do not)

fn stat_fields(pid: i32) -> Option<Vec<String>> {
    let text = std::fs::read(format!("/proc/{pid}/stat")).ok()?;
    let close = text.iter().rposition(|&b| b == b')')?;
    let rest = String::from_utf8_lossy(&text[close + 1..]).into_owned();
    Some(rest.split_whitespace().map(str::to_string).collect())
}

struct Stat {
    state: char,
    ppid: i32,
    cpu_ticks: u64,
    start: u64,
}

fn stat(pid: i32) -> Option<Stat> {
    let f = stat_fields(pid)?;
    let num = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok());
    Some(Stat {
        state: f.first()?.chars().next()?,
        ppid: num(1)? as i32,
        cpu_ticks: num(11)? + num(12)?,
        start: num(19)?,
    })
}

fn comm(pid: i32) -> Vec<u8> {
    let mut c = std::fs::read(format!("/proc/{pid}/comm")).unwrap_or_default();
    if c.last() == Some(&b'\n') {
        c.pop();
    }
    c
}

/// Basename of argv[0] (empty for zombies).
fn argv0(pid: i32) -> String {
    let raw = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    argv0_of(&raw)
}

fn argv0_of(raw: &[u8]) -> String {
    let first = raw.split(|&b| b == 0).next().unwrap_or_default();
    let first = String::from_utf8_lossy(first).into_owned();
    first.rsplit('/').next().unwrap_or_default().to_string()
}

/// What a process runs, from one read of its command line: its argv[0]
/// (the base name) and whether it is a cleanup ([`is_cleanup`]). None when
/// the read gives nothing: a process in the middle of an execve (its new
/// memory has no arguments yet; a few percent of the reads while a shell
/// execs) or gone. Two reads, one for each, once took a process between
/// `sh -c "exec chaosproc cleanup"` and the cleanup for neither a tool nor
/// a cleanup (chaos seed 20266521: the supervisor took reap's back, in its
/// `--exec-cleanup`, for ended, and the cleanup for a leftover).
fn identity(pid: i32) -> Option<(String, bool)> {
    let raw = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    (!raw.is_empty()).then(|| (argv0_of(&raw), is_cleanup(&raw)))
}

/// Whether the command line is `chaosproc cleanup ...`, or the shell of a
/// `--cleanup` that is about to exec it (`sh -c "exec '.../chaosproc'
/// cleanup ..."`: with `--exec-cleanup` that shell is reap's back, between
/// its exec and the shell's).
fn is_cleanup(raw: &[u8]) -> bool {
    let mut args = raw.split(|&b| b == 0);
    let first = args.next().unwrap_or_default();
    let second = args.next();
    if first.ends_with(b"sh") && second == Some(&b"-c"[..]) {
        let script = args.next().unwrap_or_default();
        return script.windows(18).any(|w| w == b"chaosproc' cleanup");
    }
    first.ends_with(b"chaosproc") && second == Some(&b"cleanup"[..])
}

/// Whether SIGKILL is pending for the process (or its thread group).
fn kill_pending(pid: i32) -> bool {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status.lines().any(|l| {
        let hex = l
            .strip_prefix("SigPnd:")
            .or_else(|| l.strip_prefix("ShdPnd:"));
        hex.and_then(|h| u64::from_str_radix(h.trim(), 16).ok())
            .is_some_and(|set| set & (1 << (libc::SIGKILL - 1)) != 0)
    })
}

fn has_marker(pid: i32, needle: &[u8]) -> bool {
    marker(pid, needle) == Some(true)
}

/// Whether the process carries the scenario's marker; None when its
/// environment reads empty, as in the middle of an execve (see
/// [`identity`]): a process known as ours stays ours through it.
fn marker(pid: i32, needle: &[u8]) -> Option<bool> {
    match std::fs::read(format!("/proc/{pid}/environ")) {
        Ok(env) if env.is_empty() => None,
        Ok(env) => Some(env.split(|&b| b == 0).any(|kv| kv == needle)),
        Err(_) => Some(false),
    }
}

fn all_pids() -> Vec<i32> {
    std::fs::read_dir("/proc")
        .map(|d| {
            d.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// Below PID 1 of a PID namespace the nodes report the namespace's pids:
/// the rest of the chain (`names`, outer first) and the root are found
/// from `init` down, each the earliest started child of the one above with
/// its expected argv[0], the root the last one's earliest `chaosproc`. Only
/// to know them: a tool's zombie that is its own COMMAND (graceful keeps
/// it unreaped while anything is left below it) is not a zombie it keeps.
fn chain_below(init: i32, names: &[String]) -> Vec<i32> {
    let procs: Vec<(i32, Stat)> = all_pids()
        .into_iter()
        .filter_map(|p| Some((p, stat(p)?)))
        .collect();
    let mut at = init;
    let mut down = Vec::new();
    for name in names.iter().map(String::as_str).chain(["chaosproc"]) {
        let Some(&(p, _)) = procs
            .iter()
            .filter(|(p, st)| st.ppid == at && argv0(*p) == name)
            .min_by_key(|(_, st)| st.start)
        else {
            break;
        };
        down.push(p);
        at = p;
    }
    down
}

fn pidfd_open(pid: i32) -> Option<i32> {
    // SAFETY: plain syscall.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) } as i32;
    (fd >= 0).then_some(fd)
}

/// Whether the process of pidfd `fd` has exited (the pidfd is readable).
fn pidfd_exited(fd: i32) -> bool {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd, no wait.
    unsafe { libc::poll(&mut p, 1, 0) == 1 }
}

fn pidfd_signal(fd: i32, sig: i32) -> bool {
    // SAFETY: fd is a pidfd we own; no siginfo.
    unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            fd,
            sig,
            std::ptr::null::<libc::siginfo_t>(),
            0,
        ) == 0
    }
}

// ---------------------------------------------------------------------------------------------
// sup

const TOOLS: [&str; 3] = ["pgwrap", "graceful", "reap"];

#[derive(Default)]
struct Plan {
    marker: String,
    log: String,
    out: String,
    stderr: String,
    bound_ms: u64,
    /// How many times slower than a native machine this one runs the
    /// tools (1 at least; the harness measures it): the CPU floor of the
    /// spin watch grows by it, as the harness's own spin bound does.
    slow: u64,
    /// plain, noproc (the tool sees no /proc), pid1 (the tool is PID 1 of
    /// a namespace), ns (this supervisor is PID 1 of a namespace: decoys).
    mode: String,
    ign: Vec<i32>,
    blk: Vec<i32>,
    pend: Vec<i32>,
    nofile: Option<u64>,
    nproc: Option<u64>,
    /// Run the tool as this user id (RLIMIT_NPROC does not bind root).
    uid: Option<u32>,
    /// `NOTIFY_SOCKET` for the chain, and the root's message (`CHAOS_NOTIFY`).
    notify: Option<(String, String)>,
    /// The root's sender changes to this user (`CHAOS_NOTIFY_USER`).
    notify_user: Option<u32>,
    argv: Vec<String>,
    /// The tools, outer first.
    layers: Vec<String>,
    /// Expected argv[0] of the chain processes, outer first (reap twice:
    /// front and back).
    chain: Vec<String>,
    events: Vec<(u64, String, i32)>,
    /// Pauses: at (ms after ready), target, length (ms), and the event
    /// (index, microseconds after it) it is timed to, if any.
    pauses: Vec<PlanPause>,
    /// The tool's stdout a pipe read slowly (not at all until the tool
    /// has exited, with `stall`), its path for what was read; the root
    /// writes this many lines to it (`CHAOS_SHARED`).
    shared: Option<SharedPlan>,
    decoys: Vec<usize>,
    nodes: usize,
}

/// `shared CHUNKS STALL PATH` of the plan.
struct SharedPlan {
    chunks: u64,
    stall: bool,
    path: String,
}

/// A pause of the plan: at (ms after ready), target, length (ms), and the
/// event it is timed to (index, microseconds after it).
type PlanPause = (u64, String, u64, Option<(usize, u64)>);

fn sig_list(s: &str) -> Vec<i32> {
    s.split(',').filter_map(|x| x.parse().ok()).collect()
}

fn read_plan(path: &str) -> Plan {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| die(&format!("{path}: {e}")));
    let mut p = Plan::default();
    for line in text.lines() {
        let (k, v) = line.split_once(' ').unwrap_or((line, ""));
        match k {
            "marker" => p.marker = v.into(),
            "log" => p.log = v.into(),
            "out" => p.out = v.into(),
            "stderr" => p.stderr = v.into(),
            "bound_ms" => p.bound_ms = v.parse().unwrap_or(10_000),
            "slow" => p.slow = v.parse().unwrap_or(1),
            "mode" => p.mode = v.into(),
            "ign" => p.ign = sig_list(v),
            "blk" => p.blk = sig_list(v),
            "pend" => p.pend = sig_list(v),
            "nofile" => p.nofile = v.parse().ok(),
            "nproc" => p.nproc = v.parse().ok(),
            "uid" => p.uid = v.parse().ok(),
            "notify" => {
                if let Some((path, text)) = v.split_once(' ') {
                    p.notify = Some((path.into(), text.into()));
                }
            }
            "notify_user" => p.notify_user = v.parse().ok(),
            "argv" => p.argv.push(v.into()),
            "layers" => {
                p.layers = v.split(',').map(str::to_string).collect();
                for l in &p.layers {
                    p.chain.push(l.clone());
                    if l == "reap" {
                        p.chain.push(l.clone());
                    }
                }
            }
            "nodes" => p.nodes = v.parse().unwrap_or(1),
            "decoy" => p.decoys.extend(v.parse::<usize>().ok()),
            "event" => {
                let f: Vec<&str> = v.split(' ').collect();
                if f.len() == 3 {
                    p.events.push((
                        f[0].parse().unwrap_or(0),
                        f[1].into(),
                        f[2].parse().unwrap_or(15),
                    ));
                }
            }
            "pause" => {
                let f: Vec<&str> = v.split(' ').collect();
                if f.len() == 3 || f.len() == 4 {
                    let after = f.get(3).and_then(|a| {
                        let (n, us) = a.split_once(':')?;
                        Some((n.parse().ok()?, us.parse().ok()?))
                    });
                    p.pauses.push((
                        f[0].parse().unwrap_or(0),
                        f[1].into(),
                        f[2].parse().unwrap_or(1),
                        after,
                    ));
                }
            }
            "shared" => {
                let f: Vec<&str> = v.splitn(3, ' ').collect();
                if let [n, stall, path] = f[..] {
                    p.shared = n.parse().ok().map(|chunks| SharedPlan {
                        chunks,
                        stall: stall == "1",
                        path: path.to_string(),
                    });
                }
            }
            _ => {}
        }
    }
    p
}

/// A process of the scenario as the supervisor knows it.
struct Known {
    start: u64,
    argv0: String,
    /// `chaosproc cleanup ...`: a cleanup, maybe one that replaced reap's
    /// back (`--exec-cleanup`) and has not logged its start yet.
    cleanup: bool,
    cpu_ticks: u64,
}

impl Known {
    /// A wrapper (unshare, sh) may have exec'd the tool since, reap's back
    /// the cleanup: what it runs now, or what it ran while in an execve.
    fn refresh(&mut self, pid: i32) {
        if let Some((argv0, cleanup)) = identity(pid) {
            self.argv0 = argv0;
            self.cleanup = cleanup;
        }
    }

    /// Part of a chain's machinery: a tool, or a cleanup.
    fn machinery(&self) -> bool {
        TOOLS.contains(&self.argv0.as_str()) || self.cleanup
    }
}

struct Sup {
    plan: Plan,
    needle: Vec<u8>,
    me: i32,
    t0: Instant,
    out: Vec<String>,
    known: HashMap<i32, Known>,
    /// node index -> (pid, pidfd)
    nodes: HashMap<usize, (i32, Option<i32>)>,
    cleanups: Vec<(i32, Option<i32>, Instant)>,
    log_seen: usize,
    /// (pid, start) of a zombie child of a tool -> (first seen, last seen, ppid)
    zombies: HashMap<(i32, u64), (Instant, Instant, i32)>,
    decoys: HashMap<i32, String>,
    decoy_done: Vec<usize>,
    /// Chain processes outer first (pid, pidfd).
    chain: Vec<(i32, Option<i32>)>,
    /// The read end of the tool's stdout (plan `shared`), what was read
    /// from it, and when last.
    shared: Option<(i32, Vec<u8>, Instant)>,
}

fn sup(plan_path: &str) -> ! {
    let plan = read_plan(plan_path);
    // SAFETY: plain syscalls.
    let me = unsafe {
        libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
        libc::getpid()
    };
    let mut s = Sup::new(plan, me);
    s.run();
    if let Some((sh, (_, bytes, _))) = s.plan.shared.as_ref().zip(s.shared.as_ref()) {
        let _ = std::fs::write(&sh.path, bytes);
    }
    let mut f = std::fs::File::create(&s.plan.out).unwrap_or_else(|e| die(&e.to_string()));
    let _ = f.write_all((s.out.join("\n") + "\n").as_bytes());
    std::process::exit(0)
}

impl Sup {
    fn new(plan: Plan, me: i32) -> Sup {
        Sup {
            needle: format!("CHAOS_RUN={}", plan.marker).into_bytes(),
            plan,
            me,
            t0: Instant::now(),
            out: Vec::new(),
            known: HashMap::new(),
            nodes: HashMap::new(),
            cleanups: Vec::new(),
            log_seen: 0,
            zombies: HashMap::new(),
            decoys: HashMap::new(),
            decoy_done: Vec::new(),
            chain: Vec::new(),
            shared: None,
        }
    }

    /// Whether the chain's machinery still runs once the tool has ended:
    /// a process of the chain (reap's back, even as the cleanup it exec'd),
    /// a cleanup that logged its start, or a process sampled as a tool or
    /// a cleanup. The chain's processes are held by pidfd, not by what
    /// `/proc` says they run: in the middle of an execve that reads empty
    /// or half-written (chaos seed 20266521: reap's back between `sh -c
    /// "exec chaosproc cleanup"` and the cleanup read as neither, the
    /// supervisor took the machinery for ended and the cleanup for a
    /// leftover).
    fn machinery_running(&self, pid1: bool) -> bool {
        let held = |fd: &Option<i32>| fd.is_some_and(|fd| !pidfd_exited(fd));
        self.chain.iter().any(|c| held(&c.1))
            || self.cleanups.iter().any(|c| held(&c.1))
            || self.live_known().iter().any(|(pid, st)| {
                st.state != 'Z'
                    && (self.known[pid].machinery() || (pid1 && self.known[pid].argv0 == "unshare"))
            })
    }

    fn ms(&self) -> u64 {
        self.t0.elapsed().as_millis() as u64
    }

    fn spawn(&mut self) -> Option<i32> {
        let p = &self.plan;
        let stderr = std::fs::File::create(&p.stderr).unwrap_or_else(|e| die(&e.to_string()));
        let mut cmd = std::process::Command::new(&p.argv[0]);
        cmd.args(&p.argv[1..])
            .env_clear()
            .env("PATH", "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin")
            .env("CHAOS_RUN", &p.marker);
        if let Some((path, text)) = &p.notify {
            cmd.env("NOTIFY_SOCKET", path).env("CHAOS_NOTIFY", text);
        }
        if let Some(uid) = p.notify_user {
            cmd.env("CHAOS_NOTIFY_USER", uid.to_string());
        }
        cmd.stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(stderr)
            .process_group(0);
        if let Some(SharedPlan { chunks: n, .. }) = &p.shared {
            let mut fds = [0; 2];
            // SAFETY: a buffer of two descriptors.
            if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) } != 0 {
                die("pipe2 for the shared descriptor");
            }
            // The write end as the tool gets it: blocking, as a caller's
            // pipe is (only the read end, ours, is non-blocking).
            // SAFETY: fcntl on our own new descriptor.
            unsafe { libc::fcntl(fds[1], libc::F_SETFL, 0) };
            use std::os::fd::FromRawFd;
            // SAFETY: a new descriptor nothing else owns; Command closes
            // its copy once the child is started.
            let w = unsafe { std::os::fd::OwnedFd::from_raw_fd(fds[1]) };
            cmd.stdout(std::process::Stdio::from(w))
                .env("CHAOS_SHARED", n.to_string());
            self.shared = Some((fds[0], Vec::new(), Instant::now()));
        }
        let (ign, blk, pend) = (p.ign.clone(), p.blk.clone(), p.pend.clone());
        let (nofile, nproc, uid) = (p.nofile, p.nproc, p.uid);
        // SAFETY: only async-signal-safe syscalls run in the child.
        unsafe {
            cmd.pre_exec(move || {
                let lim = |res, n: u64| {
                    // rlim_t is 32 bits wide on a 32-bit target (armhf,
                    // i386): a limit above it is no limit.
                    #[allow(clippy::useless_conversion, clippy::unnecessary_fallible_conversions)]
                    let n = libc::rlim_t::try_from(n).unwrap_or(libc::RLIM_INFINITY);
                    let r = libc::rlimit {
                        rlim_cur: n,
                        rlim_max: n,
                    };
                    libc::setrlimit(res, &r);
                };
                lim(libc::RLIMIT_CORE, 0);
                if let Some(n) = nofile {
                    lim(libc::RLIMIT_NOFILE, n);
                }
                if let Some(n) = nproc {
                    lim(libc::RLIMIT_NPROC, n);
                }
                if let Some(uid) = uid {
                    libc::setgroups(0, std::ptr::null());
                    libc::setgid(uid);
                    libc::setuid(uid);
                }
                // The inherited state is exactly the scenario's: glibc's
                // posix_spawn (which started this supervisor) leaves 32 and
                // 33 ignored in its child, so every disposition is set.
                for sig in 1..=64 {
                    if sig != libc::SIGKILL && sig != libc::SIGSTOP {
                        raw_disposition(sig, usize::from(ign.contains(&sig)));
                    }
                }
                let mut mask = 0u64;
                for &sig in blk.iter().chain(&pend) {
                    mask |= bit(sig);
                }
                raw_mask(libc::SIG_SETMASK, mask);
                for &sig in &pend {
                    raw_kill(libc::getpid(), sig);
                }
                Ok(())
            });
        }
        let spawned = cmd.spawn();
        drop(cmd);
        match spawned {
            Ok(child) => Some(child.id() as i32),
            Err(e) => {
                self.out.push(format!("spawnfail {e}"));
                None
            }
        }
    }

    /// Read the shared descriptor: at most 4 KiB each 20 ms (a slow
    /// reader, so the pipe fills; nothing while the tool runs, with
    /// `stall`), or all there is (`drain`).
    fn read_shared(&mut self, drain: bool, tool_ended: bool) {
        let stall = self.plan.shared.as_ref().is_some_and(|s| s.stall);
        let Some((fd, buf, last)) = self.shared.as_mut() else {
            return;
        };
        if !drain && (last.elapsed() < Duration::from_millis(20) || (stall && !tool_ended)) {
            return;
        }
        *last = Instant::now();
        let mut chunk = [0u8; 4096];
        loop {
            // SAFETY: a buffer of 4096 bytes; the descriptor is non-blocking.
            let r = unsafe { libc::read(*fd, chunk.as_mut_ptr().cast(), chunk.len()) };
            if r <= 0 {
                return;
            }
            buf.extend_from_slice(&chunk[..r as usize]);
            if !drain {
                return;
            }
        }
    }

    /// Read new lines of the log: ready lines of nodes, cleanup lines.
    fn read_log(&mut self) {
        let Ok(text) = std::fs::read(&self.plan.log) else {
            return;
        };
        if text.len() <= self.log_seen {
            return;
        }
        let end = text[self.log_seen..]
            .iter()
            .rposition(|&b| b == b'\n')
            .map(|i| self.log_seen + i + 1)
            .unwrap_or(self.log_seen);
        let new = String::from_utf8_lossy(&text[self.log_seen..end]).into_owned();
        self.log_seen = end;
        for line in new.lines() {
            let field = |k: &str| -> Option<i64> {
                line.split_whitespace()
                    .find_map(|t| t.strip_prefix(k)?.strip_prefix('=')?.parse().ok())
            };
            if line.starts_with("ready ") {
                let (Some(idx), Some(pid)) = (field("node"), field("pid")) else {
                    continue;
                };
                let pid = pid as i32;
                // As PID 1 of a namespace, the tree's pids are not ours.
                let fd = if self.plan.mode == "pid1" {
                    None
                } else {
                    pidfd_open(pid).filter(|_| has_marker(pid, &self.needle))
                };
                self.nodes.insert(idx as usize, (pid, fd));
            } else if line.starts_with("cleanup ") {
                if let Some(pid) = field("pid") {
                    let pid = pid as i32;
                    let fd = pidfd_open(pid).filter(|_| has_marker(pid, &self.needle));
                    self.cleanups.push((pid, fd, Instant::now()));
                }
            }
        }
    }

    /// Refresh the set of marked processes, their CPU, and zombies of tools.
    /// One process as sampled: a new one of the scenario is known from
    /// now on, a known one's CPU and what it runs are brought up to date.
    fn note(&mut self, pid: i32, st: &Stat) {
        let fresh = match self.known.get(&pid) {
            Some(k) => k.start != st.start,
            None => true,
        };
        if fresh && st.state != 'Z' && has_marker(pid, &self.needle) {
            let (argv0, cleanup) = identity(pid).unwrap_or_default();
            self.known.insert(
                pid,
                Known {
                    start: st.start,
                    argv0,
                    cleanup,
                    cpu_ticks: 0,
                },
            );
        }
        if let Some(k) = self.known.get_mut(&pid) {
            if k.start == st.start {
                k.cpu_ticks = k.cpu_ticks.max(st.cpu_ticks);
                if st.state != 'Z' {
                    k.refresh(pid);
                }
            }
        }
    }

    fn sample(&mut self) {
        let pids = all_pids();
        let mut stats = HashMap::new();
        for &pid in &pids {
            if let Some(st) = stat(pid) {
                stats.insert(pid, st);
            }
        }
        for (&pid, st) in &stats {
            self.note(pid, st);
        }
        // Zombies whose parent is a tool process, other than the chain's
        // own next process (a tool may keep its COMMAND unreaped on purpose).
        let mut chain: Vec<i32> = self.chain.iter().map(|c| c.0).collect();
        chain.extend(self.nodes.get(&0).map(|n| n.0));
        let now = Instant::now();
        for (&pid, st) in &stats {
            if st.state != 'Z' {
                continue;
            }
            let Some(parent) = self.known.get(&st.ppid) else {
                continue;
            };
            let parent_alive = stats
                .get(&st.ppid)
                .is_some_and(|p| p.start == parent.start && p.state != 'Z');
            if !parent_alive || !TOOLS.contains(&parent.argv0.as_str()) || chain.contains(&pid) {
                continue;
            }
            // A zombie of a stopped tool is not the tool's fault.
            if stats.get(&st.ppid).is_some_and(|p| p.state == 'T') {
                continue;
            }
            let entry = self
                .zombies
                .entry((pid, st.start))
                .or_insert((now, now, st.ppid));
            entry.1 = now;
        }
    }

    fn tool_cpu_ms(&self) -> u64 {
        let ticks: u64 = self
            .known
            .values()
            .filter(|k| TOOLS.contains(&k.argv0.as_str()))
            .map(|k| k.cpu_ticks)
            .sum();
        // SAFETY: plain libc call.
        let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
        ticks * 1000 / hz
    }

    /// Marked processes that still exist as the ones recorded.
    fn live_known(&self) -> Vec<(i32, Stat)> {
        self.known
            .iter()
            .filter_map(|(&pid, k)| {
                let st = stat(pid)?;
                // Same start tick is not enough (a decoy may take the pid
                // within the tick): a live one must still carry the marker.
                let same = st.start == k.start
                    && (st.state == 'Z' || marker(pid, &self.needle) != Some(false));
                same.then_some((pid, st))
            })
            .collect()
    }

    fn kill_all_marked(&mut self) {
        self.sample();
        for (pid, _) in self.live_known() {
            if pid != self.me {
                raw_kill(pid, libc::SIGKILL);
            }
        }
    }

    /// Reap every child that is ready; returns the tool's status if reaped.
    fn reap_children(&mut self, tool: i32, tool_status: &mut Option<i32>) {
        loop {
            let mut status = 0;
            // SAFETY: plain syscall.
            let pid = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
            if pid <= 0 {
                return;
            }
            if pid == tool {
                *tool_status = Some(status);
            }
            if let Some(d) = self.decoys.get_mut(&pid) {
                *d = format!("died status={status}");
            }
        }
    }

    fn discover_chain(&mut self) {
        let Some(&(root, _)) = self.nodes.get(&0) else {
            return;
        };
        let mut up = Vec::new();
        let mut p = stat(root).map(|s| s.ppid).unwrap_or(0);
        while p > 1 && p != self.me && up.len() < 10 {
            up.push(p);
            p = stat(p).map(|s| s.ppid).unwrap_or(0);
        }
        up.reverse();
        let names: Vec<String> = up.iter().map(|&p| argv0(p)).collect();
        if names == self.plan.chain {
            self.chain = up
                .iter()
                .map(|&p| (p, pidfd_open(p).filter(|_| has_marker(p, &self.needle))))
                .collect();
            self.out.push(format!("chain ok {up:?}"));
        } else {
            self.out.push(format!("chain fail {names:?}"));
        }
    }

    /// Index into `chain` of layer `layer`'s front (or back, for reap).
    fn chain_index(&self, layer: usize, back: bool) -> usize {
        let before: usize = self.plan.layers[..layer.min(self.plan.layers.len())]
            .iter()
            .map(|l| if l == "reap" { 2 } else { 1 })
            .sum();
        before + usize::from(back)
    }

    fn fire(&mut self, tool: i32, tool_alive: bool, target: &str, sig: i32) -> String {
        let by_fd = |fd: Option<i32>| match fd {
            Some(fd) if pidfd_signal(fd, sig) => "sent".to_string(),
            Some(_) => "gone".to_string(),
            None => "unknown".to_string(),
        };
        let (kind, arg) = target.split_once(':').unwrap_or((target, ""));
        if self.plan.mode == "pid1" {
            return match kind {
                "tool" => by_fd(self.chain.first().and_then(|c| c.1)),
                _ => "unsupported".into(),
            };
        }
        let n: usize = arg.parse().unwrap_or(0);
        match kind {
            "tool" | "group" if !tool_alive => "gone".into(),
            "tool" => {
                raw_kill(tool, sig);
                "sent".into()
            }
            "group" => {
                raw_kill(-tool, sig);
                "sent".into()
            }
            "cmd" => by_fd(self.nodes.get(&0).and_then(|n| n.1)),
            "node" => by_fd(self.nodes.get(&n).and_then(|n| n.1)),
            "layer" | "back" => {
                if self.chain.is_empty() {
                    return "unknown".into();
                }
                let i = self.chain_index(n, kind == "back");
                if i == 0 && kind == "layer" {
                    if !tool_alive {
                        return "gone".into();
                    }
                    raw_kill(tool, sig);
                    return "sent".into();
                }
                by_fd(self.chain.get(i).and_then(|c| c.1))
            }
            "cleanup" => by_fd(self.cleanups.first().and_then(|c| c.1)),
            _ => "bad".into(),
        }
    }

    /// A decoy with pid `want`, if the counter gives it to us.
    fn make_decoy(&mut self, want: i32) {
        let _ = std::fs::write("/proc/sys/kernel/ns_last_pid", format!("{}", want - 1));
        let log = self.plan.log.clone();
        // SAFETY: single-threaded; the child only makes syscalls and writes.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            // SAFETY: plain syscalls.
            unsafe {
                if libc::getpid() != want {
                    libc::_exit(0);
                }
                libc::setsid();
            }
            let all = !(bit(libc::SIGKILL) | bit(libc::SIGSTOP));
            raw_mask(libc::SIG_SETMASK, all);
            loop {
                // SAFETY: siginfo buffer, mask of 8 bytes, no timeout.
                let (sig, from) = unsafe {
                    let mut info: libc::siginfo_t = std::mem::zeroed();
                    let sig = libc::syscall(
                        libc::SYS_rt_sigtimedwait,
                        &all as *const u64,
                        &mut info as *mut libc::siginfo_t,
                        std::ptr::null::<libc::timespec>(),
                        8usize,
                    );
                    (sig, info.si_pid())
                };
                if sig > 0 {
                    log_line(&log, &format!("decoygot pid={want} sig={sig} from={from}"));
                }
            }
        }
        if pid == want {
            self.decoys.insert(pid, "ok".into());
        } else if pid > 0 {
            self.out.push(format!("decoy miss want={want} got={pid}"));
        }
    }

    fn run(&mut self) {
        let bound = Duration::from_millis(self.plan.bound_ms);
        let pid1 = self.plan.mode == "pid1";
        let decoying = self.plan.mode == "ns" && !self.plan.decoys.is_empty();
        let Some(tool) = self.spawn() else {
            self.out.push("status none".into());
            self.out.push("hang 0".into());
            return;
        };
        let mut tool_status: Option<i32> = None;
        let mut tool_end: Option<Instant> = None;
        let mut ready_at: Option<Instant> = None;
        let mut root_seen = false;
        let mut fired = vec![false; self.plan.events.len()];
        // Each pause: not yet, stopped until this instant, or over.
        let mut pauses: Vec<Option<Option<Instant>>> = vec![None; self.plan.pauses.len()];
        let mut last_sample = Instant::now() - Duration::from_secs(1);
        let (mut hang, mut spin) = (false, false);
        let mut settled: Option<Instant> = None;
        loop {
            let now = Instant::now();
            self.reap_children(tool, &mut tool_status);
            if tool_status.is_some() && tool_end.is_none() {
                tool_end = Some(now);
            }
            self.read_shared(false, tool_end.is_some());
            self.read_log();
            if !root_seen && self.nodes.contains_key(&0) {
                // The root's own clock (its lifetime) starts here, give or
                // take its forks; the ready line may come much later.
                root_seen = true;
                self.out.push(format!("root at={}", self.ms()));
            }
            if ready_at.is_none() {
                let all = self.nodes.len() >= self.plan.nodes;
                let root_up = self.nodes.contains_key(&0);
                let waited = now - self.t0;
                if all
                    || (root_up && waited > Duration::from_millis(800))
                    || tool_end.is_some()
                    || waited > Duration::from_secs(3)
                {
                    ready_at = Some(now);
                    self.out.push(format!(
                        "ready {} nodes={} at={}",
                        u8::from(root_up),
                        self.nodes.len(),
                        self.ms()
                    ));
                    if root_up && !pid1 {
                        self.discover_chain();
                    }
                    if pid1 {
                        // The tool is unshare's child, PID 1 of the namespace.
                        if let Some(init) = all_pids()
                            .into_iter()
                            .find(|&p| stat(p).is_some_and(|s| s.ppid == tool))
                        {
                            self.chain = vec![(init, pidfd_open(init))];
                            self.out.push(format!("chain init {init}"));
                            let down = chain_below(init, &self.plan.chain[1..]);
                            self.out.push(format!("chain below init {down:?}"));
                            self.chain.extend(down.into_iter().map(|p| (p, None)));
                        }
                    }
                }
            }
            if let Some(ready) = ready_at {
                for (i, (offset, target, sig)) in self.plan.events.clone().into_iter().enumerate() {
                    if fired[i] {
                        continue;
                    }
                    let due = if target == "cleanup" {
                        match self.cleanups.first() {
                            Some(c) => c.2 + Duration::from_millis(offset),
                            None if tool_end.is_some() && settled.is_some() => now,
                            None => continue,
                        }
                    } else {
                        ready + Duration::from_millis(offset)
                    };
                    if now >= due {
                        fired[i] = true;
                        let how = self.fire(tool, tool_status.is_none(), &target, sig);
                        let sent = Instant::now();
                        // The pauses timed to this signal, microseconds after
                        // it: nothing else is done in between.
                        let mut stops = Vec::new();
                        for j in 0..self.plan.pauses.len() {
                            let (_, ref target, len, after) = self.plan.pauses[j];
                            let Some((_, us)) = after.filter(|a| a.0 == i) else {
                                continue;
                            };
                            if pauses[j].is_some() {
                                continue;
                            }
                            let target = target.clone();
                            while sent.elapsed() < Duration::from_micros(us) {
                                std::hint::spin_loop();
                            }
                            let alive = tool_status.is_none();
                            let how = self.fire(tool, alive, &target, libc::SIGSTOP);
                            let late = sent.elapsed().as_micros();
                            pauses[j] = Some(Some(Instant::now() + Duration::from_millis(len)));
                            stops.push(format!("pause {j} {how} at={} after_us={late}", self.ms()));
                        }
                        self.out.push(format!("event {i} {how} at={}", self.ms()));
                        self.out.extend(stops);
                    }
                }
                for (i, (offset, target, len, after)) in
                    self.plan.pauses.clone().into_iter().enumerate()
                {
                    match pauses[i] {
                        None if after.is_none() && now >= ready + Duration::from_millis(offset) => {
                            let how =
                                self.fire(tool, tool_status.is_none(), &target, libc::SIGSTOP);
                            self.out.push(format!("pause {i} {how} at={}", self.ms()));
                            pauses[i] = Some(Some(now + Duration::from_millis(len)));
                        }
                        Some(Some(until)) if now >= until => {
                            let how =
                                self.fire(tool, tool_status.is_none(), &target, libc::SIGCONT);
                            self.out.push(format!("resume {i} {how} at={}", self.ms()));
                            pauses[i] = Some(None);
                        }
                        _ => {}
                    }
                }
            }
            if decoying {
                for (i, &n) in self.plan.decoys.clone().iter().enumerate() {
                    if self.decoy_done.contains(&i) {
                        continue;
                    }
                    if let Some(&(pid, _)) = self.nodes.get(&n) {
                        if std::fs::metadata(format!("/proc/{pid}")).is_err() {
                            self.decoy_done.push(i);
                            self.make_decoy(pid);
                        }
                    }
                }
            }
            if now - last_sample >= Duration::from_millis(50) {
                last_sample = now;
                self.sample();
                let cpu = self.tool_cpu_ms();
                let wall = self.ms();
                // The floor is a native machine's, times the slowdown: under
                // an emulated CPU each step the tools take costs that many
                // times its native CPU time, while a busy loop still uses
                // the whole of the wall time.
                if !spin && cpu > 800 * self.plan.slow.max(1) && cpu * 2 > wall {
                    spin = true;
                    self.out
                        .push(format!("spinning cpu_ms={cpu} wall_ms={wall}"));
                    self.kill_all_marked();
                }
                if tool_end.is_some() && settled.is_none() {
                    // The tool ended: wait for the rest of its machinery (reap's
                    // back, a cleanup) to end too.
                    // By pidfd where it can, not by pid: a decoy may have
                    // taken the pid of a cleanup that has exited.
                    if !self.machinery_running(pid1) {
                        settled = Some(now);
                    }
                }
            }
            if settled.is_some() {
                break;
            }
            if !hang && now - self.t0 > bound {
                hang = true;
                let alive: Vec<String> = self
                    .live_known()
                    .iter()
                    .map(|(pid, st)| format!("{pid}:{}:{}", self.known[pid].argv0, st.state))
                    .collect();
                self.out
                    .push(format!("hang at={} alive={alive:?}", self.ms()));
                self.kill_all_marked();
            }
            if hang && now - self.t0 > bound + Duration::from_secs(3) {
                self.out.push("unkillable".into());
                break;
            }
            let nap = if decoying { 1 } else { 5 };
            sleep_ms(nap);
        }
        let end = tool_end.unwrap_or_else(Instant::now);
        // A process with SIGKILL pending (a parent-death signal the kernel
        // sent as the tool died) is being killed, not left over; on a
        // loaded machine it may still show as running for a moment.
        let dying_since = Instant::now();
        while dying_since.elapsed() < Duration::from_millis(500)
            && self
                .live_known()
                .iter()
                .any(|(pid, st)| st.state != 'Z' && kill_pending(*pid))
        {
            sleep_ms(5);
        }
        // What is left of the scenario once the tool and its machinery ended.
        self.sample();
        self.read_log();
        let node_of: HashMap<i32, usize> = self.nodes.iter().map(|(&n, &(p, _))| (p, n)).collect();
        for (pid, st) in self.live_known() {
            if st.state == 'Z' && st.ppid == self.me {
                continue; // ours to reap, and reaped below
            }
            let k = &self.known[&pid];
            self.out.push(format!(
                "leftover pid={pid} node={} state={} argv0={} comm={}",
                node_of
                    .get(&pid)
                    .map(|n| n.to_string())
                    .unwrap_or("-".into()),
                st.state,
                k.argv0,
                hex(&comm(pid))
            ));
        }
        for ((pid, _), (first, last, ppid)) in &self.zombies {
            // No node came up: the root died before its ready line, so it
            // forked nothing, and its pid was never known. A tool's
            // children were then the chain's processes, COMMAND and a
            // cleanup: only a cleanup's zombie is one a tool keeps.
            let cleanup = self.cleanups.iter().any(|c| c.0 == *pid);
            if self.nodes.is_empty() && !cleanup {
                continue;
            }
            let held = last.duration_since(*first).as_millis();
            if held > 300 {
                self.out.push(format!(
                    "zombie pid={pid} ppid={ppid} parent={} held_ms={held} comm={}",
                    self.known
                        .get(ppid)
                        .map(|k| k.argv0.as_str())
                        .unwrap_or("?"),
                    hex(&comm(*pid))
                ));
            }
        }
        // End everything by PID (recorded start times), then reap.
        for _ in 0..50 {
            self.kill_all_marked();
            self.reap_children(tool, &mut tool_status);
            if self.live_known().is_empty() {
                break;
            }
            sleep_ms(20);
        }
        sleep_ms(if decoying { 100 } else { 0 });
        self.read_shared(true, true);
        if let Some((_, buf, _)) = &self.shared {
            self.out.push(format!("shared read={}", buf.len()));
        }
        self.read_log();
        for (&pid, state) in &self.decoys {
            self.out.push(format!("decoy pid={pid} {state}"));
            raw_kill(pid, libc::SIGKILL);
        }
        for _ in 0..self.decoys.len() {
            // SAFETY: reaping our own decoys.
            unsafe { libc::waitpid(-1, std::ptr::null_mut(), 0) };
        }
        let settle_ms = settled.map(|s| (s - self.t0).as_millis()).unwrap_or(0);
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: valid rusage buffer.
        unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut ru) };
        let ru_ms = (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) as u64 * 1000
            + (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) as u64 / 1000;
        self.out.push(format!(
            "status {}",
            tool_status.map(|s| s.to_string()).unwrap_or("none".into())
        ));
        self.out
            .push(format!("wall_ms {}", (end - self.t0).as_millis()));
        self.out.push(format!("settle_ms {settle_ms}"));
        self.out.push(format!("cpu_ms {}", self.tool_cpu_ms()));
        self.out.push(format!("rusage_ms {ru_ms}"));
        self.out.push(format!("hang {}", u8::from(hang)));
        self.out.push(format!("spin {}", u8::from(spin)));
    }
}
