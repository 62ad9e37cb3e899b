//! Resource faults: no process left to fork, no file descriptor left to
//! open, stdin/stdout/stderr closed at start, no usable `/proc`.
//!
//! - RLIMIT_NPROC exhausted: 125 with one line saying what could not be
//!   done, nothing started, nothing left behind. Root ignores RLIMIT_NPROC,
//!   so these run as an otherwise unused user id (setpriv), whose process
//!   count is exactly known (the tool itself).
//! - RLIMIT_NOFILE so low that a descriptor of the tool's own (signalfd,
//!   timerfd, pidfd, reap's pipes) cannot be opened: 125 with one line, and
//!   COMMAND never started; at every higher limit COMMAND runs normally.
//!   (Below 4 the dynamic loader itself cannot open the C library, before
//!   any code of the tool runs.)
//! - A closed stdin, stdout or stderr: the tool works (forwards, ends as
//!   COMMAND ended) and COMMAND gets exactly the descriptors it gets when
//!   run directly with the same one closed: the tool neither reopens it nor
//!   lets one of its own descriptors (which then take the free low numbers)
//!   reach COMMAND.
//! - No usable `/proc`: reap (not PID 1) says so and falls back to COMMAND's
//!   group, and waits for the leftovers it cannot signal rather than leave
//!   them; graceful, which finds the members left after COMMAND in `/proc`,
//!   says so and still kills the group at the end of the grace.

use crate::kit::{bin, temp_dir, Run, TIMEOUT};
use crate::procfs;
use crate::reap_kit::Guard;
use crate::skip;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const TOOLS: [&str; 3] = ["pgwrap", "graceful", "reap"];

/// A user id no account and no other test uses: its process count is ours.
const LIMITED_UID: &str = "61001";

/// Run `cmd` (stdin /dev/null, output captured) in a group of its own; on
/// a hang, kill it and everything below it, then fail.
pub fn bounded_output(mut cmd: Command, limit: Duration) -> Output {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    let child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {cmd:?}: {e}"));
    let pid = child.id() as i32;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(limit) {
        Ok(out) => out.expect("wait for the child"),
        Err(_) => {
            let mut guard = Guard::new();
            guard.watch_tree(pid);
            drop(guard);
            panic!("{cmd:?} still running after {limit:?}");
        }
    }
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Every process of `uid` (from /proc/PID/status).
fn processes_of(uid: &str) -> Vec<i32> {
    procfs::all_pids()
        .into_iter()
        .filter(|&p| {
            procfs::status_field(p, "Uid").is_some_and(|u| u.split_whitespace().next() == Some(uid))
        })
        .collect()
}

/// 125, exactly one line `TOOL: unable to ...` that contains `why`, and
/// nothing started (COMMAND would have printed `started`).
fn assert_refused(tool: &str, out: &Output, why: &str, case: &str) {
    let err = text(&out.stderr);
    let what = format!(
        "{tool} {case}: {:?}\nstdout: {}\nstderr: {err}",
        out.status,
        text(&out.stdout)
    );
    assert_eq!(out.status.code(), Some(125), "{what}");
    assert_eq!(err.lines().count(), 1, "{what}");
    // Before anything started `TOOL: `; reap's back, already running when
    // it cannot start COMMAND, says it as every running line: `reap[PID]: `.
    let line = err.trim_end();
    assert!(
        line.starts_with(&format!("{tool}: unable to "))
            || crate::kit::said(line, tool).is_some_and(|m| m.starts_with("unable to ")),
        "{what}"
    );
    assert!(err.contains(why), "{what}");
    assert!(out.stdout.is_empty(), "COMMAND started: {what}");
}

#[test]
fn nproc_exhausted_is_125_with_one_line_and_nothing_left() {
    if let Some(why) = skip::needs_root().or_else(|| skip::needs_program("setpriv", "util-linux")) {
        return skip::skip(
            "nproc_exhausted_is_125_with_one_line_and_nothing_left",
            &why,
        );
    }
    // Limit 1: the tool itself is the user's only process, so it cannot
    // create another. Limit 2 for reap: its back process exists, COMMAND
    // cannot.
    let mut cases: Vec<(&str, u32)> = TOOLS.iter().map(|&t| (t, 1)).collect();
    cases.push(("reap", 2));
    for (tool, limit) in cases {
        let mut cmd = Command::new("prlimit");
        cmd.arg(format!("--nproc={limit}:{limit}"))
            .args(["setpriv", "--reuid", LIMITED_UID, "--regid", LIMITED_UID])
            .args(["--clear-groups", "--"])
            .arg(bin(tool))
            .args(["--", "/bin/echo", "started"]);
        let out = bounded_output(cmd, TIMEOUT);
        assert_refused(
            tool,
            &out,
            "Resource temporarily unavailable",
            &format!("with RLIMIT_NPROC {limit}"),
        );
        assert_eq!(
            processes_of(LIMITED_UID),
            Vec::<i32>::new(),
            "{tool}: left behind"
        );
    }
}

#[test]
fn nofile_exhausted_is_125_with_one_line_or_a_normal_run() {
    for tool in TOOLS {
        let mut refused = Vec::new();
        for limit in 4..=12 {
            let mut cmd = Command::new("prlimit");
            cmd.arg(format!("--nofile={limit}:{limit}"))
                .arg(bin(tool))
                .args(["--", "/bin/echo", "started"]);
            let out = bounded_output(cmd, TIMEOUT);
            if out.status.code() == Some(125) {
                // EMFILE as the C library words it: glibc's, or musl's (the
                // static build).
                let why = if text(&out.stderr).contains("No file descriptors available") {
                    "No file descriptors available"
                } else {
                    "Too many open files"
                };
                assert_refused(tool, &out, why, &format!("with RLIMIT_NOFILE {limit}"));
                refused.push(limit);
            } else {
                assert_eq!(
                    (out.status.code(), text(&out.stdout).as_str()),
                    (Some(0), "started\n"),
                    "{tool} with RLIMIT_NOFILE {limit}: {}",
                    text(&out.stderr)
                );
            }
        }
        assert!(
            refused.contains(&4),
            "{tool} ran with 4 descriptors: {refused:?}"
        );
        // Refused below some limit, runs from there on.
        assert!(
            refused.iter().enumerate().all(|(i, &l)| l == 4 + i as u32),
            "{tool}: {refused:?}"
        );
    }
}

/// `(fd, what it points to)` of a process, sorted.
fn fd_table(pid: i32) -> Vec<(i32, String)> {
    procfs::open_fds(pid)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|fd| {
            let target = std::fs::read_link(format!("/proc/{pid}/fd/{fd}")).ok()?;
            Some((fd, target.display().to_string()))
        })
        .collect()
}

/// `argv` with stdin, stdout and stderr on files of `dir`, descriptor
/// `closed` closed (if any), in a group of its own.
fn start_with_closed(
    argv: &[String],
    dir: &std::path::Path,
    closed: Option<i32>,
) -> std::process::Child {
    let file = |name: &str| {
        std::fs::File::options()
            .create(true)
            .append(true)
            .read(true)
            .open(dir.join(name))
            .unwrap()
    };
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..])
        .stdin(file("in"))
        .stdout(file("out"))
        .stderr(file("err"))
        .process_group(0);
    if let Some(fd) = closed {
        // SAFETY: close(2) is async-signal-safe.
        unsafe {
            cmd.pre_exec(move || {
                libc::close(fd);
                Ok(())
            })
        };
    }
    cmd.spawn().expect("spawn")
}

/// The `sleep` process below `root` (root itself included), once it runs.
fn find_sleep(root: i32) -> i32 {
    let mut found = 0;
    procfs::wait_until("COMMAND runs sleep", TIMEOUT, || {
        found = std::iter::once(root)
            .chain(procfs::descendants(root))
            .find(|&p| procfs::cmdline(p).is_some_and(|c| c.first().is_some_and(|a| a == "sleep")))
            .unwrap_or(0);
        found > 0
    });
    found
}

#[test]
fn closed_stdio_at_start_changes_nothing_command_gets() {
    let dir = temp_dir("closed-stdio");
    for closed in [Some(0), Some(1), Some(2)] {
        let direct_argv = vec!["sleep".to_string(), "1000".to_string()];
        let mut direct = start_with_closed(&direct_argv, &dir, closed);
        let mut guard = Guard::new();
        guard.watch(direct.id() as i32);
        let expected = {
            let pid = find_sleep(direct.id() as i32);
            // Settled: sleep opens nothing more once it sleeps.
            procfs::wait_until("sleep sleeps", TIMEOUT, || procfs::state(pid) == Some('S'));
            fd_table(pid)
        };
        let _ = direct.kill();
        let _ = direct.wait();
        for tool in TOOLS {
            let mut argv = vec![bin(tool).display().to_string(), "--".into()];
            argv.extend(direct_argv.iter().cloned());
            let mut child = start_with_closed(&argv, &dir, closed);
            let pid = child.id() as i32;
            guard.watch(pid);
            let sleep = find_sleep(pid);
            guard.watch_tree(pid);
            procfs::wait_until("sleep sleeps", TIMEOUT, || {
                procfs::state(sleep) == Some('S')
            });
            assert_eq!(
                fd_table(sleep),
                expected,
                "{tool} with fd {closed:?} closed: COMMAND's descriptors differ from a direct run's"
            );
            // Still works: TERM is passed on, and the tool dies of it too.
            // SAFETY: kill of our unreaped child.
            unsafe { libc::kill(pid, libc::SIGTERM) };
            let deadline = Instant::now() + TIMEOUT;
            let status = loop {
                if let Some(status) = child.try_wait().unwrap() {
                    break status;
                }
                assert!(
                    Instant::now() < deadline,
                    "{tool} with fd {closed:?} closed: hangs"
                );
                std::thread::sleep(Duration::from_millis(10));
            };
            assert_eq!(
                status.signal(),
                Some(libc::SIGTERM),
                "{tool} with fd {closed:?} closed"
            );
            assert!(!procfs::alive(sleep), "{tool}: COMMAND left behind");
        }
    }
}

/// `unshare --mount` with an empty tmpfs over `/proc`, then `argv`.
fn without_proc(argv: &[&str]) -> crate::kit::RunBuilder {
    Run::new("unshare")
        .args(["--mount", "--propagation", "private", "--", "sh", "-c"])
        .arg("mount -t tmpfs none /proc && exec \"$@\"")
        .arg("sh")
        .args(argv)
        .stderr_piped()
}

fn needs_mount_namespace(test: &str) -> bool {
    if let Some(why) = skip::needs_root().or_else(|| skip::needs_program("unshare", "util-linux")) {
        skip::skip(test, &why);
        return false;
    }
    true
}

#[test]
fn reap_without_proc_falls_back_to_the_group_and_waits_for_the_rest() {
    if !needs_mount_namespace("reap_without_proc_falls_back_to_the_group_and_waits_for_the_rest") {
        return;
    }
    let reap = bin("reap").display().to_string();
    let probe = bin("sigprobe").display().to_string();
    let mut run = without_proc(&[
        &reap,
        "-g",
        "200ms",
        "-c",
        "echo cleanup ran",
        "--",
        &probe,
        "--fork",
        "1",
        "--escape",
        "1",
    ])
    .spawn();
    let readies = run.expect_readies(3, TIMEOUT);
    let escapee = readies.iter().find(|r| r.role == "escapee").unwrap().pid;
    let member = readies.iter().find(|r| r.role == "child").unwrap().pid;
    // unshare and sh exec: the run's pid is reap's front.
    run.signal(libc::SIGTERM);
    procfs::wait_until("the group is gone", TIMEOUT, || !procfs::alive(member));
    procfs::wait_until("reap says /proc is not usable", TIMEOUT, || {
        run.stderr_so_far().contains("/proc is not usable")
    });
    // Well past the grace: the escapee, out of reach without /proc, is
    // waited for, not left behind.
    std::thread::sleep(Duration::from_millis(600));
    assert!(
        run.try_exit().is_none(),
        "reap left with a descendant running"
    );
    assert!(procfs::alive(escapee));
    assert!(!run.lines_so_far().iter().any(|l| l == "cleanup ran"));
    // SAFETY: the escapee's pid was announced and it is alive (checked).
    unsafe { libc::kill(escapee, libc::SIGKILL) };
    run.expect_line("cleanup ran", TIMEOUT);
    assert_eq!(run.wait_exit(TIMEOUT).code(), Some(0));
}

/// Regression: without /proc, graceful took the group for gone as soon as
/// COMMAND exited, and left at once: a member that ignored the stop signal
/// went on running, never killed.
#[test]
fn graceful_without_proc_kills_the_group_at_the_deadline() {
    if !needs_mount_namespace("graceful_without_proc_kills_the_group_at_the_deadline") {
        return;
    }
    let graceful = bin("graceful").display().to_string();
    let probe = bin("sigprobe").display().to_string();
    // COMMAND exits on TERM; the member it leaves in its group does not.
    let script = format!("{probe} --exit-on none & exec {probe}");
    let mut run = without_proc(&[&graceful, "-g", "300ms", "--", "sh", "-c", &script]).spawn();
    let readies = run.expect_readies(2, TIMEOUT);
    let started = Instant::now();
    run.signal(libc::SIGTERM);
    let status = run.wait_exit(TIMEOUT);
    assert!(
        started.elapsed() >= Duration::from_millis(300),
        "left before the deadline"
    );
    assert_eq!(status.code(), Some(0), "COMMAND's status");
    for r in readies {
        procfs::wait_until("every member is killed", TIMEOUT, || !procfs::alive(r.pid));
    }
    let err = run.stderr_all();
    assert!(err.contains("/proc is not usable"), "{err}");
}

/// The vfork child's stack has a guard page below it: an overflow in the
/// child faults instead of writing into whatever lies below. Read off the
/// tool's own system calls (strace): the stack's mapping, its lowest 64 KiB
/// made PROT_NONE, and the clone's stack pointer above them.
#[test]
fn the_vfork_childs_stack_has_a_guard_below_it() {
    let test = "the_vfork_childs_stack_has_a_guard_below_it";
    if !cfg!(target_arch = "x86_64") {
        return skip::skip(test, "reads strace's x86_64 names of mmap and clone");
    }
    if let Some(why) = skip::needs_program("strace", "strace") {
        return skip::skip(test, &why);
    }
    // strace writes to a file of its own: `-o /dev/stdout` depends on a
    // symlink some machines lack (strace then creates a regular file there).
    let dir = temp_dir("vfork-guard");
    for tool in ["pgwrap", "graceful", "reap"] {
        let log = dir.join(format!("{tool}.strace"));
        let out = Command::new("strace")
            .args(["-f", "-e", "trace=mmap,mprotect,clone", "-o"])
            .arg(&log)
            .arg(bin(tool))
            .args(["--", "true"])
            .stdin(Stdio::null())
            .output()
            .expect("strace");
        assert!(
            out.status.success(),
            "{tool} under strace: {:?}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        let hex = |s: &str| u64::from_str_radix(s.trim().trim_start_matches("0x"), 16).ok();
        let lines: Vec<&str> = text.lines().collect();
        let clone_at = lines
            .iter()
            .position(|l| l.contains("clone(") && l.contains("CLONE_VFORK"))
            .unwrap_or_else(|| panic!("{tool}: no vfork clone in:\n{text}"));
        let stack = lines[..clone_at]
            .iter()
            .rev()
            .find(|l| l.contains("MAP_STACK"))
            .and_then(|l| l.rsplit("= ").next())
            .and_then(hex)
            .unwrap_or_else(|| panic!("{tool}: no stack mapping before the clone:\n{text}"));
        let guard = format!("mprotect({stack:#x}, 65536, PROT_NONE) = 0");
        assert!(
            lines[..clone_at].iter().any(|l| l.contains(&guard)),
            "{tool}: no `{guard}` before the clone:\n{text}"
        );
        let sp = lines[clone_at]
            .split("child_stack=")
            .nth(1)
            .and_then(|r| r.split(',').next())
            .and_then(hex)
            .unwrap_or_else(|| panic!("{tool}: {}", lines[clone_at]));
        assert!(
            sp > stack + 65536 && sp <= stack + 2 * 65536,
            "{tool}: the child's stack pointer {sp:#x} is not above the guard at {stack:#x}"
        );
    }
}

/// `waitid` refused (strace's fault injection, as a seccomp profile's EPERM
/// would): COMMAND's exit cannot be read by it. Before, its pidfd stayed
/// readable and the tool went round its loop without end, at 100 % CPU;
/// then it ended with 125 and one line naming the call, at its first look
/// at COMMAND (still running). Now it waits on the pidfd, reads the
/// status of the zombie in `/proc`, and ends as COMMAND ended, in silence.
#[test]
fn a_refused_waitid_ends_the_tool_as_command_ended_not_a_busy_loop() {
    let test = "faults::a_refused_waitid_ends_the_tool_as_command_ended_not_a_busy_loop";
    if let Some(why) = skip::needs_program("strace", "strace") {
        return skip::skip(test, &why);
    }
    for tool in ["pgwrap", "graceful"] {
        for err in ["ENOSYS", "EPERM", "EINVAL"] {
            let mut cmd = Command::new("strace");
            cmd.args(["-f", "-qq", "-o", "/dev/null", "-e", "trace=waitid", "-e"])
                .arg(format!("inject=waitid:error={err}"))
                .arg(bin(tool))
                .args(["--", "sleep", "0.2"]);
            let out = bounded_output(cmd, Duration::from_secs(30));
            let stderr = text(&out.stderr);
            assert_eq!(
                out.status.code(),
                Some(0),
                "{tool}, waitid refused with {err}: {:?}, stderr {stderr:?}",
                out.status
            );
            assert_eq!(stderr, "", "{tool}, waitid refused with {err}: stderr");
        }
    }
}
