//! reap as PID 1 of a PID namespace (`unshare --pid --fork`), as in a
//! container: orphans of the whole namespace are reaped, a TERM (which the
//! kernel would otherwise ignore for PID 1) is passed on, and a death by
//! TERM is reported as 128+15.

use crate::kit::{bin, slowed, Run, TIMEOUT};
use crate::procfs;
use crate::reap_kit::zombies_of;
use std::time::Duration;

/// reap's pid (in our namespace): unshare's only child.
fn inner_init(unshare: i32) -> i32 {
    let mut pid = 0;
    procfs::wait_until("unshare's child exists", TIMEOUT, || {
        pid = procfs::children_of(unshare).first().copied().unwrap_or(0);
        pid > 0
            && procfs::cmdline(pid).is_some_and(|c| c.first().is_some_and(|a| a.ends_with("reap")))
    });
    pid
}

#[test]
fn as_pid1_reaps_orphans_and_exits_on_term_with_143() {
    // The orphans sleep until the test kills them (by pid) once all 20 are
    // reap's: a handshake, where orphans that end by themselves may all be
    // gone before the test looks, on a slow machine.
    let script =
        "i=0; while [ $i -lt 20 ]; do (sleep 999 &); i=$((i+1)); done; echo made; exec sleep 1000";
    let mut run = Run::new("unshare")
        .args(["--pid", "--fork", "--mount-proc"])
        .arg(bin("reap"))
        .args(["--", "sh", "-c", script])
        .spawn();
    let reap = inner_init(run.pid());
    run.expect_line("made", slowed(TIMEOUT));
    let orphans = || -> Vec<i32> {
        procfs::children_of(reap)
            .into_iter()
            .filter(|&p| procfs::cmdline(p).is_some_and(|c| c == ["sleep", "999"]))
            .collect()
    };
    procfs::wait_until("orphans are re-parented to PID 1", slowed(TIMEOUT), || {
        orphans().len() == 20
    });
    for pid in orphans() {
        // SAFETY: plain syscall; `pid` is reap's unreaped child (pinned).
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
    let deadline = std::time::Instant::now() + slowed(Duration::from_secs(20));
    while procfs::children_of(reap).len() != 1 || !zombies_of(reap).is_empty() {
        if std::time::Instant::now() > deadline {
            let left: Vec<_> = procfs::children_of(reap)
                .into_iter()
                .map(|p| (p, procfs::state(p), procfs::cmdline(p)))
                .collect();
            panic!("orphans not reaped in time: children of reap {left:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    // SAFETY: plain syscall; reap is unshare's unreaped child (pinned).
    unsafe { libc::kill(reap, libc::SIGTERM) };
    assert_eq!(run.wait_exit(TIMEOUT).code(), Some(128 + libc::SIGTERM));
}

#[test]
fn as_pid1_without_its_own_proc_sweeps_with_kill_minus_one() {
    // Without --mount-proc, /proc shows the parent namespace: reap must not
    // use its pids, and falls back to kill(-1), which as PID 1 reaches
    // exactly its namespace.
    let mut run = Run::new("unshare")
        .args(["--pid", "--fork"])
        .arg(bin("reap"))
        .args(["-c", "echo cleanup ran", "--", "sh", "-c"])
        .arg("setsid sleep 1000 & sleep 1000 & echo made")
        .stderr_piped()
        .spawn();
    run.expect_line("made", TIMEOUT);
    run.expect_line("cleanup ran", TIMEOUT);
    assert_eq!(run.wait_exit(TIMEOUT).code(), Some(0));
    let err = run.stderr_all();
    assert!(err.contains("/proc is not usable"), "{err}");
}
