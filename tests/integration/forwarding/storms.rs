//! Signal storms: 10 000 signals of mixed kinds (forwarded, dropped, mapped,
//! realtime, stop triggers) sent at each tool while COMMAND runs.
//!
//! What must hold afterwards:
//! - the tool is still up and still passes signals on at once (a barrier,
//!   below, goes through it), and it exits with COMMAND's status;
//! - COMMAND received every forwarded realtime signal: realtime signals
//!   queue, so each one sent is counted and the counts must be equal;
//! - COMMAND received each forwarded standard signal at least once after it
//!   was last sent (standard signals collapse while pending, so a count means
//!   nothing for them): the last send of each is bracketed by two realtime
//!   barriers, and its `got` line must come between the barriers' lines;
//! - no dropped signal ever reaches COMMAND, and every signal COMMAND got
//!   came from the tool (the back process for reap).
//!
//! The senders use `sigqueue(3)` for realtime signals, which fails with
//! EAGAIN instead of losing a signal silently when the queue limit
//! (RLIMIT_SIGPENDING, counted per user over every process) is reached; and
//! they keep at most [`IN_FLIGHT`] realtime signals on their way, far below
//! that limit, so a loss can only be the tool's.

use crate::kit::{bin, Run, TIMEOUT};
use crate::procfs;
use crate::reap_kit;
use std::time::{Duration, Instant};

/// Signals sent per storm.
const STORM: usize = 10_000;
/// Realtime signals sent but not yet seen by COMMAND, at most.
const IN_FLIGHT: usize = 2_000;

pub fn rt(n: i32) -> i32 {
    libc::SIGRTMIN() + n
}

/// `sigqueue(3)`, retried while the kernel's queue is full (EAGAIN).
pub fn queue(pid: i32, sig: i32) {
    let deadline = Instant::now() + TIMEOUT;
    loop {
        let value = libc::sigval {
            sival_ptr: std::ptr::null_mut(),
        };
        // SAFETY: sigqueue to a process the test started and has not reaped.
        if unsafe { libc::sigqueue(pid, sig, value) } == 0 {
            return;
        }
        let err = std::io::Error::last_os_error();
        assert_eq!(
            err.raw_os_error(),
            Some(libc::EAGAIN),
            "sigqueue({pid}, {sig})"
        );
        assert!(Instant::now() < deadline, "signal queue full for 10 s");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// `kill(2)` of a standard signal.
pub fn kill(pid: i32, sig: i32) {
    // SAFETY: kill of a process the test started and has not reaped.
    assert_eq!(unsafe { libc::kill(pid, sig) }, 0, "kill({pid}, {sig})");
}

/// Send a standard or realtime signal.
pub fn send(pid: i32, sig: i32) {
    if sig >= libc::SIGRTMIN() {
        queue(pid, sig)
    } else {
        kill(pid, sig)
    }
}

/// The name sigprobe prints for `sig`.
fn name(sig: i32) -> String {
    let rtmin = libc::SIGRTMIN();
    if sig >= rtmin {
        return if sig == rtmin {
            "RTMIN".into()
        } else {
            format!("RTMIN+{}", sig - rtmin)
        };
    }
    let names = [
        (libc::SIGHUP, "HUP"),
        (libc::SIGINT, "INT"),
        (libc::SIGQUIT, "QUIT"),
        (libc::SIGUSR1, "USR1"),
        (libc::SIGUSR2, "USR2"),
        (libc::SIGALRM, "ALRM"),
        (libc::SIGTERM, "TERM"),
        (libc::SIGURG, "URG"),
        (libc::SIGVTALRM, "VTALRM"),
        (libc::SIGPROF, "PROF"),
        (libc::SIGWINCH, "WINCH"),
        (libc::SIGPWR, "PWR"),
    ];
    names
        .iter()
        .find(|(n, _)| *n == sig)
        .map(|(_, s)| s.to_string())
        .unwrap_or_else(|| sig.to_string())
}

/// What one storm sends and what COMMAND must see of it.
struct Plan {
    tool: &'static str,
    opts: Vec<String>,
    /// (sent to the tool, received by COMMAND), standard signals.
    standard: Vec<(i32, i32)>,
    /// (sent, received), realtime: counted exactly.
    realtime: Vec<(i32, i32)>,
    /// Never seen by COMMAND.
    dropped: Vec<i32>,
}

/// The barrier: a forwarded realtime signal used only to mark a point in
/// COMMAND's output.
fn barrier() -> i32 {
    rt(3)
}

/// Count the lines starting with `got NAME `.
fn count(lines: &[String], sig: i32) -> usize {
    let prefix = format!("got {} ", name(sig));
    lines.iter().filter(|l| l.starts_with(&prefix)).count()
}

/// Index of the `n`th (0-based) barrier line, waiting for it.
fn barrier_line(run: &Run, n: usize) -> usize {
    let prefix = format!("got {} ", name(barrier()));
    let mut at = None;
    procfs::wait_until("the barrier reaches COMMAND", TIMEOUT, || {
        at = run
            .lines_so_far()
            .iter()
            .enumerate()
            .filter(|(_, l)| l.starts_with(&prefix))
            .nth(n)
            .map(|(i, _)| i);
        at.is_some()
    });
    at.unwrap()
}

/// A small deterministic PRNG (xorshift64*), so a failing storm can be
/// replayed exactly.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.max(1))
    }

    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

fn storm(plan: Plan) {
    let started = Instant::now();
    let mut run = Run::new(bin(plan.tool))
        .args(&plan.opts)
        .arg("--")
        .arg(bin("sigprobe"))
        .args(["--exit-on", "INT"])
        .stderr_piped()
        .watchdog(Duration::from_secs(120))
        .spawn();
    let probe = run.expect_ready(TIMEOUT);
    let tool = run.pid();
    let sender = if plan.tool == "reap" {
        reap_kit::back_of(tool)
    } else {
        tool
    };

    let mut rng = Rng::new(0x5eed ^ plan.tool.len() as u64);
    let mut kinds: Vec<i32> = Vec::new();
    // Weights: realtime 4, standard 4, dropped 2 (over the lists).
    for _ in 0..4 {
        kinds.extend(plan.realtime.iter().map(|&(s, _)| s));
    }
    for _ in 0..2 {
        kinds.extend(plan.standard.iter().map(|&(s, _)| s));
    }
    kinds.extend(plan.dropped.iter().copied());
    let mut sent_rt = vec![0usize; plan.realtime.len()];
    for i in 0..STORM {
        let sig = kinds[rng.below(kinds.len())];
        send(tool, sig);
        if let Some(k) = plan.realtime.iter().position(|&(s, _)| s == sig) {
            sent_rt[k] += 1;
        }
        if i % 250 == 249 {
            // Keep the realtime signals on their way below IN_FLIGHT.
            let sent: usize = sent_rt.iter().sum();
            procfs::wait_until("COMMAND catches up", Duration::from_secs(30), || {
                let lines = run.lines_so_far();
                let got: usize = plan.realtime.iter().map(|&(_, r)| count(&lines, r)).sum();
                sent - got <= IN_FLIGHT
            });
        }
    }
    assert!(procfs::alive(tool), "{} died in the storm", plan.tool);

    // The last send of each standard signal, between two barriers: every
    // line after the first barrier's comes from signals sent after it.
    queue(tool, barrier());
    let first = barrier_line(&run, 0);
    for &(sig, _) in &plan.standard {
        send(tool, sig);
    }
    queue(tool, barrier());
    let second = barrier_line(&run, 1);
    let lines = run.lines_so_far();
    let between = &lines[first + 1..second];
    for &(sent, received) in &plan.standard {
        assert!(
            count(between, received) >= 1,
            "{}: {} sent last after the first barrier, but COMMAND got no {} before the second: \
             {between:?}",
            plan.tool,
            name(sent),
            name(received)
        );
    }

    // Every realtime signal, counted; nothing dropped got through.
    let total_deadline = Instant::now() + Duration::from_secs(30);
    for (k, &(sent, received)) in plan.realtime.iter().enumerate() {
        loop {
            let got = count(&run.lines_so_far(), received);
            if got == sent_rt[k] {
                break;
            }
            assert!(
                got < sent_rt[k] && Instant::now() < total_deadline,
                "{}: sent {} {}, COMMAND got {got} {}",
                plan.tool,
                sent_rt[k],
                name(sent),
                name(received)
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }
    let lines = run.lines_so_far();
    for &sig in &plan.dropped {
        assert_eq!(
            count(&lines, sig),
            0,
            "{}: dropped {} reached COMMAND",
            plan.tool,
            name(sig)
        );
    }
    let from = format!("pid={} from={sender}", probe.pid);
    let strays: Vec<&String> = lines
        .iter()
        .filter(|l| l.starts_with("got ") && !l.ends_with(&from))
        .take(5)
        .collect();
    assert!(strays.is_empty(), "{}: {strays:?}", plan.tool);

    // Still in charge: INT ends COMMAND (exit 0), and the tool with it.
    kill(tool, libc::SIGINT);
    let status = run.wait_exit(TIMEOUT);
    assert_eq!(status.code(), Some(0), "{}: {status:?}", plan.tool);
    assert!(!procfs::alive(probe.pid), "COMMAND left behind");
    eprintln!(
        "storm at {}: {STORM} signals, {:?} realtime, {:.1?}",
        plan.tool,
        sent_rt,
        started.elapsed()
    );
}

#[test]
fn storm_at_pgwrap() {
    storm(Plan {
        tool: "pgwrap",
        opts: vec![
            "--forward".into(),
            "HUP,INT,TERM,USR1,USR2,WINCH,RTMIN+1,RTMIN+3".into(),
            "--map".into(),
            "RTMIN+4:RTMIN+2".into(),
            "--map".into(),
            "PWR:URG".into(),
        ],
        standard: vec![
            (libc::SIGHUP, libc::SIGHUP),
            (libc::SIGTERM, libc::SIGTERM),
            (libc::SIGUSR1, libc::SIGUSR1),
            (libc::SIGUSR2, libc::SIGUSR2),
            (libc::SIGWINCH, libc::SIGWINCH),
            (libc::SIGPWR, libc::SIGURG),
        ],
        realtime: vec![(rt(1), rt(1)), (rt(4), rt(2))],
        dropped: vec![
            libc::SIGALRM,
            libc::SIGPROF,
            libc::SIGVTALRM,
            libc::SIGQUIT,
            libc::SIGPWR,
            rt(4),
            rt(5),
        ],
    });
}

#[test]
fn storm_at_graceful() {
    // TERM and HUP are stop triggers: the first starts the ladder (with an
    // infinite grace), each later one is passed on again.
    storm(Plan {
        tool: "graceful",
        opts: vec![
            "--grace".into(),
            "inf".into(),
            "--forward".into(),
            "USR1,USR2,WINCH,RTMIN+1,RTMIN+3".into(),
        ],
        standard: vec![
            (libc::SIGTERM, libc::SIGTERM),
            (libc::SIGHUP, libc::SIGHUP),
            (libc::SIGUSR1, libc::SIGUSR1),
            (libc::SIGUSR2, libc::SIGUSR2),
            (libc::SIGWINCH, libc::SIGWINCH),
        ],
        realtime: vec![(rt(1), rt(1))],
        dropped: vec![
            libc::SIGALRM,
            libc::SIGPROF,
            libc::SIGVTALRM,
            libc::SIGPWR,
            rt(5),
        ],
    });
}

#[test]
fn storm_at_reap() {
    // Every signal crosses from the front to the back over a pipe.
    storm(Plan {
        tool: "reap",
        opts: vec![
            "--grace".into(),
            "inf".into(),
            "--forward".into(),
            "HUP,INT,TERM,USR1,USR2,WINCH,RTMIN+1,RTMIN+3".into(),
        ],
        standard: vec![
            (libc::SIGHUP, libc::SIGHUP),
            (libc::SIGTERM, libc::SIGTERM),
            (libc::SIGUSR1, libc::SIGUSR1),
            (libc::SIGUSR2, libc::SIGUSR2),
            (libc::SIGWINCH, libc::SIGWINCH),
        ],
        realtime: vec![(rt(1), rt(1))],
        dropped: vec![
            libc::SIGALRM,
            libc::SIGPROF,
            libc::SIGVTALRM,
            libc::SIGPWR,
            libc::SIGQUIT,
            rt(5),
        ],
    });
}

/// The pipe from reap's front to its back holds about 5 000 records; a
/// storm used to overflow it while the back was busy, and the records that
/// did not fit were dropped (realtime signals lost). The back is stopped
/// here so that the pipe surely fills: every signal must still arrive once
/// the back goes on.
#[test]
fn reap_front_pipe_full_loses_no_signal() {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into `limit`.
    unsafe { libc::getrlimit(libc::RLIMIT_SIGPENDING, &mut limit) };
    // Well past the pipe's 5 461 records, well below the queue limit.
    let n = (limit.rlim_cur / 4).min(15_000) as usize;
    assert!(n > 6_000, "RLIMIT_SIGPENDING {} is too low", limit.rlim_cur);
    let mut run = Run::new(bin("reap"))
        .args(["--forward", "INT,RTMIN+1"])
        .arg("--")
        .arg(bin("sigprobe"))
        .args(["--exit-on", "INT"])
        .stderr_piped()
        .spawn();
    let probe = run.expect_ready(TIMEOUT);
    let front = run.pid();
    let back = reap_kit::back_of(front);
    kill(back, libc::SIGSTOP);
    procfs::wait_until("the back is stopped", TIMEOUT, || procfs::is_stopped(back));
    for _ in 0..n {
        queue(front, rt(1));
    }
    kill(back, libc::SIGCONT);
    let expected = format!("got RTMIN+1 pid={} from={back}", probe.pid);
    let mut got = 0;
    procfs::wait_until(
        "every signal reached COMMAND",
        Duration::from_secs(30),
        || {
            got = run
                .lines_so_far()
                .iter()
                .filter(|l| **l == expected)
                .count();
            got >= n
        },
    );
    assert_eq!(got, n);
    kill(front, libc::SIGINT);
    assert_eq!(run.wait_exit(TIMEOUT).code(), Some(0));
}
