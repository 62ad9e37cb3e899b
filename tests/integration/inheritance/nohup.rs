//! Inheritance, the nohup rule: a signal the caller left ignored (`nohup`'s
//! HUP) stays ignored by the tool too — neither passed on nor a stop trigger
//! — unless an option names it.
//!
//! The caller here is a Perl one-liner that ignores HUP and then execs the
//! tool, as `nohup` does. COMMAND is Perl too, since a shell cannot trap a
//! signal that was ignored when it started: it catches HUP, says so and
//! exits 5; left alone it exits 0.

use crate::kit::{bin, Run, TIMEOUT};
use std::time::Duration;

/// COMMAND: "up" once ready; exits 5 on HUP, else 0 after a while.
const COMMAND: &str = r#"$|=1; $SIG{HUP}=sub{print "got-hup\n"; exit 5}; print "up\n"; select(undef,undef,undef,1.5); exit 0"#;

fn under_nohup(tool: &str, opts: &[&str]) -> (Option<i32>, Vec<String>) {
    let mut run = Run::new("perl")
        .args(["-e", "$SIG{HUP}='IGNORE'; exec @ARGV or die", "--"])
        .arg(bin(tool))
        .args(opts)
        .args(["--", "perl", "-e", COMMAND])
        .spawn();
    run.expect_line("up", TIMEOUT);
    run.signal(libc::SIGHUP);
    let status = run.wait_exit(TIMEOUT + Duration::from_secs(2));
    // Every line read, not only those read by the time of the exit.
    run.expect_eof(TIMEOUT);
    (status.code(), run.lines_so_far())
}

#[test]
fn nohup_graceful_neither_stops_nor_passes_on_an_ignored_hup() {
    let (code, lines) = under_nohup("graceful", &[]);
    assert_eq!(code, Some(0), "{lines:?}");
    assert!(!lines.iter().any(|l| l == "got-hup"), "{lines:?}");
}

#[test]
fn nohup_reap_neither_cancels_nor_passes_on_an_ignored_hup() {
    let (code, lines) = under_nohup("reap", &[]);
    assert_eq!(code, Some(0), "{lines:?}");
    assert!(!lines.iter().any(|l| l == "got-hup"), "{lines:?}");
}

#[test]
fn nohup_pgwrap_does_not_pass_on_an_ignored_hup() {
    let (code, lines) = under_nohup("pgwrap", &[]);
    assert_eq!(code, Some(0), "{lines:?}");
    assert!(!lines.iter().any(|l| l == "got-hup"), "{lines:?}");
}

#[test]
fn nohup_an_option_that_names_hup_passes_it_on() {
    for (tool, opts) in [
        ("pgwrap", &["--forward", "HUP"][..]),
        ("reap", &["--forward", "HUP,TERM"][..]),
        ("graceful", &["--on", "HUP"][..]),
    ] {
        let (code, lines) = under_nohup(tool, opts);
        assert_eq!(code, Some(5), "{tool} {opts:?}: {lines:?}");
        assert!(lines.iter().any(|l| l == "got-hup"), "{tool}: {lines:?}");
    }
}

/// Once COMMAND has exited, `--keep-orphans` waits for the leftovers; a
/// stop request then stops them and makes the cause `cancel`. An ignored
/// HUP is no stop request then either: the leftover is left alone and the
/// cleanup's cause stays `exit`.
#[test]
fn nohup_reap_keep_orphans_does_not_stop_the_leftovers_on_an_ignored_hup() {
    let mut run = Run::new("perl")
        .args(["-e", "$SIG{HUP}='IGNORE'; exec @ARGV or die", "--"])
        .arg(bin("reap"))
        .args(["-v", "--keep-orphans", "--grace", "5s"])
        .args(["-c", "echo cause=$REAP_CAUSE"])
        .args([
            "--",
            "sh",
            "-c",
            "setsid \"$0\" --sleep-ms 1500 & read x; exit 0",
        ])
        .arg(crate::reap_kit::sigprobe())
        .stdin_piped()
        .stderr_piped()
        .spawn();
    let leftover = run.expect_ready(TIMEOUT);
    run.write_stdin("go\n");
    crate::procfs::wait_until("reap waits for the leftover", TIMEOUT, || {
        run.stderr_so_far().contains("--keep-orphans")
    });
    run.signal(libc::SIGHUP);
    let status = run.wait_exit(TIMEOUT);
    run.expect_eof(TIMEOUT);
    let lines = run.lines_so_far();
    let stderr = run.stderr_so_far();
    assert!(
        !lines.iter().any(|l| l.starts_with("got ")),
        "the leftover {} got a signal: {lines:?}\n{stderr}",
        leftover.pid
    );
    assert!(
        lines
            .iter()
            .any(|l| l == &format!("exit pid={}", leftover.pid)),
        "the leftover did not end on its own: {lines:?}"
    );
    assert!(
        lines.iter().any(|l| l == "cause=exit"),
        "an ignored HUP made a cancel: {lines:?}\n{stderr}"
    );
    assert_eq!(status.code(), Some(0), "{lines:?}\n{stderr}");
}
