//! What users of tini and dumb-init reach for, in reap: dumb-init's
//! `--rewrite` (`--map FROM:TO`) and `--single-child` (`--to child`), and
//! tini's `-e CODE` (`--success-status N`, repeatable; `REAP_STATUS`
//! stays the real status).

use crate::kit::{bin, Run, TIMEOUT};

#[test]
fn reap_maps_a_signal_as_pgwrap_does() {
    let mut run = Run::new(bin("reap"))
        .args(["--map", "USR1:USR2", "--", "sh", "-c"])
        .arg("trap 'echo got USR1' USR1; trap 'echo got USR2; exit 0' USR2; echo up; while :; do sleep 0.1; done")
        .spawn();
    run.expect_line("up", TIMEOUT);
    run.signal(libc::SIGUSR1);
    run.expect_line("got USR2", TIMEOUT);
    assert_eq!(run.wait_exit(TIMEOUT).code(), Some(0));
    assert!(
        !run.lines_so_far().iter().any(|l| l == "got USR1"),
        "{:?}",
        run.lines_so_far()
    );
}

/// `--to child`: COMMAND alone gets it, not the rest of its group. The
/// child, in COMMAND's group, has both USR1 (if it was sent to the group)
/// and USR2 pending when it runs its handlers, lower number first.
#[test]
fn reap_to_child_signals_command_alone() {
    let child = "trap 'echo child got USR1' USR1; trap 'echo child got USR2; exit 0' USR2; \
                 echo child up; while :; do sleep 0.1; done";
    let script = format!(
        "sh -c \"{child}\" & c=$!; trap 'echo parent got USR1; kill -USR2 $c' USR1; \
         echo parent up; wait; wait"
    );
    let mut run = Run::new(bin("reap"))
        .args(["--to", "child", "--", "sh", "-c", &script])
        .spawn();
    // Both traps are set before the signal is sent.
    run.expect_line("child up", TIMEOUT);
    run.expect_line("parent up", TIMEOUT);
    run.signal(libc::SIGUSR1);
    run.expect_line("parent got USR1", TIMEOUT);
    run.expect_line("child got USR2", TIMEOUT);
    assert_eq!(run.wait_exit(TIMEOUT).code(), Some(0));
    let lines = run.lines_so_far();
    assert!(!lines.iter().any(|l| l == "child got USR1"), "{lines:?}");
}

#[test]
fn reap_success_status_counts_as_0_and_reap_status_stays_real() {
    let show = "echo cleanup status=$REAP_STATUS";
    for (opts, script, want, real) in [
        (&["--success-status", "143"][..], "kill -TERM $$", 0, "143"),
        (
            &["--success-status", "3", "--success-status", "143"],
            "exit 3",
            0,
            "3",
        ),
        (&["--success-status", "3"], "exit 4", 4, "4"),
    ] {
        let mut run = Run::new(bin("reap"))
            .args(opts)
            .args(["-c", show, "--", "sh", "-c", script])
            .spawn();
        let line = run.expect_line("cleanup status=", TIMEOUT);
        assert_eq!(line, format!("cleanup status={real}"), "{opts:?} {script}");
        let status = run.wait_exit(TIMEOUT);
        assert_eq!(status.code(), Some(want), "{opts:?} {script}: {status:?}");
    }
    // A cleanup that fails after a COMMAND that counts as a success: the
    // cleanup's status, as after a success.
    let mut run = Run::new(bin("reap"))
        .args([
            "--success-status",
            "3",
            "-c",
            "exit 5",
            "--",
            "sh",
            "-c",
            "exit 3",
        ])
        .stderr_piped()
        .spawn();
    assert_eq!(run.wait_exit(TIMEOUT).code(), Some(5));
    let _ = run.stderr_all();
}

#[test]
fn reap_refuses_bad_peer_options() {
    crate::command_line::assert_rejected(
        "reap",
        &[
            &["--success-status", "256"],
            &["--success-status", "-1"],
            &["--success-status", "x"],
            &["--to", "sideways"],
            &["--to", "child", "--to", "group"],
            &["--map", "USR1"],
            &["--map", "KILL:TERM"],
            &["--map", "USR1:USR2", "--map", "USR1:HUP"],
        ],
    );
}
