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

use crate::kit::{skip::needs_program, skip::skip, temp_dir, TIMEOUT};
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
        let tracer = Command::new("strace")
            .args(["-q", "-p", &pid.to_string(), "-e", "trace=write"])
            .args(["-e", "inject=write:delay_enter=400000:when=1"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start strace");
        procfs::wait_until("strace is attached", TIMEOUT, || {
            procfs::status_field(pid, "TracerPid").is_some_and(|t| t != "0")
        });
        Pause { tracer }
    }
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
    let show = "echo \"env status=$REAP_STATUS cause=$REAP_CAUSE\"";
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
    let woke = procfs::voluntary_switches(back).unwrap_or(0) - switches;
    assert_eq!(
        run.wait_exit(TIMEOUT).code(),
        Some(0),
        "ends as COMMAND did"
    );
    drop(pause);
    // A handful of wake-ups (the record, COMMAND's exit, the cleanup), not
    // one per millisecond of the pause.
    assert!(
        woke < 40,
        "the back woke {woke} times while the front was paused"
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
