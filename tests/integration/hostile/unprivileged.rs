//! Not root: each tool works as an unprivileged user (`setpriv` to
//! `nobody`): forwarding, the grace ladder, the subreaper, the sweep of an
//! escapee through `/proc` and pidfds, and the cleanup.
//!
//! No feature of the tools needs privilege: a child subreaper
//! (`PR_SET_CHILD_SUBREAPER`), new groups and sessions, pidfds, signals to
//! one's own processes and `/proc` of one's own processes are all open to
//! any user; PID 1 needs a PID namespace, which the caller (a container
//! runtime, `unshare`) creates, not the tool. What privilege does change,
//! RLIMIT_NPROC (which root ignores), is tested in `faults`. A descendant
//! that became another user (a setuid program) cannot be signalled by an
//! unprivileged reap: it says so (`unable to send TERM to pid N: Operation
//! not permitted`) and waits for it rather than leave it behind.

use crate::kit::{bin, said, Run, RunBuilder, TIMEOUT};
use crate::procfs;
use crate::skip;
use std::os::unix::process::ExitStatusExt;
use std::time::{Duration, Instant};

/// `setpriv` to nobody, then `tool ARGS -- sigprobe PROBE...`; `None` (the
/// test is skipped) where that cannot run here.
fn as_nobody(test: &str, tool: &str, args: &[&str], probe: &[&str]) -> Option<RunBuilder> {
    if let Some(why) = skip::needs_root().or_else(|| skip::needs_program("setpriv", "util-linux")) {
        skip::skip(test, &why);
        return None;
    }
    let setpriv = ["--reuid=nobody", "--regid=nogroup", "--clear-groups", "--"];
    // The binaries must be reachable by nobody (not under a private home).
    let reachable = std::process::Command::new("setpriv")
        .args(setpriv)
        .args(["test", "-x"])
        .arg(bin("sigprobe"))
        .status()
        .is_ok_and(|s| s.success());
    if !reachable {
        skip::skip(
            test,
            "the binaries are not executable by nobody (a private directory?)",
        );
        return None;
    }
    Some(
        Run::new("setpriv")
            .args(setpriv)
            .arg(bin(tool))
            .args(args)
            .arg("--")
            .arg(bin("sigprobe"))
            .args(probe)
            .stderr_piped(),
    )
}

fn uid(pid: i32) -> Option<String> {
    procfs::status_field(pid, "Uid")?
        .split_whitespace()
        .next()
        .map(str::to_string)
}

fn nobody() -> String {
    let out = std::process::Command::new("id")
        .args(["-u", "nobody"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

#[test]
fn pgwrap_as_nobody_forwards_and_exits_with_command() {
    let Some(builder) = as_nobody(
        "pgwrap_as_nobody_forwards_and_exits_with_command",
        "pgwrap",
        &[],
        &[],
    ) else {
        return;
    };
    let mut run = builder.spawn();
    let probe = run.expect_ready(TIMEOUT);
    assert_eq!(uid(run.pid()), Some(nobody()));
    assert_eq!(uid(probe.pid), Some(nobody()));
    run.signal(libc::SIGTERM);
    run.expect_line(
        &format!("got TERM pid={} from={}", probe.pid, run.pid()),
        TIMEOUT,
    );
    assert_eq!(run.wait_exit(TIMEOUT).code(), Some(0));
    assert_eq!(run.stderr_all(), "");
}

#[test]
fn graceful_as_nobody_kills_the_group_after_the_grace() {
    let Some(builder) = as_nobody(
        "graceful_as_nobody_kills_the_group_after_the_grace",
        "graceful",
        &["--grace", "300ms"],
        &["--fork", "1", "--exit-on", "none"],
    ) else {
        return;
    };
    let mut run = builder.spawn();
    let readies = run.expect_readies(2, TIMEOUT);
    let started = Instant::now();
    run.signal(libc::SIGTERM);
    let status = run.wait_exit(TIMEOUT);
    assert!(started.elapsed() >= Duration::from_millis(300));
    assert_eq!(
        status.signal(),
        Some(libc::SIGKILL),
        "COMMAND was killed by KILL"
    );
    for r in readies {
        assert!(run
            .lines_so_far()
            .contains(&format!("got TERM pid={} from={}", r.pid, run.pid())));
        procfs::wait_until("the group is gone", TIMEOUT, || !procfs::alive(r.pid));
    }
    // Nothing on stderr but the survivors, named at the end of the grace
    // (the probes ignore TERM here), one line each.
    let err = run.stderr_all();
    assert_eq!(err.lines().count(), 2, "{err}");
    assert!(
        err.lines().all(
            |l| said(l, "graceful").is_some_and(|m| m.starts_with("pid "))
                && l.contains("after the grace: it")
        ),
        "{err}"
    );
}

#[test]
fn reap_as_nobody_sweeps_an_escapee_and_runs_the_cleanup() {
    let Some(builder) = as_nobody(
        "reap_as_nobody_sweeps_an_escapee_and_runs_the_cleanup",
        "reap",
        &["--grace", "5s", "--cleanup", "echo cleanup ran as $(id -u)"],
        &["--escape", "1"],
    ) else {
        return;
    };
    let mut run = builder.spawn();
    let readies = run.expect_readies(2, TIMEOUT);
    let escapee = readies.iter().find(|r| r.role == "escapee").unwrap().pid;
    assert_eq!(uid(escapee), Some(nobody()));
    run.signal(libc::SIGTERM);
    // The escapee (another session) gets the sweep's TERM and exits on it.
    run.expect_line(&format!("got TERM pid={escapee}"), TIMEOUT);
    run.expect_line(&format!("cleanup ran as {}", nobody()), TIMEOUT);
    assert_eq!(run.wait_exit(TIMEOUT).code(), Some(0));
    assert!(!procfs::alive(escapee));
    assert_eq!(run.stderr_all(), "");
}
