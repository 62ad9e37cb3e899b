//! reap's gate (guardian.rs): while COMMAND runs, the front sends a signal
//! to COMMAND's group itself, so the signal takes one hop as it does
//! through pgwrap, and the back still acts on it (the grace, the cause).
//! Once COMMAND has exited the gate is shut: a stop request then goes to
//! the leftovers from the back, as the sweep does.

use crate::grace::{Death, SLACK};
use crate::kit::TIMEOUT;
use crate::reap_kit::{back_of, field, reap, sigprobe, Guard};
use std::time::{Duration, Instant};

/// Whether this kernel signals a process group by pidfd
/// (`PIDFD_SIGNAL_PROCESS_GROUP`, Linux 6.9): signal 0 sends nothing, and
/// the kernel answers EINVAL where it does not know the flag (ESRCH where
/// it does, as the test is no group's leader).
fn kernel_signals_groups_by_pidfd() -> bool {
    // SAFETY: pidfd_open of our own pid, no flags; a new fd or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, libc::getpid(), 0) } as i32;
    assert!(fd >= 0, "pidfd_open: {}", std::io::Error::last_os_error());
    // SAFETY: a valid pidfd, signal 0 (none is sent), a null siginfo.
    let r = unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            fd,
            0,
            std::ptr::null::<libc::siginfo_t>(),
            1u32 << 2,
        )
    };
    let err = std::io::Error::last_os_error();
    // SAFETY: the fd opened above, closed once.
    unsafe { libc::close(fd) };
    r == 0 || err.raw_os_error() == Some(libc::ESRCH)
}

/// Who sends what the front passes on while COMMAND runs.
fn sender(front: i32, back: i32) -> i32 {
    if kernel_signals_groups_by_pidfd() {
        front
    } else {
        back
    }
}

#[test]
fn while_command_runs_the_front_signals_its_whole_group_itself() {
    let mut run = reap(["--", &sigprobe(), "--fork", "1"])
        .stderr_piped()
        .spawn();
    let readies = run.expect_readies(2, TIMEOUT);
    let front = run.pid();
    let from = sender(front, back_of(front));
    assert!(
        readies.iter().all(|r| r.pgid == readies[0].pgid),
        "{readies:?}"
    );
    run.signal(libc::SIGUSR1);
    for r in &readies {
        run.expect_line(&format!("got USR1 pid={} from={from}", r.pid), TIMEOUT);
    }
    run.signal(libc::SIGTERM);
    for r in &readies {
        run.expect_line(&format!("got TERM pid={} from={from}", r.pid), TIMEOUT);
    }
    assert_eq!(run.wait_exit(TIMEOUT).code(), Some(0));
}

#[test]
fn a_stop_request_the_front_sent_still_starts_the_grace_and_counts_as_cancel() {
    let grace = Duration::from_millis(1500);
    let show = "echo \"env status=$REAP_STATUS signal=$REAP_SIGNAL cause=$REAP_CAUSE\"";
    let mut run = reap([
        "--grace",
        "1500ms",
        "-c",
        show,
        "--",
        &sigprobe(),
        "--exit-on",
        "none",
    ])
    .stderr_piped()
    .spawn();
    let probe = run.expect_ready(TIMEOUT);
    let front = run.pid();
    let from = sender(front, back_of(front));
    let death = Death::watch(probe.pid);
    let sent = Instant::now();
    run.signal(libc::SIGTERM);
    run.expect_line(&format!("got TERM pid={} from={from}", probe.pid), TIMEOUT);
    let dead = death.wait(grace + SLACK);
    assert!(
        dead >= sent + grace,
        "killed {:?} before the grace was over",
        sent + grace - dead
    );
    assert_eq!(
        run.expect_line("env ", TIMEOUT),
        "env status=137 signal=KILL cause=cancel"
    );
    run.wait_exit(TIMEOUT);
}

#[test]
fn once_command_has_exited_a_stop_request_reaches_the_leftovers_from_the_back() {
    // A leftover in COMMAND's own group: were the gate still open, the
    // front would reach it through the group.
    let script = "\"$0\" & echo left=$!; exit 0";
    let mut run = reap(["--keep-orphans", "--", "sh", "-c", script, &sigprobe()])
        .stderr_piped()
        .spawn();
    let back = back_of(run.pid());
    let left = field(&run.expect_line("left=", TIMEOUT), "left");
    let ready = run.expect_ready(TIMEOUT);
    assert_eq!(ready.pid, left);
    let mut guard = Guard::new();
    guard.watch(left);
    // COMMAND (sh) has exited and been reaped: the back waits for `left`.
    crate::procfs::wait_until("COMMAND is reaped", TIMEOUT, || {
        crate::procfs::children_of(back) == [left]
    });
    run.signal(libc::SIGTERM);
    run.expect_line(&format!("got TERM pid={left} from={back}"), TIMEOUT);
    assert_eq!(run.wait_exit(TIMEOUT).code(), Some(0));
    assert!(guard.existing().is_empty(), "left: {:?}", guard.existing());
}
