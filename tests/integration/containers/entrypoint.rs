//! reap as the image's ENTRYPOINT, PID 1 of the container. Each test has a
//! twin without reap (the job itself, or a shell, as PID 1) whose failure
//! is the reason to use it; a twin's failure message is printed.

use super::{enter, image, Container, Image};
use crate::kit::TIMEOUT;
use std::time::Duration;

/// The stop timeout of these tests, docker stop's default.
const STOP_TIMEOUT: u64 = 10;

/// The cleanup of these tests: its line lands in `docker logs`.
const SHOW_ENV: &str = "echo cleanup cause=$REAP_CAUSE status=$REAP_STATUS";

/// What a stopped container showed.
struct Stopped {
    took: Duration,
    code: i32,
    logs: String,
}

/// reap's promise for a TERM-ignoring job under `reap -g 1s`, as a check.
fn stop_promise(s: &Stopped) -> Result<(), String> {
    // Lower bound exact (the grace), upper bound loose: well inside the
    // stop timeout, which is what it takes without reap.
    if s.took < Duration::from_secs(1) || s.took >= Duration::from_secs(STOP_TIMEOUT - 2) {
        return Err(format!(
            "docker stop -t {STOP_TIMEOUT} took {:?}, not about the 1 s grace",
            s.took
        ));
    }
    if !s.logs.contains("cleanup cause=cancel status=137") {
        return Err(format!("no cleanup line in docker logs:\n{}", s.logs));
    }
    if s.code != 128 + libc::SIGKILL {
        return Err(format!("exit code {}, not 128+9", s.code));
    }
    Ok(())
}

fn stop_and_look(c: &Container) -> Stopped {
    let took = c.stop(STOP_TIMEOUT);
    Stopped {
        took,
        code: c.exit_code(),
        logs: c.logs(),
    }
}

#[test]
fn entrypoint_stop_takes_the_grace_runs_the_cleanup_and_exits_128_plus_9() {
    let Some(_slot) =
        enter("entrypoint_stop_takes_the_grace_runs_the_cleanup_and_exits_128_plus_9")
    else {
        return;
    };
    let img = image(Image::Tools);
    let job = ["/usr/bin/sigprobe", "--ignore", "TERM"];
    let with = Container::start(
        "entrypoint",
        &[
            &[
                "--entrypoint",
                "/usr/bin/reap",
                img,
                "-g",
                "1s",
                "-c",
                SHOW_ENV,
                "--",
            ][..],
            &job,
        ]
        .concat(),
    );
    // Twin: the job itself as PID 1 (the ENTRYPOINT without reap).
    let without = Container::start(
        "entrypoint-twin",
        &[&["--entrypoint", job[0], img][..], &job[1..]].concat(),
    );
    with.expect_log("ready pid=", TIMEOUT);
    without.expect_log("ready pid=", TIMEOUT);
    // Both stops at once: the twin takes the whole stop timeout.
    let twin = std::thread::spawn(move || (stop_and_look(&without), without));
    let got = stop_and_look(&with);
    let (twin_got, _without) = twin.join().unwrap();
    if let Err(e) = stop_promise(&got) {
        panic!("with reap: {e}");
    }
    match stop_promise(&twin_got) {
        Ok(()) => panic!("the twin without reap kept the promise: the test proves nothing"),
        Err(e) => eprintln!("entrypoint twin (no reap) fails as expected: {e}"),
    }
}

#[test]
fn entrypoint_exit_code_is_the_jobs() {
    let Some(_slot) = enter("entrypoint_exit_code_is_the_jobs") else {
        return;
    };
    let img = image(Image::Tools);
    let job = "echo job; exit 3";
    let with = Container::start(
        "exit3",
        &["--entrypoint", "/usr/bin/reap", img, "-c", SHOW_ENV, "--"]
            .iter()
            .chain(&["sh", "-c", job])
            .copied()
            .collect::<Vec<_>>(),
    );
    assert_eq!(with.exit_code(), 3, "{}", with.logs());
    assert!(
        with.logs().contains("cleanup cause=exit status=3"),
        "{}",
        with.logs()
    );
    // Twin: the usual shell entrypoint, job then cleanup: the cleanup's
    // status replaces the job's.
    let script = format!(
        "{job_in_sub}; {SHOW_ENV}",
        job_in_sub = "(echo job; exit 3)"
    );
    let without = Container::start(
        "exit3-twin",
        &["--entrypoint", "/bin/sh", img, "-c", &script],
    );
    let code = without.exit_code();
    assert_ne!(
        code, 3,
        "the twin kept the job's status: the test proves nothing"
    );
    eprintln!("exit-code twin (sh: job; cleanup) fails as expected: exit code {code}, not 3");
}

#[test]
fn entrypoint_passes_docker_kill_signals_to_the_command() {
    let Some(_slot) = enter("entrypoint_passes_docker_kill_signals_to_the_command") else {
        return;
    };
    let img = image(Image::Tools);
    let with = Container::start(
        "usr1",
        &[
            "--entrypoint",
            "/usr/bin/reap",
            img,
            "--",
            "/usr/bin/sigprobe",
        ],
    );
    // Twin: a shell as PID 1 running the job (it has no USR1 handler, so
    // the kernel drops the signal sent to PID 1).
    let without = Container::start(
        "usr1-twin",
        &[
            "--entrypoint",
            "/bin/sh",
            img,
            "-c",
            "/usr/bin/sigprobe; echo job ended",
        ],
    );
    let ready = with.expect_log("ready pid=", TIMEOUT);
    without.expect_log("ready pid=", TIMEOUT);
    for c in [&with, &without] {
        super::docker_ok(&["kill", "-s", "USR1", &c.name]);
    }
    let got = with.expect_log("got USR1", TIMEOUT);
    assert!(
        got.contains(&format!("pid={}", crate::reap_kit::field(&ready, "pid"))),
        "{got}"
    );
    // The twin: a bounded look, since what is checked is an absence.
    std::thread::sleep(Duration::from_secs(2));
    let logs = without.logs();
    assert!(
        !logs.contains("got USR1"),
        "the twin's job got USR1: the test proves nothing"
    );
    eprintln!("USR1 twin (sh as PID 1) fails as expected: the job never got USR1");
}

#[test]
fn cleanup_exec_runs_in_an_image_with_no_shell() {
    let Some(_slot) = enter("cleanup_exec_runs_in_an_image_with_no_shell") else {
        return;
    };
    let img = image(Image::NoShell);
    // Nothing but reap and sigprobe: no /bin/sh.
    let out = super::docker(&[
        "run",
        "--rm",
        "--network",
        "none",
        "--entrypoint",
        "/bin/sh",
        img,
        "-c",
        "true",
    ]);
    assert!(!out.status.success(), "{img} has a /bin/sh");
    let cleanup = ["/sigprobe", "--env", "REAP_", "--sleep-ms", "1"];
    let start = |tag: &str, cleanup_opt: &[&str]| {
        let argv = [
            &["--entrypoint", "/reap", img, "-g", "1s"][..],
            cleanup_opt,
            &["--", "/sigprobe"],
        ]
        .concat();
        Container::start(tag, &argv)
    };
    let with = start(
        "noshell",
        &[&["--cleanup-exec"][..], &cleanup, &[";"]].concat(),
    );
    // Twin: the same cleanup as a shell command.
    let without = start("noshell-twin", &["--cleanup", &cleanup.join(" ")]);
    with.expect_log("ready pid=", TIMEOUT);
    without.expect_log("ready pid=", TIMEOUT);
    with.stop(STOP_TIMEOUT);
    without.stop(STOP_TIMEOUT);
    let logs = with.logs();
    for line in [
        "env REAP_CAUSE=cancel",
        "env REAP_SIGNAL=",
        "env REAP_STATUS=0",
    ] {
        assert!(logs.lines().any(|l| l == line), "no {line:?} in:\n{logs}");
    }
    assert_eq!(with.exit_code(), 0, "{logs}");
    let twin_logs = without.logs();
    assert!(
        !twin_logs.contains("env REAP_CAUSE"),
        "the twin's cleanup ran: the test proves nothing"
    );
    eprintln!(
        "no-shell twin (--cleanup) fails as expected: exit code {}, the cleanup never ran:\n{}",
        without.exit_code(),
        twin_logs.trim()
    );
}
