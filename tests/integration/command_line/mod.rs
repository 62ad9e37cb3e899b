//! Malformed command lines: exit 125, exactly one line on stderr starting
//! with the tool's name, and COMMAND never started. Arguments after COMMAND
//! are passed byte for byte, UTF-8 or not.

/// graceful's triggers, forwarding, GRACEFUL_GRACE_MS, bad input, man page.
mod graceful;
/// Habits from timeout(1), tini, dumb-init and systemd: hints, not errors.
mod habits;
/// reap's bad input, help, version and man page.
mod reap;
/// Repeated and contradictory options, misspellings, negative descriptors.
mod strict;

use crate::kit::{bin, temp_dir, Run, TIMEOUT};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;

/// Run `tool ARGS... <marker command>` where the appended COMMAND would
/// create a marker file; the marker must not exist afterwards.
pub fn assert_rejected(tool: &str, cases: &[&[&str]]) {
    let dir = temp_dir("bad-input");
    let marker = dir.join("started");
    let touch = format!("touch {}", marker.display());
    for args in cases {
        let mut run = Run::new(bin(tool))
            .args(*args)
            .args(["sh", "-c", &touch])
            .stderr_piped()
            .spawn();
        let status = run.wait_exit(TIMEOUT);
        let err = run.stderr_all();
        assert_eq!(
            status.code(),
            Some(125),
            "{tool} {args:?}: {status:?} {err}"
        );
        assert_eq!(
            err.lines().count(),
            1,
            "{tool} {args:?}: one line, got {err:?}"
        );
        assert!(
            err.starts_with(&format!("{tool}: ")),
            "{tool} {args:?}: {err}"
        );
        assert!(!marker.exists(), "{tool} {args:?}: COMMAND was started");
    }
}

#[test]
fn pgwrap_rejects_malformed_invocations() {
    assert_rejected(
        "pgwrap",
        &[
            &["--bogus"],
            &["-x"],
            &["--forward"],
            &["--forward", "SIGFOO"],
            &["--forward", "0"],
            &["--forward", "65"],
            &["--forward", ""],
            &["--forward", "TERM,"],
            &["--forward", "KILL"],
            &["--forward", "CHLD"],
            &["--ignore", "NOPE"],
            &["--map", "QUIT"],
            &["--map", "QUIT:"],
            &["--map", ":TERM"],
            &["--map", "STOP:TERM"],
            &["--to", "sideways"],
            &["--to"],
            &["--pdeathsig", "bogus"],
            &["--pdeathsig", "-1"],
            &["--pdeathsig", "10x"],
            &["--setsid", "--foreground"],
            &["--help=1"],
            &["--setsid=yes"],
            &["-f", "RTMIN+99"],
            &["--forward", "1.2.3"],
        ],
    );
}

#[test]
fn pgwrap_without_command_is_125() {
    for args in [&[][..], &["-v"], &["--"], &["--forward", "TERM"]] {
        let mut run = Run::new(bin("pgwrap")).args(args).stderr_piped().spawn();
        assert_eq!(run.wait_exit(TIMEOUT).code(), Some(125), "{args:?}");
        let err = run.stderr_all();
        assert!(err.starts_with("pgwrap: missing COMMAND"), "{err}");
    }
}

#[test]
fn non_utf8_arguments_pass_through_byte_for_byte() {
    let arg = OsStr::from_bytes(b"caf\xe9-\xff\xfe");
    let mut run = Run::new(bin("pgwrap"))
        .args(["--", "sh", "-c", "printf '%s' \"$1\" | od -An -tx1", "sh"])
        .arg(arg)
        .spawn();
    let line = run.expect_line("63", TIMEOUT);
    assert_eq!(
        line.split_whitespace().collect::<Vec<_>>(),
        ["63", "61", "66", "e9", "2d", "ff", "fe"]
    );
    assert_eq!(run.wait_exit(TIMEOUT).code(), Some(0));
}

#[test]
fn help_and_version() {
    let mut run = Run::new(bin("pgwrap")).arg("--help").spawn();
    run.expect_line("Usage: pgwrap", TIMEOUT);
    assert_eq!(run.wait_exit(TIMEOUT).code(), Some(0));
    let mut run = Run::new(bin("pgwrap")).arg("-V").spawn();
    run.expect_line(&format!("pgwrap {}", env!("CARGO_PKG_VERSION")), TIMEOUT);
    assert_eq!(run.wait_exit(TIMEOUT).code(), Some(0));
}
