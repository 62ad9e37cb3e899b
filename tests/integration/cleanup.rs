//! reap's cleanup: it starts only once COMMAND and every descendant are
//! gone, gets REAP_STATUS / REAP_SIGNAL / REAP_CAUSE, is not interrupted by
//! stop signals, is stopped by `--cleanup-timeout` (status 124), and decides
//! the exit status when COMMAND succeeded. `--exec-cleanup` runs it in place.

use crate::kit::{said, temp_dir, TIMEOUT};
use crate::procfs;
use crate::reap_kit::{back_of, field, reap, sigprobe, Guard};
use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;
use std::time::{Duration, Instant};

const SHOW_ENV: &str = "echo \"env status=$REAP_STATUS signal=$REAP_SIGNAL cause=$REAP_CAUSE\"";

/// Run `reap -c SHOW_ENV -- sh -c SCRIPT` and return the cleanup's line
/// and reap's status.
fn env_after(script: &str) -> (String, ExitStatus) {
    let mut run = reap(["-c", SHOW_ENV, "--", "sh", "-c", script]).spawn();
    let line = run.expect_line("env ", TIMEOUT);
    (line, run.wait_exit(TIMEOUT))
}

#[test]
fn env_for_exit_3() {
    let (line, status) = env_after("exit 3");
    assert_eq!(line, "env status=3 signal= cause=exit");
    assert_eq!(status.code(), Some(3));
}

#[test]
fn env_for_death_by_term() {
    let (line, status) = env_after("kill -TERM $$");
    assert_eq!(line, "env status=143 signal=TERM cause=signal");
    assert_eq!(status.signal(), Some(libc::SIGTERM));
}

#[test]
fn env_for_cancel() {
    // COMMAND dies of the TERM reap passed on.
    let mut run = reap(["-c", SHOW_ENV, "--", "sh", "-c", "echo up; exec sleep 100"]).spawn();
    run.expect_line("up", TIMEOUT);
    run.signal(libc::SIGTERM);
    assert_eq!(
        run.expect_line("env ", TIMEOUT),
        "env status=143 signal=TERM cause=cancel"
    );
    assert_eq!(run.wait_exit(TIMEOUT).signal(), Some(libc::SIGTERM));

    // COMMAND handles it and exits 0: still a cancel.
    let mut run = reap(["-c", SHOW_ENV, "--", &sigprobe()]).spawn();
    run.expect_ready(TIMEOUT);
    run.signal(libc::SIGINT);
    assert_eq!(
        run.expect_line("env ", TIMEOUT),
        "env status=0 signal= cause=cancel"
    );
    assert_eq!(run.wait_exit(TIMEOUT).code(), Some(0));
}

#[test]
fn env_for_127_and_126() {
    let mut run = reap(["-c", SHOW_ENV, "--", "/nonexistent/command"])
        .stderr_piped()
        .spawn();
    assert_eq!(
        run.expect_line("env ", TIMEOUT),
        "env status=127 signal= cause=exit"
    );
    assert_eq!(run.wait_exit(TIMEOUT).code(), Some(127));
    let err = run.stderr_all();
    assert!(
        said(err.trim_end(), "reap")
            .is_some_and(|m| m.starts_with("'/nonexistent/command': command not found")),
        "{err}"
    );

    let dir = temp_dir("reap-126");
    let file = dir.join("not-executable");
    std::fs::write(&file, "#!/bin/sh\n").unwrap();
    let mut run = reap(["-c", SHOW_ENV, "--"])
        .arg(&file)
        .stderr_piped()
        .spawn();
    assert_eq!(
        run.expect_line("env ", TIMEOUT),
        "env status=126 signal= cause=exit"
    );
    assert_eq!(run.wait_exit(TIMEOUT).code(), Some(126));
}

#[test]
fn exit_status_rule() {
    // (COMMAND, cleanup, expected code or signal)
    let cases: &[(&str, Option<&str>, Result<i32, i32>)] = &[
        ("exit 0", Some("exit 5"), Ok(5)),
        ("exit 3", Some("exit 5"), Ok(3)),
        ("exit 0", Some("exit 0"), Ok(0)),
        ("exit 3", Some("exit 0"), Ok(3)),
        ("exit 4", None, Ok(4)),
        ("kill -TERM $$", Some("exit 5"), Err(libc::SIGTERM)),
        ("exit 0", Some("kill -USR1 $$"), Err(libc::SIGUSR1)),
    ];
    for &(command, cleanup, expected) in cases {
        let mut args = Vec::new();
        if let Some(c) = cleanup {
            args.extend(["-c", c]);
        }
        args.extend(["--", "sh", "-c", command]);
        let mut run = reap(&args).spawn();
        let status = run.wait_exit(TIMEOUT);
        let got = match status.code() {
            Some(code) => Ok(code),
            None => Err(status.signal().unwrap_or(0)),
        };
        assert_eq!(
            got, expected,
            "COMMAND {command:?}, cleanup {cleanup:?}: {status:?}"
        );
    }
}

#[test]
fn cleanup_starts_only_after_every_leftover_is_gone() {
    // Leftovers: one lingers 500 ms after TERM, one ignores TERM (KILLed
    // after the grace), one escaped with setsid. The cleanup checks, from
    // inside, that none exists any more and that reap has no other child.
    let dir = temp_dir("reap-order");
    let pids = dir.join("pids");
    let script = format!(
        "\"$0\" --linger 500 & echo $! >> {p}; \"$0\" --ignore TERM & echo $! >> {p}; \
         setsid \"$0\" & echo $! >> {p}; read x",
        p = pids.display()
    );
    let cleanup = format!(
        "for p in $(cat {}); do [ -e /proc/$p ] && echo \"still there: $p\"; done; \
         echo \"siblings: $(cat /proc/$PPID/task/$PPID/children) self=$$\"",
        pids.display()
    );
    let mut run = reap([
        "--grace",
        "1s",
        "-c",
        &cleanup,
        "--",
        "sh",
        "-c",
        &script,
        &sigprobe(),
    ])
    .stdin_piped()
    .spawn();
    let readies = run.expect_readies(3, TIMEOUT);
    let mut guard = Guard::new();
    for r in &readies {
        guard.watch(r.pid);
    }
    run.write_stdin("go\n");
    let line = run.expect_line("siblings: ", Duration::from_secs(20));
    let me = field(&line, "self");
    let siblings: Vec<i32> = line["siblings: ".len()..line.find(" self=").unwrap()]
        .split_whitespace()
        .map(|s| s.parse().unwrap())
        .collect();
    assert_eq!(
        siblings,
        [me],
        "reap had other children when the cleanup started"
    );
    assert_eq!(run.wait_exit(TIMEOUT).code(), Some(0));
    let lines = run.lines_so_far();
    assert!(
        !lines.iter().any(|l| l.starts_with("still there")),
        "{lines:?}"
    );
}

#[test]
fn stop_signals_during_the_cleanup_do_not_interrupt_it() {
    let cleanup = format!("exec {} --sleep-ms 1500", sigprobe());
    let mut run = reap(["-c", &cleanup, "--", "true"]).spawn();
    let back = back_of(run.pid());
    let probe = run.expect_ready(TIMEOUT);
    assert_eq!(probe.ppid, back);
    assert_eq!(
        probe.pgid, probe.pid,
        "the cleanup runs in a group of its own"
    );
    // As a CI agent cancels: TERM to reap's whole group, then INT to the
    // front, then HUP straight to the subreaper.
    run.signal_group(libc::SIGTERM);
    run.signal(libc::SIGINT);
    // SAFETY: plain syscall; the back is alive (the cleanup is its child).
    unsafe { libc::kill(back, libc::SIGHUP) };
    run.expect_line(&format!("exit pid={}", probe.pid), TIMEOUT);
    assert_eq!(run.wait_exit(TIMEOUT).code(), Some(0));
    let lines = run.lines_so_far();
    assert!(!lines.iter().any(|l| l.starts_with("got ")), "{lines:?}");
}

#[test]
fn cleanup_timeout_stops_it_and_counts_as_124() {
    // A cleanup that ignores TERM is KILLed after the grace.
    let cleanup = format!("exec {} --ignore TERM", sigprobe());
    let t0 = Instant::now();
    let mut run = reap([
        "--cleanup-timeout",
        "0.5s",
        "--grace",
        "0.5s",
        "-c",
        &cleanup,
        "--",
        "true",
    ])
    .stderr_piped()
    .spawn();
    let probe = run.expect_ready(TIMEOUT);
    let mut guard = Guard::new();
    guard.watch(probe.pid);
    let status = run.wait_exit(TIMEOUT);
    assert!(t0.elapsed() >= Duration::from_secs(1), "{:?}", t0.elapsed());
    assert_eq!(status.code(), Some(124));
    assert!(guard.existing().is_empty());
    let err = run.stderr_all();
    assert!(err.contains("--cleanup-timeout"), "{err}");

    // One that exits on TERM still counts as timed out.
    let cleanup = format!("exec {}", sigprobe());
    let mut run = reap(["--cleanup-timeout", "0.3s", "-c", &cleanup, "--", "true"])
        .stderr_piped()
        .spawn();
    let probe = run.expect_ready(TIMEOUT);
    run.expect_line(&format!("got TERM pid={}", probe.pid), TIMEOUT);
    assert_eq!(run.wait_exit(TIMEOUT).code(), Some(124));
    let _ = run.stderr_all();
}

#[test]
fn cleanup_timeout_0_means_no_limit() {
    // As timeout(1) reads 0: the cleanup runs to its end and decides nothing
    // by a timeout.
    let mut run = reap([
        "--cleanup-timeout",
        "0",
        "-c",
        "echo cleanup-up; sleep 0.5; echo cleanup-done",
        "--",
        "true",
    ])
    .stderr_piped()
    .spawn();
    run.expect_line("cleanup-up", TIMEOUT);
    run.expect_line("cleanup-done", TIMEOUT);
    assert_eq!(run.wait_exit(TIMEOUT).code(), Some(0));
    let err = run.stderr_all();
    assert!(!err.contains("--cleanup-timeout"), "{err}");
}

#[test]
fn exec_cleanup_replaces_the_subreaper_and_decides_the_status() {
    let dir = temp_dir("reap-exec");
    let orphan_file = dir.join("orphan");
    let script = dir.join("cleanup.sh");
    std::fs::write(
        &script,
        format!(
            "echo \"cleanup pid=$$\"\n\
             sh -c 'sleep 5 & echo $! > \"$0\"' {o}\n\
             o=$(cat {o})\n\
             i=0\n\
             while [ $i -lt 200 ]; do\n\
               p=$(cut -d' ' -f4 /proc/$o/stat 2>/dev/null)\n\
               [ \"$p\" = \"$$\" ] && break\n\
               sleep 0.05; i=$((i+1))\n\
             done\n\
             echo \"orphan parent=$p\"\n\
             kill $o\n\
             exit $CODE\n",
            o = orphan_file.display()
        ),
    )
    .unwrap();
    let cleanup = format!(". {}", script.display());
    for (command, code) in [("exit 0", 7), ("exit 3", 0)] {
        let mut run = reap(["--exec-cleanup", "-c", &cleanup, "--", "sh", "-c"])
            .arg(format!("echo back=$PPID; {command}"))
            .env("CODE", code.to_string())
            .spawn();
        let back = field(&run.expect_line("back=", TIMEOUT), "back");
        let mut guard = Guard::new();
        guard.watch(back);
        let line = run.expect_line("cleanup pid=", TIMEOUT);
        assert_eq!(
            field(&line, "pid"),
            back,
            "the cleanup runs as the subreaper"
        );
        let line = run.expect_line("orphan parent=", TIMEOUT);
        if let Ok(orphan) = std::fs::read_to_string(&orphan_file) {
            if let Ok(pid) = orphan.trim().parse() {
                guard.watch(pid);
            }
        }
        assert_eq!(
            field(&line, "parent"),
            back,
            "still the subreaper after exec"
        );
        let status = run.wait_exit(TIMEOUT);
        assert_eq!(
            status.code(),
            Some(code),
            "{command}: the cleanup's status is final"
        );
        procfs::wait_until("the exec'd cleanup is gone", TIMEOUT, || {
            !procfs::alive(back)
        });
    }
}

/// `--cleanup-exec PROG [ARG]... ;`: the cleanup as an argument vector, run
/// without a shell (images with no /bin/sh), under the same rules as
/// `--cleanup`: environment, own process group, `--cleanup-timeout`,
/// `--exec-cleanup`.
#[test]
fn cleanup_exec_runs_an_argument_vector_under_the_same_rules() {
    // The arguments reach PROG as given: no shell expands or splits them.
    let mut run = reap([
        "--cleanup-exec",
        "printf",
        "arg=%s\\n",
        "a b",
        "$HOME",
        "*",
        ";",
        "--",
        "true",
    ])
    .stderr_piped()
    .spawn();
    let lines = run.expect_eof(TIMEOUT);
    let status = run.wait_exit(TIMEOUT);
    let err = run.stderr_all();
    assert_eq!(
        lines,
        ["arg=a b", "arg=$HOME", "arg=*"],
        "--cleanup-exec: {status:?} {err}"
    );
    assert_eq!(status.code(), Some(0));

    // REAP_STATUS / REAP_SIGNAL / REAP_CAUSE, as for --cleanup.
    let mut run = reap(["--cleanup-exec", "env", ";", "--", "sh", "-c", "exit 3"]).spawn();
    let lines = run.expect_eof(TIMEOUT);
    for var in ["REAP_STATUS=3", "REAP_SIGNAL=", "REAP_CAUSE=exit"] {
        assert!(lines.iter().any(|l| l == var), "no {var} in {lines:?}");
    }
    assert_eq!(run.wait_exit(TIMEOUT).code(), Some(3));

    // Its own process group, and stop signals to reap do not reach it.
    let mut run = reap(["--cleanup-exec", &sigprobe(), "--sleep-ms", "300", ";"])
        .args(["--", "true"])
        .spawn();
    let probe = run.expect_ready(TIMEOUT);
    assert_eq!(probe.pgid, probe.pid, "the cleanup leads its own group");
    run.signal(libc::SIGTERM);
    run.expect_line(&format!("exit pid={}", probe.pid), TIMEOUT);
    assert_eq!(run.wait_exit(TIMEOUT).code(), Some(0));
    let lines = run.lines_so_far();
    assert!(!lines.iter().any(|l| l.starts_with("got ")), "{lines:?}");

    // --cleanup-timeout stops it: status 124.
    let mut run = reap(["--cleanup-timeout", "0.3s", "--cleanup-exec", &sigprobe()])
        .args([";", "--", "true"])
        .stderr_piped()
        .spawn();
    let probe = run.expect_ready(TIMEOUT);
    run.expect_line(&format!("got TERM pid={}", probe.pid), TIMEOUT);
    assert_eq!(run.wait_exit(TIMEOUT).code(), Some(124));
    let _ = run.stderr_all();

    // --exec-cleanup: it replaces the subreaper; its status is final.
    let mut run = reap(["--exec-cleanup", "--cleanup-exec", "sh", "-c"])
        .args(["echo cleanup pid=$$; exit 7", ";", "--", "sh", "-c"])
        .arg("echo back=$PPID")
        .spawn();
    let back = field(&run.expect_line("back=", TIMEOUT), "back");
    let mut guard = Guard::new();
    guard.watch(back);
    let line = run.expect_line("cleanup pid=", TIMEOUT);
    assert_eq!(
        field(&line, "pid"),
        back,
        "the cleanup runs as the subreaper"
    );
    assert_eq!(run.wait_exit(TIMEOUT).code(), Some(7));
}

/// A cleanup that fails or is killed says so on stderr, one line, even
/// without -v (a CI log must not show a job that succeeded and a status of
/// 3 with no word why); a cleanup that succeeds says nothing.
#[test]
fn a_failing_cleanup_gets_one_line_without_verbose() {
    let mut run = reap(["--cleanup", "exit 3", "--", "true"])
        .stderr_piped()
        .spawn();
    assert_eq!(run.wait_exit(TIMEOUT).code(), Some(3));
    let err = run.stderr_all();
    assert_eq!(err.lines().count(), 1, "{err:?}");
    assert!(
        err.starts_with("reap") && err.contains(": cleanup exited with 3"),
        "{err:?}"
    );

    let mut run = reap(["--cleanup", "kill -TERM $$", "--", "true"])
        .stderr_piped()
        .spawn();
    assert_eq!(run.wait_exit(TIMEOUT).signal(), Some(libc::SIGTERM));
    let err = run.stderr_all();
    assert_eq!(err.lines().count(), 1, "{err:?}");
    assert!(err.contains(": cleanup was killed by TERM"), "{err:?}");

    // Also when COMMAND failed first (reap then exits with COMMAND's).
    let mut run = reap(["--cleanup", "exit 4", "--", "sh", "-c", "exit 2"])
        .stderr_piped()
        .spawn();
    assert_eq!(run.wait_exit(TIMEOUT).code(), Some(2));
    let err = run.stderr_all();
    assert!(err.contains(": cleanup exited with 4"), "{err:?}");

    let mut run = reap(["--cleanup", "true", "--", "true"])
        .stderr_piped()
        .spawn();
    assert_eq!(run.wait_exit(TIMEOUT).code(), Some(0));
    assert_eq!(run.stderr_all(), "");
}
