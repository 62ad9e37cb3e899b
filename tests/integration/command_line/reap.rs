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
fn reap_rejects_malformed_cleanup_exec() {
    let dir = temp_dir("reap-bad-cleanup-exec");
    let started = dir.join("command-started");
    let touch = format!("touch {}", started.display());
    let cases: &[&[&str]] = &[
        // No terminating `;`: everything after would be the cleanup.
        &["--cleanup-exec", "true", "--"],
        &["--cleanup-exec"],
        // Empty.
        &["--cleanup-exec", ";", "--"],
        &["--cleanup-exec", "", ";", "--"],
        // Both cleanup options, either order.
        &["--cleanup", "true", "--cleanup-exec", "true", ";", "--"],
        &["--cleanup-exec", "true", ";", "-c", "true", "--"],
        // Given twice.
        &[
            "--cleanup-exec",
            "true",
            ";",
            "--cleanup-exec",
            "true",
            ";",
            "--",
        ],
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
    }
    // The cleanup options that need a cleanup accept --cleanup-exec as one.
    for args in [
        &[
            "--exec-cleanup",
            "--cleanup-exec",
            "true",
            ";",
            "--",
            "true",
        ][..],
        &[
            "--cleanup-timeout",
            "5s",
            "--cleanup-exec",
            "true",
            ";",
            "true",
        ],
    ] {
        let mut run = Run::new(bin("reap")).args(args).stderr_piped().spawn();
        let status = run.wait_exit(TIMEOUT);
        let err = run.stderr_all();
        assert_eq!(status.code(), Some(0), "reap {args:?}: {status:?} {err}");
    }
}

/// Docker runs `docker-init --version` and reads the `tini version X -
/// git.Y` form (moby's parseInitVersion: split at " - ", then "git.Y" must
/// be exactly two dot-separated parts); `docker info` then shows Y as the
/// init version, and "N/A" when the line does not parse.
fn docker_init_version(output: &str) -> Option<(String, String)> {
    let output = output.trim();
    let parts: Vec<&str> = output.split(" - ").collect();
    let version = parts[0].strip_prefix("tini version ")?.to_string();
    let git: Vec<&str> = parts.get(1)?.split('.').collect();
    match git[..] {
        ["git", commit] if !commit.is_empty() => Some((version, commit.to_string())),
        _ => None,
    }
}

#[test]
fn reap_named_docker_init_prints_a_version_docker_parses() {
    let dir = temp_dir("docker-init");
    let init = dir.join("docker-init");
    std::os::unix::fs::symlink(bin("reap"), &init).unwrap();
    let mut run = Run::new(&init).arg("--version").spawn();
    let lines = run.expect_eof(TIMEOUT);
    assert_eq!(run.wait_exit(TIMEOUT).code(), Some(0));
    assert_eq!(lines.len(), 1, "one line: {lines:?}");
    let parsed = docker_init_version(&lines[0]);
    let Some((version, commit)) = parsed else {
        panic!(
            "docker-init --version printed {:?}: Docker cannot parse it \
             (docker info would show 'init version: N/A')",
            lines[0]
        );
    };
    let ours = env!("CARGO_PKG_VERSION");
    assert_eq!(version, ours, "{lines:?}");
    assert!(
        commit.contains(&ours.replace('.', "_")),
        "docker info would show {commit:?}, not reap's version: {lines:?}"
    );
    // Under its own name reap keeps its own line.
    let mut run = Run::new(bin("reap")).arg("--version").spawn();
    let lines = run.expect_eof(TIMEOUT);
    assert_eq!(lines, [format!("reap {ours}")]);
    // Docker starts its init as `docker-init -- CMD ARG...`.
    let mut run = Run::new(&init)
        .args(["--", "sh", "-c", "echo ran $0", "x"])
        .spawn();
    run.expect_line("ran x", TIMEOUT);
    assert_eq!(run.wait_exit(TIMEOUT).code(), Some(0));
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
