//! Exit status, core dumps: when a tool dies of COMMAND's core-dumping
//! signal, no core handler runs on the tool's behalf — not even a piped
//! `core_pattern` (systemd-coredump, apport), which a zero `RLIMIT_CORE`
//! alone does not stop.
//!
//! The test points the machine's `core_pattern` at a small handler that logs
//! the name of every process that dumps, and puts the old pattern back when
//! it ends, pass or fail. COMMAND's own dump is logged (it is COMMAND's to
//! make); a line naming the tool is the defect.

use crate::kit::{bin, temp_dir, Run, TIMEOUT};
use crate::skip::{needs_root, skip};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::time::{Duration, Instant};

const CORE_PATTERN: &str = "/proc/sys/kernel/core_pattern";

/// The machine's core pattern, set to a pipe for the guard's lifetime.
struct PipedCorePattern {
    old: String,
}

impl PipedCorePattern {
    fn set(handler: &Path) -> std::io::Result<PipedCorePattern> {
        let old = std::fs::read_to_string(CORE_PATTERN)?;
        std::fs::write(CORE_PATTERN, format!("|{} %e", handler.display()))?;
        Ok(PipedCorePattern { old })
    }
}

impl Drop for PipedCorePattern {
    fn drop(&mut self) {
        let _ = std::fs::write(CORE_PATTERN, self.old.trim_end_matches('\n'));
    }
}

#[test]
fn a_re_raised_core_signal_runs_no_core_handler_for_the_tool() {
    const TEST: &str = "core_dump::a_re_raised_core_signal_runs_no_core_handler_for_the_tool";
    if let Some(why) = needs_root() {
        return skip(TEST, &why);
    }
    let dir = temp_dir("core-dump");
    let log = dir.join("dumps.log");
    let handler = dir.join("handler");
    std::fs::write(
        &handler,
        format!(
            "#!/bin/sh\ncat > /dev/null\necho \"$1\" >> '{}'\n",
            log.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&handler, std::fs::Permissions::from_mode(0o755)).unwrap();
    let guard = match PipedCorePattern::set(&handler) {
        Ok(g) => g,
        Err(e) => return skip(TEST, &format!("cannot set {CORE_PATTERN}: {e}")),
    };
    for tool in ["pgwrap", "graceful", "reap"] {
        std::fs::write(&log, "").unwrap();
        let mut run = Run::new(bin(tool))
            .args(["--", "sh", "-c", "echo up; kill -SEGV $$"])
            .spawn();
        run.expect_line("up", TIMEOUT);
        let status = run.wait_exit(TIMEOUT);
        assert_eq!(status.signal(), Some(libc::SIGSEGV), "{tool}: {status:?}");
        // COMMAND's own dump reaches the handler before COMMAND's exit is
        // seen by the tool (the kernel waits for the pipe's reader), so its
        // line is the handshake; the tool's would have come before the
        // tool's exit, and the handler is given a moment to write it.
        let deadline = Instant::now() + TIMEOUT;
        // Lossy: other tests' processes may dump under names that are not
        // UTF-8 meanwhile (the machine's core pattern is global).
        let read =
            || String::from_utf8_lossy(&std::fs::read(&log).unwrap_or_default()).into_owned();
        while !read().lines().any(|l| l == "sh") {
            assert!(
                Instant::now() < deadline,
                "{tool}: COMMAND's own dump never reached the handler"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        std::thread::sleep(Duration::from_millis(300));
        let dumps = read();
        // Other tests may crash processes of their own meanwhile: only a
        // dump of one of the tools is this test's business.
        for line in dumps.lines() {
            assert!(
                !["pgwrap", "graceful", "reap"].contains(&line),
                "{tool}: a core handler ran for {line:?}: {dumps:?}"
            );
        }
    }
    drop(guard);
}
