//! Exit status, as `timeout(1)` and `env(1)` report it: COMMAND's code passed
//! through, COMMAND's death signal re-raised, 125/126/127 for the tool's own
//! failures.

/// A re-raised core-dumping signal runs no core handler for the tool.
mod core_dump;

use crate::kit::{bin, Run, TIMEOUT};
use std::os::unix::process::ExitStatusExt;

fn pgwrap_sh(script: &str) -> std::process::ExitStatus {
    let mut run = Run::new(bin("pgwrap"))
        .args(["--", "sh", "-c", script])
        .spawn();
    run.wait_exit(TIMEOUT)
}

#[test]
fn exit_codes_pass_through() {
    for code in [0, 3, 255] {
        let status = pgwrap_sh(&format!("exit {code}"));
        assert_eq!(status.code(), Some(code), "exit {code}: {status:?}");
    }
}

#[test]
fn death_by_signal_is_reraised() {
    for (name, sig) in [
        ("TERM", libc::SIGTERM),
        ("KILL", libc::SIGKILL),
        ("SEGV", libc::SIGSEGV),
    ] {
        let status = pgwrap_sh(&format!("kill -{name} $$"));
        assert_eq!(status.signal(), Some(sig), "{name}: {status:?}");
        assert!(
            !status.core_dumped(),
            "{name}: the tool must not dump core itself"
        );
    }
}

#[test]
fn not_found_is_127_and_not_executable_is_126() {
    let dir = crate::kit::temp_dir("exit126");
    let script = dir.join("not-executable");
    std::fs::write(&script, "#!/bin/sh\nexit 0\n").unwrap();
    for (args, code, needle) in [
        (vec!["no-such-command-anywhere"], 127, "not found"),
        (vec!["/etc"], 126, "cannot execute"),
        (vec![script.to_str().unwrap()], 126, "cannot execute"),
    ] {
        let mut run = Run::new(bin("pgwrap"))
            .arg("--")
            .args(&args)
            .stderr_piped()
            .spawn();
        let status = run.wait_exit(TIMEOUT);
        let err = run.stderr_all();
        assert_eq!(status.code(), Some(code), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: one line, got {err:?}");
        assert!(
            err.starts_with("pgwrap: ") && err.contains(needle),
            "{args:?}: {err}"
        );
    }
}
