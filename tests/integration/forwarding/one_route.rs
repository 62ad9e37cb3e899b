//! One route for every signal through reap: the front hands each to the
//! back, COMMAND's parent, which holds COMMAND's zombie and so is the one
//! process that may signal COMMAND's group without racing its reaping.
//!
//! A process of the tool paused at any instant (CPU quota throttling,
//! ptrace, SIGSTOP) delays what follows and changes nothing else: reap's
//! front held for 400 ms between reading a stop request and handing it to
//! the back still gets it acted on as a stop request (the grace, the
//! event log, `REAP_CAUSE=cancel`), and the back, waiting, does not poll.
//! The pause is strace's delay injection on the front's `write`.
//!
//! Once the back has passed a stop request on, its next system call but
//! the grace's timer is its wait: on a busy CPU COMMAND's handler runs
//! only when the back sleeps, and its look at the kernel finds nothing
//! that the wait would not wake it for (strace on the back). pgwrap's
//! next system call after passing a signal on is its wait.

use crate::kit::{bin, skip::needs_program, skip::skip, temp_dir, Run, TIMEOUT};
use crate::procfs;
use crate::reap_kit::{back_of, reap, sigprobe, Guard};
use std::process::{Command, Stdio};

/// strace attached to `pid`, holding its first `write` for 400 ms; killed
/// by PID on drop.
struct Pause {
    tracer: std::process::Child,
}

impl Pause {
    fn first_write(pid: i32) -> Pause {
        let tracer = strace_attached(
            pid,
            &[
                &"-e",
                &"trace=write",
                &"-e",
                &"inject=write:delay_enter=400000:when=1",
            ],
        );
        Pause { tracer }
    }
}

/// `strace -q ARGS -p PID`, returned once it is attached to PID.
fn strace_attached(pid: i32, args: &[&dyn AsRef<std::ffi::OsStr>]) -> std::process::Child {
    let tracer = Command::new("strace")
        .arg("-q")
        .args(args.iter().map(|a| a.as_ref()))
        .args(["-p", &pid.to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start strace");
    procfs::wait_until("strace is attached", TIMEOUT, || {
        procfs::status_field(pid, "TracerPid").is_some_and(|t| t != "0")
    });
    tracer
}

impl Drop for Pause {
    fn drop(&mut self) {
        let _ = self.tracer.kill();
        let _ = self.tracer.wait();
    }
}

#[test]
fn a_stop_request_held_up_in_a_paused_front_is_still_a_stop_request() {
    let test = "a_stop_request_held_up_in_a_paused_front_is_still_a_stop_request";
    if let Some(why) = needs_program("strace", "strace") {
        return skip(test, &why);
    }
    let dir = temp_dir("reap-paused-front");
    let events = dir.join("events.jsonl");
    // The cleanup, the back's child, also reads the back's count of
    // wake-ups: the back is sure to be there while its cleanup runs.
    let show = "echo \"env status=$REAP_STATUS cause=$REAP_CAUSE\"; \
                echo \"back=$PPID $(grep ^voluntary_ctxt_switches /proc/$PPID/status)\"";
    let mut run = reap([
        "--events".as_ref(),
        events.as_os_str(),
        "-c".as_ref(),
        show.as_ref(),
        "--".as_ref(),
        sigprobe().as_ref(),
    ])
    .stderr_piped()
    .spawn();
    let probe = run.expect_ready(TIMEOUT);
    let front = run.pid();
    let back = back_of(front);
    let mut guard = Guard::new();
    guard.watch(back);
    guard.watch(probe.pid);
    let pause = Pause::first_write(front);
    let switches = procfs::voluntary_switches(back).unwrap_or(0);
    run.signal(libc::SIGTERM);
    // The back, COMMAND's parent, is the one process that signals its group.
    run.expect_line(&format!("got TERM pid={} from={back}", probe.pid), TIMEOUT);
    assert_eq!(
        run.expect_line("env ", TIMEOUT),
        "env status=0 cause=cancel"
    );
    let counted = run.expect_line(&format!("back={back} "), TIMEOUT);
    let woke = counted
        .split_whitespace()
        .last()
        .and_then(|n| n.parse::<u64>().ok())
        .map(|n| n.saturating_sub(switches));
    assert_eq!(
        run.wait_exit(TIMEOUT).code(),
        Some(0),
        "ends as COMMAND did"
    );
    drop(pause);
    // A handful of wake-ups (the record, COMMAND's exit), not one per
    // millisecond of the pause.
    assert!(
        woke.is_some_and(|n| n < 40),
        "the back woke {woke:?} times while the front was paused"
    );
    let log = std::fs::read_to_string(&events).unwrap_or_default();
    for event in ["\"event\":\"signal\"", "\"event\":\"stop\""] {
        assert!(
            log.lines().any(|l| l.contains(event)),
            "no {event} in the event log:\n{log}"
        );
    }
    assert!(guard.alive().is_empty(), "left: {:?}", guard.alive());
}

#[test]
fn the_back_signals_commands_whole_group_and_the_front_never_does() {
    let mut run = reap(["--", &sigprobe(), "--fork", "1"])
        .stderr_piped()
        .spawn();
    let readies = run.expect_readies(2, TIMEOUT);
    let back = back_of(run.pid());
    assert!(
        readies.iter().all(|r| r.pgid == readies[0].pgid),
        "{readies:?}"
    );
    for (sig, name) in [(libc::SIGUSR1, "USR1"), (libc::SIGTERM, "TERM")] {
        run.signal(sig);
        for r in &readies {
            run.expect_line(&format!("got {name} pid={} from={back}", r.pid), TIMEOUT);
        }
    }
    assert_eq!(run.wait_exit(TIMEOUT).code(), Some(0));
}

/// strace attached to `pid` (every system call, into `out`), until `pid`
/// ends; killed by PID on drop if it is still there.
struct Trace {
    tracer: std::process::Child,
}

impl Trace {
    fn attach(pid: i32, out: &std::path::Path) -> Trace {
        let tracer = strace_attached(pid, &[&"-o", &out]);
        Trace { tracer }
    }

    /// Its end, which follows the traced process's (or a kill at TIMEOUT).
    fn wait(&mut self) {
        let start = std::time::Instant::now();
        while self.tracer.try_wait().ok().flatten().is_none() {
            if start.elapsed() > TIMEOUT {
                let _ = self.tracer.kill();
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }
}

impl Drop for Trace {
    fn drop(&mut self) {
        if self.tracer.try_wait().ok().flatten().is_none() {
            let _ = self.tracer.kill();
            let _ = self.tracer.wait();
        }
    }
}

/// The system calls of a trace after the first `kill` of COMMAND's group
/// with `sig`, up to the next `ppoll`: their names. None if there is no
/// such kill.
fn between_kill_and_wait(trace: &str, group: i32, sig: &str) -> Option<Vec<String>> {
    let kill = format!("kill(-{group}, {sig})");
    let mut lines = trace.lines().skip_while(|l| !l.starts_with(&kill));
    lines.next()?;
    Some(
        lines
            .map(|l| l.split('(').next().unwrap_or(l).to_string())
            .take_while(|name| name != "ppoll")
            .collect(),
    )
}

#[test]
fn after_passing_a_stop_request_on_the_back_arms_the_grace_and_waits() {
    let test = "after_passing_a_stop_request_on_the_back_arms_the_grace_and_waits";
    if let Some(why) = needs_program("strace", "strace") {
        return skip(test, &why);
    }
    let dir = temp_dir("reap-kill-then-wait");
    let out = dir.join("back.strace");
    let mut run = reap(["--", &sigprobe()]).stderr_piped().spawn();
    let probe = run.expect_ready(TIMEOUT);
    let back = back_of(run.pid());
    let mut guard = Guard::new();
    guard.watch(back);
    guard.watch(probe.pid);
    let mut trace = Trace::attach(back, &out);
    run.signal(libc::SIGTERM);
    run.expect_line(&format!("got TERM pid={} from={back}", probe.pid), TIMEOUT);
    assert_eq!(
        run.wait_exit(TIMEOUT).code(),
        Some(0),
        "ends as COMMAND did"
    );
    trace.wait();
    let log = std::fs::read_to_string(&out).unwrap_or_default();
    // The grace counts from the kill: its one clock read comes after it
    // (a system call only where the vDSO cannot serve it, as under qemu's
    // TCG), and the timer is armed with the deadline itself, which takes
    // no second read. A 32-bit target calls the 64-bit time variants
    // (`timerfd_settime64`, `clock_gettime64`).
    let calls = between_kill_and_wait(&log, probe.pid, "SIGTERM");
    let names: Option<Vec<&str>> = calls.as_ref().map(|c| {
        c.iter()
            .map(|name| name.strip_suffix("64").unwrap_or(name))
            .collect()
    });
    assert!(
        matches!(
            names.as_deref(),
            Some(["timerfd_settime"] | ["clock_gettime", "timerfd_settime"])
        ),
        "between the kill of COMMAND's group and its next wait the back made {calls:?}:\n{log}"
    );
    assert!(guard.alive().is_empty(), "left: {:?}", guard.alive());
}

/// The names of the system calls of a trace between the wait that ended
/// last before the first line starting with `at` and that line. None if
/// no line starts with `at`.
fn between_wait_and(trace: &str, at: &str) -> Option<Vec<String>> {
    let lines: Vec<&str> = trace.lines().collect();
    let end = lines.iter().position(|l| l.starts_with(at))?;
    let start = lines[..end]
        .iter()
        .rposition(|l| l.starts_with("ppoll(") || l.contains("<... ppoll resumed>"))
        .map_or(0, |i| i + 1);
    Some(
        lines[start..end]
            .iter()
            .map(|l| l.split('(').next().unwrap_or(l).to_string())
            .collect(),
    )
}

/// strace of `TOOL -- sigprobe` (TOOL itself, into a file) while TERM is
/// passed on and COMMAND ends: the trace and COMMAND's pid.
fn traced_stop(tool: &str) -> (String, i32) {
    let dir = temp_dir(&format!("{tool}-kill-then-wait"));
    let out = dir.join("tool.strace");
    let mut run = Run::new(bin(tool))
        .args(["--", &sigprobe()])
        .stderr_piped()
        .spawn();
    let probe = run.expect_ready(TIMEOUT);
    let mut guard = Guard::new();
    guard.watch(probe.pid);
    let mut trace = Trace::attach(run.pid(), &out);
    run.signal(libc::SIGTERM);
    run.expect_line(
        &format!("got TERM pid={} from={}", probe.pid, run.pid()),
        TIMEOUT,
    );
    assert_eq!(
        run.wait_exit(TIMEOUT).code(),
        Some(0),
        "ends as COMMAND did"
    );
    trace.wait();
    assert!(guard.alive().is_empty(), "left: {:?}", guard.alive());
    (std::fs::read_to_string(&out).unwrap_or_default(), probe.pid)
}

/// pgwrap and graceful the same: a wake that brought no CHLD cannot tell
/// of a change of COMMAND's, so from the wake to the kill there is the one
/// read, and after the kill pgwrap's next system call is its wait,
/// graceful's the grace's timer and then its wait: no `waitid` before
/// COMMAND's handler runs.
#[test]
fn from_its_wake_to_its_wait_pgwrap_and_graceful_read_kill_and_arm_the_grace() {
    let test = "from_its_wake_to_its_wait_pgwrap_and_graceful_read_kill_and_arm_the_grace";
    if let Some(why) = needs_program("strace", "strace") {
        return skip(test, &why);
    }
    // The clock is read by the vDSO, or by a system call where it cannot
    // serve (qemu's TCG); a 32-bit target's calls end in 64.
    let names = |calls: Option<Vec<String>>| -> Vec<String> {
        (calls.unwrap_or_default().into_iter())
            .map(|name| name.strip_suffix("64").map(str::to_string).unwrap_or(name))
            .filter(|name| name != "clock_gettime")
            .collect()
    };
    for (tool, after) in [("pgwrap", &[][..]), ("graceful", &["timerfd_settime"][..])] {
        let (log, probe) = traced_stop(tool);
        let before = names(between_wait_and(&log, &format!("kill(-{probe}, SIGTERM)")));
        assert_eq!(
            before,
            ["read"],
            "from its wake to the kill {tool} made:\n{log}"
        );
        let calls = names(between_kill_and_wait(&log, probe, "SIGTERM"));
        assert_eq!(
            calls, after,
            "between the kill and its next wait {tool} made:\n{log}"
        );
    }
}

/// On the way of a signal, from each process's wake to its hand-over, the
/// one read of what woke it: no allocation that maps memory, no page of
/// its own mapped anew, no look at the kernel. Each costs a system call
/// or a fault, and on a busy CPU each delays COMMAND's handler.
#[test]
fn from_its_wake_to_the_kill_each_process_of_reap_reads_once() {
    let test = "from_its_wake_to_the_kill_each_process_of_reap_reads_once";
    if let Some(why) = needs_program("strace", "strace") {
        return skip(test, &why);
    }
    let dir = temp_dir("reap-wake-to-kill");
    let (front_out, back_out) = (dir.join("front.strace"), dir.join("back.strace"));
    let mut run = reap(["--", &sigprobe()]).stderr_piped().spawn();
    let probe = run.expect_ready(TIMEOUT);
    let front = run.pid();
    let back = back_of(front);
    let mut guard = Guard::new();
    guard.watch(back);
    guard.watch(probe.pid);
    let mut front_trace = Trace::attach(front, &front_out);
    let mut back_trace = Trace::attach(back, &back_out);
    run.signal(libc::SIGTERM);
    run.expect_line(&format!("got TERM pid={} from={back}", probe.pid), TIMEOUT);
    assert_eq!(run.wait_exit(TIMEOUT).code(), Some(0));
    front_trace.wait();
    back_trace.wait();
    let front_log = std::fs::read_to_string(&front_out).unwrap_or_default();
    let back_log = std::fs::read_to_string(&back_out).unwrap_or_default();
    let front_calls = between_wait_and(&front_log, "write(");
    assert_eq!(
        front_calls.as_deref(),
        Some(&["read".to_string()][..]),
        "from its wake to its hand-over the front made:\n{front_log}"
    );
    let back_calls = between_wait_and(&back_log, &format!("kill(-{}, SIGTERM)", probe.pid));
    assert_eq!(
        back_calls.as_deref(),
        Some(&["read".to_string()][..]),
        "from its wake to the kill the back made:\n{back_log}"
    );
    assert!(guard.alive().is_empty(), "left: {:?}", guard.alive());
}
