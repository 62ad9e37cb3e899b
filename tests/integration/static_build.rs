//! The static build (`scripts/build-static`, musl linked in), which images and
//! empty roots carry: each tool reads its own command line, argv[0]
//! included, passes the caller's environment on, and has its signals blocked
//! before `main`, as the default build does. The tools start without Rust's
//! runtime, so what glibc alone fills in before `main` (std's arguments) is
//! exactly what this build shows missing.

use crate::kit::{static_bin, temp_dir, TIMEOUT};
use std::process::{Command, Output, Stdio};
use std::time::Instant;

/// Run `cmd` to its end (stdin closed), bounded by [`TIMEOUT`]: killed by
/// its PID if it outlives it.
fn run(cmd: &mut Command) -> Output {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("cannot start the static tool");
    let start = Instant::now();
    while child.try_wait().expect("try_wait").is_none() {
        if start.elapsed() > TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{cmd:?} still runs after {TIMEOUT:?}");
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    child.wait_with_output().expect("wait_with_output")
}

/// COMMAND prints its own arguments, one variable of the caller's, and the
/// blocked mask of its parent (the tool, or reap's back).
const PROBE: &str = r#"printf '[%s]' "$0" "$@"; printf '{%s}\n' "$STATIC_BUILD_PROBE"; sed -n 's/^SigBlk:[[:space:]]*//p' /proc/$PPID/status"#;

#[test]
fn each_static_tool_reads_its_arguments_and_passes_the_environment_on() {
    for (tool, opts) in [
        ("pgwrap", &[][..]),
        ("graceful", &["--grace", "2s"][..]),
        ("reap", &["--grace", "2s"][..]),
    ] {
        let out = run(Command::new(static_bin(tool))
            .args(opts)
            .args(["--", "/bin/sh", "-c", PROBE, "zero one", "two", "", "-x"])
            .env("STATIC_BUILD_PROBE", "a=b c"));
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{tool}: {stderr}");
        let mut lines = stdout.lines();
        assert_eq!(
            lines.next(),
            Some("[zero one][two][][-x]{a=b c}"),
            "{tool}: {stdout}{stderr}"
        );
        // The `.init_array` hook ran before main: the tool's signals are
        // blocked (COMMAND's own mask is the caller's again).
        let mask = lines.next().unwrap_or_default();
        let mask = u64::from_str_radix(mask.trim(), 16).unwrap_or(0);
        assert_ne!(mask & (1 << (libc::SIGTERM - 1)), 0, "{tool}: {stdout}");
    }
}

#[test]
fn static_reap_named_docker_init_answers_version_in_tinis_form() {
    // argv[0] as the C library hands it to main: `dockerd --init-path`
    // runs it under this name.
    let dir = temp_dir("static-docker-init");
    let init = dir.join("docker-init");
    std::fs::copy(static_bin("reap"), &init).unwrap();
    let out = run(Command::new(&init).arg("--version"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(
        stdout.starts_with(&format!(
            "tini version {} - git.reap-",
            env!("CARGO_PKG_VERSION")
        )),
        "{stdout}"
    );
}
