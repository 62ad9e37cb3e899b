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
            crate::kit::said(err.trim_end(), "pgwrap").is_some() && err.contains(needle),
            "{args:?}: {err}"
        );
    }
}

#[test]
fn a_script_without_a_shebang_runs_with_bin_sh_in_each_tool() {
    // The kernel refuses it with ENOEXEC; execvp(3), env, timeout and tini
    // run it with /bin/sh, its path as $0 and the arguments after.
    let dir = crate::kit::temp_dir("enoexec");
    let script = dir.join("no-shebang");
    std::fs::write(&script, "echo \"ran $0 with $# args: $*\"\nexit 7\n").unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let path = script.to_str().unwrap();
    for tool in ["pgwrap", "graceful", "reap"] {
        let mut run = Run::new(bin(tool))
            .args(["--", path, "a b", "c"])
            .stderr_piped()
            .spawn();
        let line = run.expect_line("ran ", TIMEOUT);
        assert_eq!(line, format!("ran {path} with 2 args: a b c"), "{tool}");
        let status = run.wait_exit(TIMEOUT);
        assert_eq!(status.code(), Some(7), "{tool}: {}", run.stderr_all());
    }
    // Found on PATH too, as execvp finds it.
    let mut run = Run::new(bin("pgwrap"))
        .env("PATH", dir.path())
        .args(["--", "no-shebang"])
        .stderr_piped()
        .spawn();
    assert_eq!(
        run.wait_exit(TIMEOUT).code(),
        Some(7),
        "{}",
        run.stderr_all()
    );
}

/// A script whose `#!` interpreter is missing (`#!/bin/bash` in an image
/// without bash) is 127, and the line names the interpreter, not the
/// script, which exists.
#[test]
fn a_missing_interpreter_is_named() {
    let dir = crate::kit::temp_dir("interpreter");
    let script = dir.join("job.sh");
    std::fs::write(&script, "#!/nonexistent/bash -e\necho hi\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    for tool in ["pgwrap", "graceful", "reap"] {
        let mut run = Run::new(bin(tool))
            .arg("--")
            .arg(&script)
            .stderr_piped()
            .spawn();
        let status = run.wait_exit(TIMEOUT);
        let err = run.stderr_all();
        assert_eq!(status.code(), Some(127), "{tool}: {err}");
        assert_eq!(err.lines().count(), 1, "{tool}: {err}");
        assert!(
            err.contains("interpreter '/nonexistent/bash' not found")
                && err.contains("job.sh")
                && !err.contains("command not found"),
            "{tool}: {err}"
        );
    }
}

/// After --timeout with --preserve-status, COMMAND killed by S: 128+S,
/// not the signal re-raised, exactly as coreutils' own `timeout
/// --preserve-status` (bash prints nothing, no "Terminated"); without a
/// timeout both re-raise.
#[test]
fn preserve_status_after_a_timeout_is_128_plus_s_as_timeout_does() {
    // coreutils' timeout (busybox's, as in the VM cells, has no
    // --preserve-status: there graceful's own statuses below are checked).
    let coreutils = std::process::Command::new("timeout")
        .args(["--preserve-status", "5", "true"])
        .status()
        .is_ok_and(|s| s.success());
    let side_by_side = |ours: &[&str], theirs: &[&str], script: &str| {
        let mut graceful = Run::new(bin("graceful"))
            .args(ours)
            .args(["sh", "-c", script])
            .spawn();
        if !coreutils {
            return graceful.wait_exit(TIMEOUT);
        }
        let mut timeout = Run::new("timeout")
            .args(theirs)
            .args(["sh", "-c", script])
            .spawn();
        let (ours, theirs) = (graceful.wait_exit(TIMEOUT), timeout.wait_exit(TIMEOUT));
        assert_eq!(
            (ours.code(), ours.signal()),
            (theirs.code(), theirs.signal()),
            "{script}: graceful {ours:?}, timeout {theirs:?}"
        );
        ours
    };
    let after_timeout = side_by_side(
        &["--timeout", "200ms", "--preserve-status"],
        &["--preserve-status", "0.2"],
        "exec sleep 30",
    );
    assert_eq!(after_timeout.code(), Some(128 + libc::SIGTERM));
    // No timeout: the signal re-raised by both.
    let no_timeout = side_by_side(
        &["--preserve-status", "--"],
        &["--preserve-status", "30"],
        "kill -TERM $$",
    );
    assert_eq!(no_timeout.signal(), Some(libc::SIGTERM));
    // KILL after the grace: 137, where timeout -k dies of its own KILL.
    let mut run = Run::new(bin("graceful"))
        .args(["-t", "200ms", "-g", "200ms", "--preserve-status"])
        .args(["sh", "-c", "trap '' TERM; sleep 30"])
        .spawn();
    let status = run.wait_exit(TIMEOUT);
    assert_eq!((status.code(), status.signal()), (Some(137), None));
}
