//! A job-control stop that reaches COMMAND's process between its signal
//! mask's restore and its `execve`: the tool sits in `clone` (the vfork
//! child runs first) and could not act on it, so the stop must not leave
//! the child stopped before exec. The window is widened by a PATH of
//! 60,000 entries `l`, a chain of 30 symbolic links in the current directory
//! to an empty one: the child tries each (one failing `execve` apiece, back
//! in user mode in between) before `/usr/bin` (about a second in all).

use crate::kit::{bin, temp_dir, Run, TIMEOUT};
use crate::procfs;
use std::path::Path;
use std::time::Instant;

/// `Name` and `SigBlk` of `pid` (a thread-group leader).
fn name_and_blocked(pid: i32) -> Option<(String, String)> {
    status_fields(&format!("/proc/{pid}/status"))
}

/// `Name` and `SigBlk` from a `status` file.
fn status_fields(file: &str) -> Option<(String, String)> {
    let text = std::fs::read_to_string(file).ok()?;
    let field = |key: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(key))
            .map(|v| v.trim().to_string())
    };
    Some((field("Name:")?, field("SigBlk:")?))
}

/// Start `pgwrap -- sleep` with the long PATH and send TSTP to its child
/// once the child has restored the caller's mask but not yet exec'd.
/// Returns the run and the child's pid, or None if the window was missed.
fn stop_in_the_window(dir: &Path, path: &str, mine: &str) -> Option<(Run, i32)> {
    let run = Run::new(bin("pgwrap"))
        .current_dir(dir)
        .env("PATH", path)
        .args(["--no-foreground", "--", "sleep", "1000"])
        .spawn();
    let tool = run.pid();
    let children = format!("/proc/{tool}/task/{tool}/children");
    let start = Instant::now();
    while start.elapsed() < TIMEOUT {
        let list = std::fs::read_to_string(&children).unwrap_or_default();
        let Some(child) = list
            .split_whitespace()
            .next()
            .and_then(|p| p.parse::<i32>().ok())
        else {
            continue;
        };
        loop {
            match name_and_blocked(child) {
                Some((name, blocked)) if name == "pgwrap" && blocked == mine => {
                    // SAFETY: plain syscall, to a child of ours we just saw.
                    unsafe { libc::kill(child, libc::SIGTSTP) };
                    // Still the tool's image after the signal: it came
                    // before exec.
                    if name_and_blocked(child).is_some_and(|(n, _)| n == "pgwrap") {
                        return Some((run, child));
                    }
                    break;
                }
                Some((name, _)) if name == "pgwrap" => continue,
                _ => break,
            }
        }
        // SAFETY: plain syscall, to the child just seen (unreaped: the
        // tool, its parent, waits for it).
        unsafe { libc::kill(child, libc::SIGKILL) };
        return None;
    }
    panic!("pgwrap started no child within {TIMEOUT:?}");
}

/// Whether `cond` holds within `timeout` (checked every 10 ms).
fn holds_within(timeout: std::time::Duration, cond: impl Fn() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < timeout {
        if cond() {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    cond()
}

#[test]
fn a_stop_before_exec_stops_command_and_leaves_the_tool_free() {
    // The mask the tool gets from this thread, and gives COMMAND.
    let mine = status_fields("/proc/thread-self/status")
        .map(|(_, b)| b)
        .unwrap();
    let dir = temp_dir("before-exec");
    std::fs::create_dir(dir.join("d")).unwrap();
    let mut last = "d".to_string();
    for i in 0..30 {
        let link = format!("m{i}");
        std::os::unix::fs::symlink(&last, dir.join(&link)).unwrap();
        last = link;
    }
    std::os::unix::fs::symlink(&last, dir.join("l")).unwrap();
    let path = format!("{}:/usr/bin:/bin", vec!["l"; 60_000].join(":"));
    let mut attempt = 0;
    let (run, child) = loop {
        attempt += 1;
        if let Some(hit) = stop_in_the_window(&dir, &path, &mine) {
            break hit;
        }
        assert!(
            attempt < 5,
            "the window before exec was missed {attempt} times"
        );
    };
    let end = |sig: i32| {
        // SAFETY: plain syscall, to the child of the run (still unreaped:
        // its parent is the tool, alive until the run is dropped).
        unsafe { libc::kill(child, sig) };
    };
    let ok = holds_within(TIMEOUT, || {
        name_and_blocked(child).is_some_and(|(n, _)| n == "sleep") && procfs::is_stopped(child)
    });
    let seen = (
        name_and_blocked(child).map(|(n, _)| n),
        procfs::state(child),
        procfs::state(run.pid()),
    );
    end(libc::SIGKILL);
    drop(run);
    assert!(
        ok,
        "a TSTP before exec: COMMAND must exec and then be stopped by it (the tool free to \
         follow); seen (child's name, child's state, tool's state) = {seen:?}"
    );
}
