//! reap's command line: malformed invocations exit 125 with one line and
//! start nothing (neither COMMAND nor the cleanup); --help and --version;
//! every long option of --help is documented in reap(1).

use crate::kit::{bin, temp_dir, Run, TIMEOUT};

#[test]
fn reap_rejects_malformed_invocations() {
    let dir = temp_dir("reap-bad-input");
    let started = dir.join("command-started");
    let cleaned = dir.join("cleanup-started");
    let touch = format!("touch {}", started.display());
    let cleanup = format!("touch {}", cleaned.display());
    let c = cleanup.as_str();
    let cases: &[&[&str]] = &[
        &["--bogus"],
        &["-x"],
        &["--forward"],
        &["--forward", "SIGFOO"],
        &["--forward", ""],
        &["--forward", "TERM,"],
        &["--forward", "KILL"],
        &["--forward", "STOP"],
        &["--forward", "CHLD"],
        &["--forward", "0"],
        &["-f", "RTMIN+99"],
        &["--signal", "BOGUS"],
        &["-s", "65"],
        &["--signal"],
        &["--grace", "10x"],
        &["-g", "-1"],
        &["--cleanup-timeout", "soon", "-c", c],
        &["--cleanup-timeout", "5s"],
        &["--exec-cleanup"],
        &["--exec-cleanup", "-c", c, "--cleanup-timeout", "5"],
        &["--cleanup", ""],
        &["-c", c, "--cleanup"],
        &["--help=1"],
        &["--version=1"],
        &["--keep-orphans=yes", "-c", c],
        &["--exec-cleanup=no", "-c", c],
    ];
    for args in cases {
        let mut run = Run::new(bin("reap"))
            .args(*args)
            .args(["sh", "-c", &touch])
            .stderr_piped()
            .spawn();
        let status = run.wait_exit(TIMEOUT);
        let err = run.stderr_all();
        assert_eq!(status.code(), Some(125), "reap {args:?}: {status:?} {err}");
        assert_eq!(
            err.lines().count(),
            1,
            "reap {args:?}: one line, got {err:?}"
        );
        assert!(err.starts_with("reap: "), "reap {args:?}: {err}");
        assert!(!started.exists(), "reap {args:?}: COMMAND was started");
        assert!(!cleaned.exists(), "reap {args:?}: the cleanup was started");
    }
}

#[test]
fn reap_without_command_is_125() {
    for args in [&[][..], &["-v"], &["--"], &["-c", "true"]] {
        let mut run = Run::new(bin("reap")).args(args).stderr_piped().spawn();
        assert_eq!(run.wait_exit(TIMEOUT).code(), Some(125), "{args:?}");
        let err = run.stderr_all();
        assert!(err.starts_with("reap: missing COMMAND"), "{err}");
    }
}

#[test]
fn reap_help_and_version() {
    let mut run = Run::new(bin("reap")).arg("--help").spawn();
    run.expect_line("Usage: reap", TIMEOUT);
    assert_eq!(run.wait_exit(TIMEOUT).code(), Some(0));
    let mut run = Run::new(bin("reap")).arg("-V").spawn();
    run.expect_line(&format!("reap {}", env!("CARGO_PKG_VERSION")), TIMEOUT);
    assert_eq!(run.wait_exit(TIMEOUT).code(), Some(0));
}

#[test]
fn reap_help_and_man_page_agree() {
    crate::docs::check_tool("reap");
}
