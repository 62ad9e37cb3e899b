//! The event log (`--events FD|PATH`): one JSON line per event, each written
//! whole, in the order of the contract; a log nobody reads never blocks or
//! ends the tool.

use crate::kit::{bin, temp_dir, Run, TIMEOUT};
use std::time::Duration;

/// The `"event"` of each line, checking the common fields on the way.
fn events_of(text: &str, tool: &str) -> Vec<String> {
    text.lines()
        .map(|line| {
            assert!(
                line.starts_with("{\"v\":1,\"t\":") && line.ends_with('}'),
                "not an event line: {line}"
            );
            assert!(line.contains(&format!("\"tool\":\"{tool}\"")), "{line}");
            let at = line.find("\"event\":\"").expect("an event field") + 9;
            line[at..line[at..].find('"').unwrap() + at].to_string()
        })
        .collect()
}

#[test]
fn a_graceful_run_logs_its_events_in_the_contracts_order() {
    let dir = temp_dir("events");
    let log = dir.join("events.jsonl");
    let mut run = Run::new(bin("graceful"))
        .arg("--events")
        .arg(&log)
        .args(["--grace", "300ms", "--", "sh", "-c"])
        .arg("trap '' TERM USR1; echo up; sleep 30")
        .stderr_piped()
        .spawn();
    run.expect_line("up", TIMEOUT);
    run.signal(libc::SIGUSR1);
    run.signal(libc::SIGTERM);
    let status = run.wait_exit(TIMEOUT);
    assert_eq!(status.code(), None, "killed: {status:?}");
    let text = std::fs::read_to_string(&log).unwrap();
    let events = events_of(&text, "graceful");
    // Both the shell and its sleep ignore TERM (and USR1): two survivors.
    let want = [
        "started", "signal", "signal", "stop", "survivor", "survivor", "kill", "reaped", "exit",
    ];
    assert_eq!(events, want, "{text}");
    assert!(text.contains("\"name\":\"USR1\",") && text.contains("\"action\":\"forwarded\""));
    assert!(text.contains("\"name\":\"TERM\",") && text.contains("\"action\":\"trigger\""));
    assert!(text.contains("\"reason\":\"ignores\""), "{text}");
    assert!(text.contains("\"event\":\"exit\",\"status\":137,\"cause\":\"signal\",\"dropped\":0"));
}

#[test]
fn a_pgwrap_run_logs_to_a_descriptor_of_the_caller() {
    let dir = temp_dir("events-fd");
    let log = dir.join("events.jsonl");
    let mut run = Run::new("sh")
        .arg("-c")
        .arg(format!(
            "exec 3>'{}'; exec '{}' --events 3 -- sh -c 'exit 4'",
            log.display(),
            bin("pgwrap").display()
        ))
        .spawn();
    assert_eq!(run.wait_exit(TIMEOUT).code(), Some(4));
    let text = std::fs::read_to_string(&log).unwrap();
    assert_eq!(
        events_of(&text, "pgwrap"),
        ["started", "reaped", "exit"],
        "{text}"
    );
    assert!(text.contains("\"event\":\"exit\",\"status\":4,\"cause\":\"exit\""));
}

/// A log whose reader is gone: the writes fail, the tool goes on and ends
/// as COMMAND did, saying so once on stderr.
#[test]
fn a_log_nobody_reads_neither_blocks_nor_ends_the_tool() {
    let mut fds = [0; 2];
    // SAFETY: pipe2 writes two descriptors.
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
    // SAFETY: our read end, closed at once: nobody will read.
    unsafe { libc::close(fds[0]) };
    let w = fds[1];
    let mut run = Run::new(bin("pgwrap"))
        .args(["--events", "3", "--", "sh", "-c", "sleep 0.3; exit 6"])
        .stderr_piped()
        .configure(move |cmd| {
            use std::os::unix::process::CommandExt;
            // SAFETY: dup2 between fork and exec.
            unsafe {
                cmd.pre_exec(move || {
                    if libc::dup2(w, 3) < 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
        })
        .spawn();
    // SAFETY: the child has its copy.
    unsafe { libc::close(w) };
    let status = run.wait_exit(TIMEOUT + Duration::from_secs(1));
    let err = run.stderr_all();
    assert_eq!(status.code(), Some(6), "{status:?}: {err}");
    assert_eq!(err.matches("event log").count(), 1, "{err}");
}

#[test]
fn an_unusable_log_is_refused_before_anything_starts() {
    crate::command_line::assert_rejected("pgwrap", &[&["--events", "987", "--"]]);
    crate::command_line::assert_rejected(
        "graceful",
        &[&["--events", "/nonexistent/dir/log", "--"]],
    );
}
