//! The terminal inside a PID namespace whose terminal's foreground group
//! lies outside it (`unshare --pid --fork`): there `tcgetpgrp()` and
//! `getpgrp()` both read 0. Hand-over works as outside, and a background
//! job still never takes the terminal (two zeros do not prove the groups
//! are the same).
//!
//! `script(1)` makes the terminal; what is typed comes from a pipe into it.

use crate::kit::{bin, Run};
use std::time::Duration;

fn missing() -> Option<String> {
    crate::skip::needs_root()
        .or_else(|| crate::skip::needs_program("unshare", "util-linux"))
        .or_else(|| crate::skip::needs_program("script", "bsdutils"))
        .or_else(|| crate::skip::needs_program("perl", "perl"))
}

/// `typed` goes into a new terminal after a second, where `inner` runs
/// (`script -qec INNER`); every line that came out of it, `\r` taken out.
fn on_a_terminal(inner: &str, typed: &str) -> Vec<String> {
    let line = format!(
        "(sleep 1; printf '{typed}'; sleep 3) | timeout 12 script -qec \"{inner}\" /dev/null"
    );
    let mut run = Run::new("sh").args(["-c", &line]).spawn();
    run.wait_exit(Duration::from_secs(60));
    run.lines_so_far()
        .iter()
        .map(|l| l.replace('\r', ""))
        .collect()
}

/// `unshare --pid --fork --mount-proc TOOL MODE -- sh` with `echo hi`,
/// `exit 0` typed: COMMAND (the shell) has the terminal and reads them.
#[test]
fn hand_over_inside_a_pid_namespace() {
    if let Some(why) = missing() {
        return crate::skip::skip(
            "terminal::namespace::hand_over_inside_a_pid_namespace",
            &why,
        );
    }
    let mut failed = Vec::new();
    for (tool, mode) in [
        ("pgwrap", ""),
        ("pgwrap", "--foreground"),
        ("reap", ""),
        ("reap", "--foreground"),
        ("graceful", "--foreground"),
    ] {
        let inner = format!(
            "unshare --pid --fork --mount-proc {} {mode} -- sh",
            bin(tool).display()
        );
        let out = on_a_terminal(&inner, "echo hi-$((6*7))\\nexit 0\\n");
        if !out.iter().any(|l| l.trim() == "hi-42") {
            failed.push(format!("{tool} {mode}: {out:?}"));
        }
    }
    assert!(
        failed.is_empty(),
        "COMMAND did not read:\n{}",
        failed.join("\n")
    );
}

/// The same job in a background group (its own, not the terminal's
/// foreground one: both outside the namespace, both read 0): it does not
/// take the terminal, so the shell that holds it still reads what is
/// typed.
#[test]
fn background_job_inside_a_pid_namespace_leaves_the_terminal() {
    if let Some(why) = missing() {
        return crate::skip::skip(
            "terminal::namespace::background_job_inside_a_pid_namespace_leaves_the_terminal",
            &why,
        );
    }
    let mut failed = Vec::new();
    for (tool, mode) in [
        ("pgwrap", ""),
        ("pgwrap", "--foreground"),
        ("reap", ""),
        ("reap", "--foreground"),
        ("graceful", "--foreground"),
    ] {
        // perl puts unshare in a group of its own, in the background; the
        // terminal on its stdin (sh gives & /dev/null).
        let inner = format!(
            "perl -e 'setpgrp(0,0); exec @ARGV' unshare --pid --fork --mount-proc {} {mode} \
             -- sleep 3 < /dev/tty & sleep 2; read x; echo shell-read=\\$x; wait",
            bin(tool).display()
        );
        let out = on_a_terminal(&inner, "typed\\n");
        if !out.iter().any(|l| l.trim() == "shell-read=typed") {
            failed.push(format!("{tool} {mode}: {out:?}"));
        }
    }
    assert!(
        failed.is_empty(),
        "the terminal was taken:\n{}",
        failed.join("\n")
    );
}
