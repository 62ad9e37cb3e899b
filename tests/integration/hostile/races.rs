//! Start-up races: a TERM sent at every point of a tool's start-up, many
//! times over, is never lost, never reaches the wrong process, and never
//! leaves anything hanging.
//!
//! The points: before the tool exists as itself (the signal is already
//! pending when the caller execs it), right after the caller's spawn
//! returns (before or while the `.init_array` constructor blocks the
//! signals), once the signals are blocked (before COMMAND is spawned), while
//! COMMAND's process exists but has not exec'd yet, right after its exec
//! (before COMMAND has set up its own signals), and a sweep of delays across
//! all of these.
//!
//! What "not lost" means at each point, as the caller sees it:
//! - COMMAND got the TERM (sigprobe prints `got TERM`, sent by the tool or,
//!   for reap, by its back process, COMMAND's parent) and exited 0, and the
//!   tool exited 0; or
//! - the caller sees the tool killed by TERM. That is right in two cases:
//!   the TERM arrived before the constructor blocked it, so it killed the
//!   tool by its default action before COMMAND existed; or COMMAND got it
//!   before it had set up its own handling (after exec: the caller's
//!   default action is restored in COMMAND) and died of it, and the tool
//!   re-raised it. In both cases COMMAND never printed its ready line (a
//!   ready probe catches TERM and exits 0).
//!
//! A wrong outcome is anything else: a hang (COMMAND running on without the
//! TERM), another status, a `got` line from a process other than COMMAND's
//! parent, or a process left behind once the tool has exited.

use crate::forwarding::storms::Rng;
use crate::kit::{bin, Run, TIMEOUT};
use crate::procfs;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::time::{Duration, Instant};

#[derive(Clone, Copy, Debug)]
enum Point {
    /// Pending (blocked) in the caller when it execs the tool.
    BeforeExec,
    /// As soon as the caller's spawn returns.
    AtOnce,
    /// Once the tool has TERM blocked.
    Blocked,
    /// Once COMMAND's process exists (before or during its exec).
    Spawned,
    /// Once COMMAND's process runs sigprobe's image.
    Execed,
    /// After a busy wait of this many microseconds.
    Delay(u64),
}

/// The process that runs (or will run) COMMAND: a child of the tool (of
/// reap's back), if there is one yet.
fn command_process(tool: &str, pid: i32) -> Option<i32> {
    let parent = if tool == "reap" {
        *children(pid).first()?
    } else {
        pid
    };
    children(parent).first().copied()
}

/// Children of `pid` from its main thread's `children` file (cheap enough
/// to spin on).
fn children(pid: i32) -> Vec<i32> {
    std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .unwrap_or_default()
        .split_ascii_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect()
}

/// Spin (no sleep: the windows are microseconds wide) until `cond`, or give
/// up after 10 s (the tool may have died, which the outcome check judges).
fn spin(mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + TIMEOUT;
    while !cond() && Instant::now() < deadline {
        std::hint::spin_loop();
    }
}

fn race(tool: &str, point: Point) {
    let mut builder = Run::new(bin(tool));
    if let Point::BeforeExec = point {
        builder = builder.configure(|cmd| {
            // SAFETY: only async-signal-safe calls between fork and exec.
            unsafe {
                cmd.pre_exec(|| {
                    let mut set: libc::sigset_t = std::mem::zeroed();
                    libc::sigemptyset(&mut set);
                    libc::sigaddset(&mut set, libc::SIGTERM);
                    libc::sigprocmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
                    libc::raise(libc::SIGTERM);
                    Ok(())
                })
            };
        });
    }
    let mut run = builder
        .arg("--")
        .arg(bin("sigprobe"))
        .stderr_piped()
        .watchdog(Duration::from_secs(30))
        .spawn();
    let pid = run.pid();
    match point {
        Point::BeforeExec | Point::AtOnce => {}
        Point::Blocked => spin(|| {
            procfs::masks(pid).map_or(true, |(blk, _, _)| procfs::has_sig(blk, libc::SIGTERM))
        }),
        Point::Spawned => spin(|| command_process(tool, pid).is_some()),
        Point::Execed => spin(|| {
            command_process(tool, pid).is_some_and(|c| {
                procfs::cmdline(c)
                    .and_then(|argv| argv.first().cloned())
                    .is_some_and(|a| a.ends_with("sigprobe"))
            })
        }),
        Point::Delay(us) => {
            let until = Instant::now() + Duration::from_micros(us);
            spin(|| Instant::now() >= until);
        }
    }
    if !matches!(point, Point::BeforeExec) {
        run.signal(libc::SIGTERM);
    }
    let status = run.wait_exit(TIMEOUT);
    // Every holder of the tool's stdout (COMMAND included) is gone.
    run.expect_eof(TIMEOUT);
    let lines = run.lines_so_far();
    let stderr = run.stderr_all();
    let why = format!("{tool} at {point:?}: {status:?}\nstdout: {lines:?}\nstderr: {stderr}");
    let ready = lines
        .iter()
        .find_map(|l| crate::kit::Ready::parse(l).filter(|r| r.role == "main"));
    match (status.code(), status.signal()) {
        (Some(0), _) => {
            let ready = ready.unwrap_or_else(|| panic!("exit 0 without COMMAND: {why}"));
            if tool != "reap" {
                assert_eq!(ready.ppid, pid, "{why}");
            }
            let got = format!("got TERM pid={} from={}", ready.pid, ready.ppid);
            assert!(lines.contains(&got), "TERM lost: {why}");
        }
        (_, Some(libc::SIGTERM)) => {
            assert!(ready.is_none(), "a ready COMMAND died of TERM: {why}");
        }
        _ => panic!("wrong outcome: {why}"),
    }
    let strays: Vec<&String> = lines
        .iter()
        .filter(|l| l.starts_with("got ") && !l.starts_with("got TERM "))
        .collect();
    assert!(strays.is_empty(), "{why}");
    assert!(
        lines.iter().filter(|l| l.starts_with("got ")).count() <= 1,
        "TERM delivered more than once: {why}"
    );
}

fn races(tool: &str) {
    let started = Instant::now();
    let mut outcomes = std::collections::BTreeMap::new();
    for point in [
        Point::BeforeExec,
        Point::AtOnce,
        Point::Blocked,
        Point::Spawned,
        Point::Execed,
    ] {
        for _ in 0..8 {
            race(tool, point);
        }
        *outcomes.entry(format!("{point:?}")).or_insert(0) += 8;
    }
    // A sweep of delays from 0 to 4 ms, in a fixed pseudo-random order.
    let mut rng = Rng::new(0xace ^ tool.len() as u64);
    for _ in 0..40 {
        race(tool, Point::Delay(rng.below(4_000) as u64));
    }
    eprintln!(
        "races at {tool}: {outcomes:?} + 40 delays, {:.1?}",
        started.elapsed()
    );
}

#[test]
fn term_at_every_point_of_start_up_pgwrap() {
    races("pgwrap");
}

#[test]
fn term_at_every_point_of_start_up_graceful() {
    races("graceful");
}

#[test]
fn term_at_every_point_of_start_up_reap() {
    races("reap");
}

/// A signal sent to the tool's process group while COMMAND's process is
/// still in it (between the clone and COMMAND's own `setpgid`, a window
/// held open for half a second with strace's fault injection) is the
/// tool's to pass on or drop: COMMAND never gets a copy of its own. Here
/// pgwrap drops USR2 (not in its forward set), so COMMAND — which USR2
/// would kill, by its default action — must not see it.
#[test]
fn a_group_signal_while_command_is_being_spawned_is_the_tools_alone() {
    let test = "races::a_group_signal_while_command_is_being_spawned_is_the_tools_alone";
    if let Some(why) = crate::skip::needs_program("strace", "strace") {
        return crate::skip::skip(test, &why);
    }
    let dir = crate::kit::temp_dir("spawn-window");
    let trace = dir.join("trace");
    // -DDD: the process started is pgwrap itself (strace attaches from a
    // grandchild in a session of its own), so the group signal reaches
    // pgwrap and its child, never strace.
    let mut run = Run::new("strace")
        .args(["-DDD", "-f", "-o"])
        .arg(&trace)
        .args([
            "-e",
            "trace=setpgid",
            "-e",
            // 2 s: the test must find the child and signal the group
            // inside the delay, on a loaded machine too.
            "inject=setpgid:delay_enter=2000000",
        ])
        .arg(bin("pgwrap"))
        .args(["--forward", "USR1", "--", "sh", "-c", "sleep 1; echo done"])
        .spawn();
    let pgwrap = run.pid();
    let tracer = procfs::status_field(pgwrap, "TracerPid")
        .and_then(|t| t.parse::<i32>().ok())
        .filter(|&t| t > 0);
    let mut child = 0;
    // The child strace follows (-f), held in its delayed setpgid: not the
    // short-lived process strace's -DDD forks from pgwrap's pid before the
    // exec, which may still be pgwrap's child, exiting, at this moment. And
    // only once that pid runs pgwrap: before its exec it is strace, whom
    // the group's USR2 kills.
    let pgwrap_path = bin("pgwrap").display().to_string();
    procfs::wait_until("pgwrap's child, still in pgwrap's group", TIMEOUT, || {
        if procfs::cmdline(pgwrap).and_then(|c| c.first().cloned()) != Some(pgwrap_path.clone()) {
            return false;
        }
        child = procfs::children_of(pgwrap)
            .into_iter()
            .find(|&c| procfs::status_field(c, "TracerPid").is_some_and(|t| t != "0"))
            .unwrap_or(0);
        child > 0
    });
    assert_eq!(
        procfs::pgid(child),
        Some(run.pgid()),
        "COMMAND left pgwrap's group before the delayed setpgid"
    );
    run.signal_group(libc::SIGUSR2);
    let status = run.wait_exit(TIMEOUT);
    if let Some(t) = tracer.filter(|&t| procfs::alive(t)) {
        // SAFETY: plain syscall on strace's pid, read from TracerPid.
        unsafe { libc::kill(t, libc::SIGKILL) };
    }
    assert_eq!(
        (status.code(), status.signal()),
        (Some(0), None),
        "COMMAND got the group's USR2 that pgwrap drops: {status:?}"
    );
    // Written before COMMAND exited; the reader may not have passed it on.
    run.expect_line_with("COMMAND's \"done\"", TIMEOUT, |l| l == "done");
}
