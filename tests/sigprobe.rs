//! `sigprobe`: a small, well-behaved child process used by the integration tests.
//!
//! It reports what happens to it on stdout, one line per event, each line written with a
//! single write(2) to fd 1 (never from a signal handler):
//!
//! ```text
//! ready pid=<pid> pgid=<pgid> sid=<sid> ppid=<ppid> role=<main|child|escapee>
//! got <NAME> pid=<own pid> from=<sender pid>
//! read: <line>
//! eof
//! exit pid=<pid>
//! ```
//!
//! Modes and flags:
//!
//! * `--notify TEXT`: send TEXT as one datagram to `$NOTIFY_SOCKET` (a path) and exit 0 at
//!   once (exit 1 if it could not be sent): the shortest-lived notification sender there is.
//! * `--status`: before touching any signal state, print the `SigBlk:`, `SigIgn:` and `SigCgt:`
//!   lines of /proc/self/status verbatim, then `fds=0,1,2,...` (the open fds), and exit 0.
//! * probe mode (default):
//!   * `--ignore LIST`: comma list of signals (names such as `TERM`, `SIGUSR2`, `RTMIN+2`, or
//!     numbers) set to SIG_IGN.
//!   * every other signal except KILL, STOP, SEGV, BUS, ILL, FPE, TRAP, SYS, ABRT, CHLD, TSTP,
//!     TTIN, TTOU and the glibc-reserved 32 and 33 is caught: blocked, given a no-op handler (so
//!     it shows in SigCgt) and taken synchronously through a signalfd in the main loop. Realtime
//!     signals therefore queue and each one is reported with its sender's pid.
//!   * `--fork N`: fork N children in the same process group (role=child) before the main
//!     process prints its ready line. `--escape N`: fork N children that call setsid() first
//!     (role=escapee). Children run the same loop with the same exit rules, except that they
//!     never read stdin; they do not die with their parent.
//!   * `--exit-on LIST` (default `TERM,INT,HUP,QUIT`, `none` for never): after the `got` line of
//!     such a signal, keep reporting signals for `--linger MS` milliseconds (default 0), then
//!     print `exit pid=<pid>` and exit with `--exit-code N` (default 0).
//!   * `--read`: also read stdin (main process only), printing `read: <line>` per line and
//!     `eof` once at end of input; the probe keeps running after `eof`.
//!   * `--sleep-ms N`: exit on its own after N ms (printing `exit pid=<pid>` first).
//!   * `--role NAME`: the main process's ready line says `role=NAME` (tells apart the
//!     probes a shell script starts).
//!   * `--env PREFIX`: first print `env NAME=VALUE` for each environment variable whose name
//!     starts with PREFIX (a cleanup's REAP_* where no shell can show them).
//!
//! Bad flags print a message on stderr and exit with status 2.
//!
//! The binary uses its own C `main` so that the Rust runtime does not change the process state
//! under inspection: no SIGPIPE ignore, no SIGSEGV/SIGBUS handlers, no reopening of closed
//! stdio fds.

#![no_main]

use std::ffi::CStr;
use std::os::raw::{c_char, c_int};
use std::sync::atomic::{AtomicBool, Ordering};

/// Set once a write to stdout failed for good (e.g. EPIPE): later lines are dropped.
static STDOUT_BROKEN: AtomicBool = AtomicBool::new(false);

#[no_mangle]
extern "C" fn main(argc: c_int, argv: *const *const c_char) -> c_int {
    let mut args = Vec::new();
    for i in 1..argc.max(0) as usize {
        // SAFETY: the C runtime passes argc valid, NUL-terminated argument strings.
        let arg = unsafe { CStr::from_ptr(*argv.add(i)) };
        args.push(arg.to_string_lossy().into_owned());
    }
    if args.len() == 2 && args[0] == "--notify" {
        return notify_mode(&args[1]);
    }
    if args.len() == 2 && args[0] == "--walk-race" {
        return match args[1].parse() {
            Ok(n) => walk_race_mode(n),
            Err(_) => {
                err_line("sigprobe: --walk-race wants a count");
                2
            }
        };
    }
    match parse_args(&args) {
        Ok(Mode::Status) => status_mode(),
        Ok(Mode::Probe(opts)) => probe_mode(&opts),
        Err(msg) => {
            err_line(&format!("sigprobe: {msg}"));
            err_line(
                "usage: sigprobe --status | [--ignore LIST] [--exit-on LIST|none] [--linger MS] \
                 [--exit-code N] [--fork N] [--escape N] [--read] [--sleep-ms N] [--env PREFIX] [--role NAME]",
            );
            2
        }
    }
}

/// `--notify TEXT`: one datagram to `$NOTIFY_SOCKET`, then exit.
fn notify_mode(text: &str) -> c_int {
    let Some(path) = std::env::var_os("NOTIFY_SOCKET") else {
        err_line("sigprobe: --notify: NOTIFY_SOCKET is not set");
        return 1;
    };
    let sent =
        std::os::unix::net::UnixDatagram::unbound().and_then(|s| s.send_to(text.as_bytes(), &path));
    match sent {
        Ok(_) => 0,
        Err(e) => {
            err_line(&format!("sigprobe: --notify: {e}"));
            1
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Arguments

enum Mode {
    Status,
    Probe(Opts),
}

struct Opts {
    ignore: Vec<c_int>,
    exit_on: Vec<c_int>,
    linger_ms: u64,
    exit_code: c_int,
    fork: u32,
    escape: u32,
    read: bool,
    sleep_ms: Option<u64>,
    env_prefix: Option<String>,
    role: Option<String>,
}

fn parse_args(args: &[String]) -> Result<Mode, String> {
    let mut status = false;
    let mut opts = Opts {
        ignore: Vec::new(),
        exit_on: Vec::new(),
        linger_ms: 0,
        exit_code: 0,
        fork: 0,
        escape: 0,
        read: false,
        sleep_ms: None,
        env_prefix: None,
        role: None,
    };
    let mut exit_on: Option<Vec<c_int>> = None;
    let mut i = 0;
    while i < args.len() {
        let flag = args[i].as_str();
        // Accept both `--flag VALUE` and `--flag=VALUE`.
        let (name, inline) = match flag.split_once('=') {
            Some((n, v)) if n.starts_with("--") => (n, Some(v.to_string())),
            _ => (flag, None),
        };
        let takes_value = matches!(
            name,
            "--ignore"
                | "--exit-on"
                | "--linger"
                | "--exit-code"
                | "--fork"
                | "--escape"
                | "--sleep-ms"
                | "--env"
                | "--role"
        );
        let value = if takes_value {
            match inline {
                Some(v) => v,
                None => {
                    i += 1;
                    match args.get(i) {
                        Some(v) => v.clone(),
                        None => return Err(format!("{name} needs a value")),
                    }
                }
            }
        } else {
            if inline.is_some() {
                return Err(format!("{name} takes no value"));
            }
            String::new()
        };
        match name {
            "--status" => status = true,
            "--read" => opts.read = true,
            "--ignore" => opts.ignore.extend(parse_sig_list(&value)?),
            "--exit-on" => {
                let v = value.trim();
                if v.is_empty() || v.eq_ignore_ascii_case("none") {
                    exit_on = Some(Vec::new());
                } else {
                    exit_on = Some(parse_sig_list(v)?);
                }
            }
            "--linger" => opts.linger_ms = parse_num(name, &value)?,
            "--sleep-ms" => opts.sleep_ms = Some(parse_num(name, &value)?),
            "--env" => opts.env_prefix = Some(value),
            "--role" => opts.role = Some(value),
            "--exit-code" => {
                let n: u64 = parse_num(name, &value)?;
                if n > 255 {
                    return Err(format!("--exit-code must be 0..=255, got {n}"));
                }
                opts.exit_code = n as c_int;
            }
            "--fork" | "--escape" => {
                let n: u64 = parse_num(name, &value)?;
                if n > 1000 {
                    return Err(format!("{name} must be at most 1000, got {n}"));
                }
                if name == "--fork" {
                    opts.fork = n as u32;
                } else {
                    opts.escape = n as u32;
                }
            }
            _ => return Err(format!("unknown argument {flag:?}")),
        }
        i += 1;
    }
    opts.exit_on = match exit_on {
        Some(list) => list,
        None => vec![libc::SIGTERM, libc::SIGINT, libc::SIGHUP, libc::SIGQUIT],
    };
    if status {
        Ok(Mode::Status)
    } else {
        Ok(Mode::Probe(opts))
    }
}

fn parse_num(flag: &str, value: &str) -> Result<u64, String> {
    value
        .trim()
        .parse::<u64>()
        .map_err(|_| format!("{flag}: not a non-negative integer: {value:?}"))
}

fn parse_sig_list(list: &str) -> Result<Vec<c_int>, String> {
    let mut out = Vec::new();
    for item in list.split(',') {
        let item = item.trim();
        if item.is_empty() {
            continue;
        }
        match sig_from_name(item) {
            Some(sig) => out.push(sig),
            None => return Err(format!("unknown signal {item:?}")),
        }
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// Signal names

const NAMES: &[(&str, c_int)] = &[
    ("HUP", libc::SIGHUP),
    ("INT", libc::SIGINT),
    ("QUIT", libc::SIGQUIT),
    ("ILL", libc::SIGILL),
    ("TRAP", libc::SIGTRAP),
    ("ABRT", libc::SIGABRT),
    ("BUS", libc::SIGBUS),
    ("FPE", libc::SIGFPE),
    ("KILL", libc::SIGKILL),
    ("USR1", libc::SIGUSR1),
    ("SEGV", libc::SIGSEGV),
    ("USR2", libc::SIGUSR2),
    ("PIPE", libc::SIGPIPE),
    ("ALRM", libc::SIGALRM),
    ("TERM", libc::SIGTERM),
    ("STKFLT", libc::SIGSTKFLT),
    ("CHLD", libc::SIGCHLD),
    ("CONT", libc::SIGCONT),
    ("STOP", libc::SIGSTOP),
    ("TSTP", libc::SIGTSTP),
    ("TTIN", libc::SIGTTIN),
    ("TTOU", libc::SIGTTOU),
    ("URG", libc::SIGURG),
    ("XCPU", libc::SIGXCPU),
    ("XFSZ", libc::SIGXFSZ),
    ("VTALRM", libc::SIGVTALRM),
    ("PROF", libc::SIGPROF),
    ("WINCH", libc::SIGWINCH),
    ("IO", libc::SIGIO),
    ("PWR", libc::SIGPWR),
    ("SYS", libc::SIGSYS),
];

const ALIASES: &[(&str, c_int)] = &[
    ("IOT", libc::SIGABRT),
    ("POLL", libc::SIGIO),
    ("CLD", libc::SIGCHLD),
];

/// Where the tools' realtime names count from (pgkit's `RTMIN`): 34 in every
/// build, musl's (which names 35 SIGRTMIN) included.
const RTMIN: c_int = 34;

/// `TERM`, `RTMIN+3`, `RTMAX-1`, ... (no `SIG` prefix); unknown numbers print as digits.
fn sig_name(sig: c_int) -> String {
    let (min, max) = (RTMIN, libc::SIGRTMAX());
    if (min..=max).contains(&sig) {
        let half = (max - min) / 2;
        let n = sig - min;
        return if n == 0 {
            "RTMIN".to_string()
        } else if n <= half {
            format!("RTMIN+{n}")
        } else if sig == max {
            "RTMAX".to_string()
        } else {
            format!("RTMAX-{}", max - sig)
        };
    }
    match NAMES.iter().find(|(_, s)| *s == sig) {
        Some((name, _)) => name.to_string(),
        None => sig.to_string(),
    }
}

fn sig_from_name(text: &str) -> Option<c_int> {
    let max = libc::SIGRTMAX();
    if let Ok(n) = text.parse::<c_int>() {
        return (1..=max).contains(&n).then_some(n);
    }
    let upper = text.to_ascii_uppercase();
    let name = upper.strip_prefix("SIG").unwrap_or(&upper);
    if let Some((_, sig)) = NAMES.iter().chain(ALIASES).find(|(n, _)| *n == name) {
        return Some(*sig);
    }
    let min = RTMIN;
    let (base, rest) = if let Some(rest) = name.strip_prefix("RTMIN") {
        (min, rest)
    } else if let Some(rest) = name.strip_prefix("RTMAX") {
        (max, rest)
    } else {
        return None;
    };
    let sig = if rest.is_empty() {
        base
    } else if let Some(n) = rest.strip_prefix('+') {
        base.checked_add(n.parse::<c_int>().ok()?)?
    } else if let Some(n) = rest.strip_prefix('-') {
        base.checked_sub(n.parse::<c_int>().ok()?)?
    } else {
        return None;
    };
    (min..=max).contains(&sig).then_some(sig)
}

/// Signals the probe never catches.
fn never_caught(sig: c_int) -> bool {
    matches!(
        sig,
        libc::SIGKILL
            | libc::SIGSTOP
            | libc::SIGSEGV
            | libc::SIGBUS
            | libc::SIGILL
            | libc::SIGFPE
            | libc::SIGTRAP
            | libc::SIGSYS
            | libc::SIGABRT
            | libc::SIGCHLD
            | libc::SIGTSTP
            | libc::SIGTTIN
            | libc::SIGTTOU
            | 32
            | 33
    )
}

// ---------------------------------------------------------------------------------------------
// Output

/// Write `line` plus '\n' to fd 1 with one write(2) (retrying only on EINTR / short writes).
fn out_line(line: &str) {
    if STDOUT_BROKEN.load(Ordering::Relaxed) {
        return;
    }
    let mut buf = Vec::with_capacity(line.len() + 1);
    buf.extend_from_slice(line.as_bytes());
    buf.push(b'\n');
    if !write_all(1, &buf) {
        STDOUT_BROKEN.store(true, Ordering::Relaxed);
    }
}

fn err_line(line: &str) {
    let mut buf = Vec::with_capacity(line.len() + 1);
    buf.extend_from_slice(line.as_bytes());
    buf.push(b'\n');
    write_all(2, &buf);
}

fn write_all(fd: c_int, mut buf: &[u8]) -> bool {
    while !buf.is_empty() {
        // SAFETY: buf is a valid readable slice.
        let n = unsafe { libc::write(fd, buf.as_ptr().cast(), buf.len()) };
        if n > 0 {
            buf = &buf[n as usize..];
            continue;
        }
        match errno() {
            libc::EINTR => continue,
            libc::EAGAIN => {
                let mut pfd = libc::pollfd {
                    fd,
                    events: libc::POLLOUT,
                    revents: 0,
                };
                // SAFETY: one valid pollfd.
                if unsafe { libc::poll(&mut pfd, 1, 1000) } < 0 && errno() != libc::EINTR {
                    return false;
                }
            }
            _ => return false,
        }
    }
    true
}

fn errno() -> c_int {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

// ---------------------------------------------------------------------------------------------
// --status

fn status_mode() -> c_int {
    // Nothing here touches signal state.
    let status = match std::fs::read("/proc/self/status") {
        Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
        Err(e) => {
            err_line(&format!("sigprobe: cannot read /proc/self/status: {e}"));
            return 1;
        }
    };
    for key in ["SigBlk:", "SigIgn:", "SigCgt:"] {
        match status.lines().find(|l| l.starts_with(key)) {
            Some(line) => out_line(line),
            None => out_line(&format!("{key}\t?")),
        }
    }
    match open_fds() {
        Some(fds) => {
            let list: Vec<String> = fds.iter().map(|fd| fd.to_string()).collect();
            out_line(&format!("fds={}", list.join(",")));
            0
        }
        None => {
            err_line("sigprobe: cannot read /proc/self/fd");
            1
        }
    }
}

/// Sorted open fds, without the one used to read /proc/self/fd.
fn open_fds() -> Option<Vec<c_int>> {
    // SAFETY: plain opendir/readdir/closedir on a constant NUL-terminated path.
    unsafe {
        let dir = libc::opendir(c"/proc/self/fd".as_ptr());
        if dir.is_null() {
            return None;
        }
        let own = libc::dirfd(dir);
        let mut fds = Vec::new();
        loop {
            let ent = libc::readdir(dir);
            if ent.is_null() {
                break;
            }
            let name = CStr::from_ptr((*ent).d_name.as_ptr());
            if let Ok(fd) = name.to_string_lossy().parse::<c_int>() {
                if fd != own {
                    fds.push(fd);
                }
            }
        }
        libc::closedir(dir);
        fds.sort_unstable();
        Some(fds)
    }
}

// ---------------------------------------------------------------------------------------------
// Probe mode

extern "C" fn noop_handler(_sig: c_int) {}

#[derive(Clone, Copy, PartialEq)]
enum Role {
    Main,
    Child,
    Escapee,
}

fn probe_mode(opts: &Opts) -> c_int {
    let max = libc::SIGRTMAX();
    if let Some(prefix) = &opts.env_prefix {
        let mut vars: Vec<_> = std::env::vars_os()
            .filter(|(k, _)| k.to_string_lossy().starts_with(prefix.as_str()))
            .collect();
        vars.sort();
        for (k, v) in vars {
            out_line(&format!(
                "env {}={}",
                k.to_string_lossy(),
                v.to_string_lossy()
            ));
        }
    }

    // SAFETY: sigaction/sigprocmask calls with properly initialised structures.
    let mut catch: libc::sigset_t = unsafe { std::mem::zeroed() };
    unsafe {
        libc::sigemptyset(&mut catch);
        for &sig in &opts.ignore {
            if libc::signal(sig, libc::SIG_IGN) == libc::SIG_ERR {
                err_line(&format!("sigprobe: cannot ignore {}", sig_name(sig)));
            }
        }
        // Block first, then install the handlers: a signal arriving in
        // between must stay pending for the signalfd, not run the no-op
        // handler and vanish.
        for sig in 1..=max {
            if !(never_caught(sig) || opts.ignore.contains(&sig)) {
                libc::sigaddset(&mut catch, sig);
            }
        }
        libc::sigprocmask(libc::SIG_BLOCK, &catch, std::ptr::null_mut());
        for sig in 1..=max {
            if libc::sigismember(&catch, sig) != 1 {
                continue;
            }
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = noop_handler as extern "C" fn(c_int) as usize;
            libc::sigfillset(&mut sa.sa_mask);
            sa.sa_flags = libc::SA_RESTART;
            libc::sigaction(sig, &sa, std::ptr::null_mut());
        }
    }

    // Fork children before the main ready line; they inherit dispositions and the mask.
    let mut role = Role::Main;
    let plan = std::iter::repeat(Role::Child)
        .take(opts.fork as usize)
        .chain(std::iter::repeat(Role::Escapee).take(opts.escape as usize));
    for kind in plan {
        // SAFETY: single-threaded process; the child only continues with this same code.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            err_line(&format!(
                "sigprobe: fork failed: {}",
                std::io::Error::last_os_error()
            ));
            continue;
        }
        if pid == 0 {
            role = kind;
            if kind == Role::Escapee {
                // SAFETY: plain syscall.
                unsafe { libc::setsid() };
            }
            break;
        }
    }

    // SAFETY: plain syscalls.
    let (pid, pgid, sid, ppid) = unsafe {
        (
            libc::getpid(),
            libc::getpgid(0),
            libc::getsid(0),
            libc::getppid(),
        )
    };
    let role_name = match role {
        Role::Main => opts.role.as_deref().unwrap_or("main"),
        Role::Child => "child",
        Role::Escapee => "escapee",
    };
    out_line(&format!(
        "ready pid={pid} pgid={pgid} sid={sid} ppid={ppid} role={role_name}"
    ));

    // SAFETY: catch is an initialised sigset.
    let sfd = unsafe { libc::signalfd(-1, &catch, libc::SFD_CLOEXEC) };
    if sfd < 0 {
        err_line(&format!(
            "sigprobe: signalfd failed: {}",
            std::io::Error::last_os_error()
        ));
        return 1;
    }

    let start = now_ns();
    let sleep_deadline = opts
        .sleep_ms
        .map(|ms| start.saturating_add(ms.saturating_mul(1_000_000)));
    let mut linger_deadline: Option<u64> = None;
    let mut reading = opts.read && role == Role::Main;
    let mut pending = Vec::new();

    loop {
        let now = now_ns();
        let deadline = match (sleep_deadline, linger_deadline) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        if let Some(d) = deadline {
            if now >= d {
                out_line(&format!("exit pid={pid}"));
                return opts.exit_code;
            }
        }
        let timeout_ms: c_int = match deadline {
            None => -1,
            Some(d) => {
                let ms = (d - now).div_ceil(1_000_000);
                ms.min(c_int::MAX as u64) as c_int
            }
        };

        let mut pfds = [
            libc::pollfd {
                fd: sfd,
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: 0,
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        let nfds = if reading { 2 } else { 1 };
        // SAFETY: pfds holds at least nfds valid entries.
        let rc = unsafe { libc::poll(pfds.as_mut_ptr(), nfds, timeout_ms) };
        if rc < 0 {
            if errno() == libc::EINTR {
                continue;
            }
            err_line(&format!(
                "sigprobe: poll failed: {}",
                std::io::Error::last_os_error()
            ));
            return 1;
        }

        if pfds[0].revents != 0 {
            for (sig, from) in read_signals(sfd) {
                out_line(&format!("got {} pid={pid} from={from}", sig_name(sig)));
                if linger_deadline.is_none() && opts.exit_on.contains(&sig) {
                    linger_deadline =
                        Some(now_ns().saturating_add(opts.linger_ms.saturating_mul(1_000_000)));
                }
            }
        }

        if reading && pfds[1].revents != 0 {
            reading = read_stdin(&mut pending);
        }
    }
}

/// Drain the signalfd: (signal, sender pid) pairs in arrival order.
fn read_signals(sfd: c_int) -> Vec<(c_int, u32)> {
    const N: usize = 16;
    let mut got = Vec::new();
    // SAFETY: signalfd_siginfo is plain old data; all-zero is a valid value.
    let mut infos: [libc::signalfd_siginfo; N] = unsafe { std::mem::zeroed() };
    let size = std::mem::size_of::<libc::signalfd_siginfo>();
    // SAFETY: the buffer is N * size bytes long.
    let n = unsafe { libc::read(sfd, infos.as_mut_ptr().cast(), N * size) };
    if n > 0 {
        for info in infos.iter().take(n as usize / size) {
            got.push((info.ssi_signo as c_int, info.ssi_pid));
        }
    }
    got
}

/// Read what stdin has; print complete lines. Returns false once stdin reached its end.
fn read_stdin(pending: &mut Vec<u8>) -> bool {
    let mut buf = [0u8; 4096];
    // SAFETY: buf is a valid writable buffer.
    let n = unsafe { libc::read(0, buf.as_mut_ptr().cast(), buf.len()) };
    if n < 0 && matches!(errno(), libc::EINTR | libc::EAGAIN) {
        return true;
    }
    if n > 0 {
        pending.extend_from_slice(&buf[..n as usize]);
        while let Some(pos) = pending.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = pending.drain(..=pos).collect();
            let text = String::from_utf8_lossy(&line[..line.len() - 1]);
            out_line(&format!("read: {text}"));
        }
        return true;
    }
    // End of input (or an unreadable stdin): flush a last partial line, then report eof.
    if !pending.is_empty() {
        let text = String::from_utf8_lossy(pending).into_owned();
        pending.clear();
        out_line(&format!("read: {text}"));
    }
    out_line("eof");
    false
}

fn now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    (ts.tv_sec as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(ts.tv_nsec as u64)
}

/// `--walk-race N`: as a child subreaper, N times: fork B, which forks C (a
/// pause) and exits at once; meanwhile walk the descendants (pgkit's
/// `descend::descendants`, what graceful and reap walk) until B is gone,
/// one walk after it. C is alive throughout, under B or re-parented to us:
/// a walk without it missed it. Prints "walks W misses M".
fn walk_race_mode(n: u64) -> c_int {
    // SAFETY: plain prctl.
    unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) };
    let (mut walks, mut misses) = (0u64, 0u64);
    for _ in 0..n {
        let mut fds = [0; 2];
        // SAFETY: a pipe into a valid two-int array.
        if unsafe { libc::pipe(fds.as_mut_ptr()) } != 0 {
            return 1;
        }
        // SAFETY: the child only makes system calls before it exits.
        let b = unsafe { libc::fork() };
        if b == 0 {
            // SAFETY: system calls only; C pauses until killed.
            unsafe {
                let c: i32 = libc::fork();
                if c == 0 {
                    libc::pause();
                    libc::_exit(0);
                }
                libc::write(fds[1], (&c as *const i32).cast(), 4);
                libc::_exit(0);
            }
        }
        let mut c: i32 = 0;
        // SAFETY: reading 4 bytes into an i32; both ends are ours.
        unsafe {
            libc::read(fds[0], (&mut c as *mut i32).cast(), 4);
            libc::close(fds[0]);
            libc::close(fds[1]);
        }
        loop {
            // SAFETY: B is our child.
            let gone = unsafe { libc::waitpid(b, std::ptr::null_mut(), libc::WNOHANG) } == b;
            let tree = pgkit::descend::descendants().unwrap_or_default();
            walks += 1;
            if c > 0 && !tree.iter().any(|p| p.pid == c) {
                misses += 1;
            }
            if gone {
                break;
            }
        }
        // SAFETY: C is ours (re-parented to us), killed and reaped by pid.
        unsafe {
            libc::kill(c, libc::SIGKILL);
            libc::waitpid(c, std::ptr::null_mut(), 0);
        }
    }
    println!("walks {walks} misses {misses}");
    0
}
