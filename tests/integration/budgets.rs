//! Budgets along a chain: a cap announced at start (even without -v) when
//! an outer grace is shorter than an inner one, reap's drain delay
//! (`--stop-delay`), the survivors reap names when a grace runs out (even
//! without -v), and `--stop-all`.

use crate::kit::{bin, said, Run, TIMEOUT};
use crate::procfs;
use crate::reap_kit::{back_of, reap, sigprobe, Guard};
use std::time::Duration;

/// The lines of `err` that announce a cap.
fn caps(err: &str) -> Vec<&str> {
    err.lines().filter(|l| l.contains("grace capped")).collect()
}

/// `reap -- graceful --grace 30s`: reap's default 5 s reaches graceful as
/// GRACEFUL_GRACE_MS=5000; graceful caps itself at 4.5 s and says so at
/// start, one line, without -v.
#[test]
fn reap_with_its_default_grace_over_graceful_30s_announces_the_cap() {
    let mut run = reap(["--", bin("graceful").to_str().unwrap(), "--grace", "30s"])
        .args(["--", "true"])
        .env_remove("GRACEFUL_GRACE_MS")
        .stderr_piped()
        .spawn();
    assert_eq!(run.wait_exit(TIMEOUT).code(), Some(0));
    let err = run.stderr_all();
    assert_eq!(err.lines().count(), 1, "one line: {err:?}");
    assert!(
        said(err.trim_end(), "graceful")
            .is_some_and(|m| m.starts_with("grace capped at 4.5s by GRACEFUL_GRACE_MS=5000")),
        "{err:?}"
    );
}

/// An inner graceful whose outer grace is shorter: capped at the outer's
/// minus the margin, announced; with budgets that agree, nothing is said.
#[test]
fn an_inner_graceful_longer_than_its_outer_one_announces_the_cap() {
    let chain = |outer: &str, inner: &str| {
        let mut run = Run::new(bin("graceful"))
            .args(["--grace", outer, "--"])
            .arg(bin("graceful"))
            .args(["--grace", inner, "--", "true"])
            .env_remove("GRACEFUL_GRACE_MS")
            .stderr_piped()
            .spawn();
        assert_eq!(run.wait_exit(TIMEOUT).code(), Some(0));
        run.stderr_all()
    };
    let err = chain("2s", "10s");
    assert_eq!(err.lines().count(), 1, "{err:?}");
    assert!(
        said(err.trim_end(), "graceful")
            .is_some_and(|m| m.starts_with("grace capped at 1.5s by GRACEFUL_GRACE_MS=2000")),
        "{err:?}"
    );
    assert_eq!(caps(&chain("10s", "5s")), Vec::<&str>::new());
    let err = reap(["-g", "10s", "--", bin("graceful").to_str().unwrap()])
        .args(["--grace", "5s", "--", "true"])
        .stderr_piped()
        .spawn()
        .stderr_all();
    assert_eq!(err, "", "budgets that agree: nothing said");
}

/// reap exports its grace, in ms, and removes the variable for inf.
#[test]
fn reap_exports_its_grace_to_command() {
    let show = |grace: &str| {
        let mut run = reap(["-g", grace, "--", "sh", "-c"])
            .arg("echo \"budget=${GRACEFUL_GRACE_MS-unset}\"")
            .env("GRACEFUL_GRACE_MS", "77")
            .spawn();
        let line = run.expect_line("budget=", TIMEOUT);
        assert_eq!(run.wait_exit(TIMEOUT).code(), Some(0));
        line
    };
    assert_eq!(show("2.5s"), "budget=2500");
    assert_eq!(show("inf"), "budget=unset");
}

/// `reap --stop-delay`: the stop request reaches COMMAND no earlier than
/// the delay after it reached reap (a lower bound: the time is taken before
/// the signal is sent).
#[test]
fn reap_passes_the_stop_request_on_after_the_stop_delay() {
    crate::grace::term_arrives_after_the_stop_delay(
        reap(["--stop-delay", "700ms", "-g", "5s", "--", &sigprobe()]).spawn(),
    );
}

/// A second stop request ends reap's delay at once: with a delay far beyond
/// the test's patience, COMMAND still gets the first request's signal.
#[test]
fn a_second_stop_request_ends_reaps_stop_delay() {
    let mut run = reap(["--stop-delay", "10m", "-g", "5s", "--", &sigprobe()]).spawn();
    let probe = run.expect_ready(TIMEOUT);
    run.signal(libc::SIGTERM);
    // Other signals pass on during the delay: USR1's line is the handshake
    // that the TERM before it was read and held.
    run.signal(libc::SIGUSR1);
    run.expect_line(&format!("got USR1 pid={}", probe.pid), TIMEOUT);
    assert!(
        !run.lines_so_far().iter().any(|l| l.starts_with("got TERM")),
        "TERM went out before the delay or a second request"
    );
    run.signal(libc::SIGINT);
    run.expect_line(&format!("got TERM pid={}", probe.pid), TIMEOUT);
    assert_eq!(run.wait_exit(TIMEOUT).code(), Some(0));
    assert!(
        !run.lines_so_far().iter().any(|l| l.starts_with("got INT")),
        "the second request ends the delay; the first is what is passed on"
    );
}

#[test]
fn an_infinite_stop_delay_is_refused_by_reap() {
    crate::command_line::assert_rejected(
        "reap",
        &[
            &["--stop-delay", "inf", "--"],
            &["--stop-delay=infinity", "--"],
        ],
    );
}

/// `--events` to a path that cannot be created, or to a descriptor that is
/// not open: 125, one line, nothing started; in each tool.
#[test]
fn an_unusable_event_log_is_refused_before_anything_starts() {
    for tool in ["pgwrap", "graceful", "reap"] {
        crate::command_line::assert_rejected(
            tool,
            &[
                &["--events", "/nonexistent-dir/sub/events.jsonl", "--"],
                &["--events", "987", "--"],
                &["--events=/", "--"],
            ],
        );
    }
}

/// When a grace of reap runs out, every survivor is named on stderr, even
/// without -v, before the KILL: one that ignores TERM, one that blocks it,
/// one that catches it, and one in uninterruptible sleep (a vfork parent,
/// state D, until its child exits; it ignores TERM, or TERM's default
/// action would end even a D sleep of that kind).
#[test]
fn reap_names_the_survivors_with_the_reason_when_the_grace_runs_out() {
    let script = r#"
        perl -e '$0="ignorer"; $SIG{TERM}="IGNORE"; $|=1; print "up ignorer $$\n"; sleep 30' &
        perl -e 'use POSIX; $0="blocker"; sigprocmask(SIG_BLOCK, POSIX::SigSet->new(15)); $|=1; print "up blocker $$\n"; sleep 30' &
        perl -e '$0="catcher"; $SIG{TERM}=sub{}; $|=1; print "up catcher $$\n"; while (1) { sleep 30 }' &
        perl -e '$0="dsleeper"; $SIG{TERM}="IGNORE"; $|=1; print "up dsleeper $$\n"; if (syscall(58) == 0) { sleep 30; syscall(60, 0) } sleep 30' &
        wait
    "#;
    let mut run = reap(["--grace", "1s", "--", "sh", "-c", script])
        .stderr_piped()
        .spawn();
    let mut guard = Guard::new();
    let mut pids = Vec::new();
    for who in ["ignorer", "blocker", "catcher", "dsleeper"] {
        let line = run.expect_line(&format!("up {who} "), TIMEOUT);
        let pid: i32 = line.rsplit(' ').next().unwrap().parse().unwrap();
        guard.watch_tree(pid);
        pids.push(pid);
    }
    let dsleeper = pids[3];
    procfs::wait_until("the vfork parent sleeps in state D", TIMEOUT, || {
        procfs::state(dsleeper) == Some('D')
    });
    run.signal(libc::SIGTERM);
    run.wait_exit(TIMEOUT);
    let err = run.stderr_all();
    for (who, why) in [
        ("ignorer", "it ignores TERM".to_string()),
        ("blocker", "it blocks TERM".to_string()),
        (
            "catcher",
            "it catches TERM and its handler has not ended it".to_string(),
        ),
        (
            "dsleeper",
            "it is in uninterruptible sleep (state D): TERM waits until it wakes".to_string(),
        ),
    ] {
        let pid = pids[["ignorer", "blocker", "catcher", "dsleeper"]
            .iter()
            .position(|w| *w == who)
            .unwrap()];
        let want = format!("pid {pid} ({who}) is still running after the grace: {why}");
        assert!(
            err.lines().any(|l| said(l, "reap") == Some(&want)),
            "no survivor line {want:?} in: {err}"
        );
    }
    guard.wait_all_gone("every survivor is killed", TIMEOUT);
}

/// `--stop-all`: the stop request reaches an escapee (its own session) at
/// once, while COMMAND still runs; without it, the escapee is left to the
/// grace's end (here: COMMAND never exits on TERM, so KILL, never TERM).
#[test]
fn stop_all_sends_the_stop_signal_to_an_escapee_while_command_runs() {
    for stop_all in [true, false] {
        let mut args = vec!["-g", "1s"];
        if stop_all {
            args.push("--stop-all");
        }
        let probe = sigprobe();
        args.extend(["--", &probe, "--escape", "1", "--exit-on", "none"]);
        let mut run = reap(args).stderr_piped().spawn();
        let readies = run.expect_readies(2, TIMEOUT);
        let mut guard = Guard::new();
        for r in &readies {
            guard.watch(r.pid);
        }
        let main = readies.iter().find(|r| r.role == "main").unwrap().pid;
        let escapee = readies.iter().find(|r| r.role == "escapee").unwrap().pid;
        let back = back_of(run.pid());
        run.signal(libc::SIGTERM);
        run.expect_line(&format!("got TERM pid={main} from="), TIMEOUT);
        if stop_all {
            run.expect_line(&format!("got TERM pid={escapee} from={back}"), TIMEOUT);
            assert!(
                procfs::alive(main) && !procfs::is_zombie(main),
                "COMMAND still runs when the escapee got TERM"
            );
        }
        run.wait_exit(TIMEOUT);
        let got = run
            .lines_so_far()
            .iter()
            .any(|l| l.starts_with(&format!("got TERM pid={escapee} ")));
        assert_eq!(
            got,
            stop_all,
            "--stop-all {stop_all}: {:?}",
            run.lines_so_far()
        );
        let err = run.stderr_all();
        assert!(
            (err.lines().filter_map(|l| said(l, "reap")))
                .any(|m| m.starts_with(&format!("pid {escapee} ("))),
            "the escapee, still there at the deadline, is named: {err}"
        );
        guard.wait_all_gone("the tree is killed", TIMEOUT);
    }
}

/// `--events` adds no wakeup while idle: neither reap process (front and
/// back) is woken while COMMAND sleeps, the log open.
#[test]
fn reap_with_an_event_log_does_not_wake_up_while_idle() {
    let dir = crate::kit::temp_dir("events-idle");
    let log = dir.join("events.jsonl");
    let mut run = reap([
        "--events".into(),
        log.display().to_string(),
        "--".into(),
        sigprobe(),
    ])
    .spawn();
    let probe = run.expect_ready(TIMEOUT);
    let front = run.pid();
    let back = back_of(front);
    for pid in [front, back] {
        procfs::wait_until("reap sleeps", TIMEOUT, || procfs::state(pid) == Some('S'));
    }
    // Let both finish what they were doing (the start's events).
    std::thread::sleep(Duration::from_millis(300));
    let count = || procfs::ctxt_switches(front).unwrap() + procfs::ctxt_switches(back).unwrap();
    let before = count();
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(count(), before, "reap woke up while idle with --events");
    run.signal(libc::SIGTERM);
    run.expect_line(&format!("got TERM pid={}", probe.pid), TIMEOUT);
    assert_eq!(run.wait_exit(TIMEOUT).code(), Some(0));
}

/// `reap -- graceful -- true` with every default: graceful's default 10 s
/// takes reap's 5 s budget (4.5 s) silently; the user set no grace.
#[test]
fn a_default_grace_takes_the_budget_silently() {
    let mut run = reap(["--", bin("graceful").to_str().unwrap()])
        .args(["--", "true"])
        .env_remove("GRACEFUL_GRACE_MS")
        .stderr_piped()
        .spawn();
    assert_eq!(run.wait_exit(TIMEOUT).code(), Some(0));
    let err = run.stderr_all();
    assert_eq!(err, "", "nothing said");
    // The cap still applies: what graceful exports is the budget's 4.5 s.
    let mut run = reap(["--", bin("graceful").to_str().unwrap()])
        .args(["--", "sh", "-c", "echo ready grace=$GRACEFUL_GRACE_MS"])
        .env_remove("GRACEFUL_GRACE_MS")
        .stderr_piped()
        .spawn();
    run.expect_line("ready grace=4500", TIMEOUT);
    assert_eq!(run.wait_exit(TIMEOUT).code(), Some(0));
    assert_eq!(run.stderr_all(), "");
}

/// reap's survivors say what is true: an escapee (its own session, no
/// `--stop-all`) was never sent the stop signal, and is not said to have
/// resisted it; an inner pgwrap, only waiting for its COMMAND, is never
/// named, the process below it is.
#[test]
fn reap_names_an_unsent_escapee_as_such_and_sees_through_pgwrap() {
    let probe = sigprobe();
    let script = format!("setsid sleep 100 & echo up $!; exec {probe} --exit-on none");
    let mut run = reap(["--grace", "1s", "--", bin("pgwrap").to_str().unwrap()])
        .args(["--", "sh", "-c", &script])
        .stderr_piped()
        .spawn();
    let line = run.expect_line("up ", TIMEOUT);
    let sleep: i32 = line[3..].trim().parse().unwrap();
    let job = run.expect_ready(TIMEOUT);
    let mut guard = Guard::new();
    guard.watch(sleep);
    guard.watch_tree(run.pid());
    let pgwrap = procfs::ppid(job.pid).unwrap();
    // `setsid` has run and become sleep: it left the group for good.
    procfs::wait_until("the escapee is in a session of its own", TIMEOUT, || {
        procfs::sid(sleep) == Some(sleep)
            && procfs::cmdline(sleep).is_some_and(|c| c.first().is_some_and(|a| a == "sleep"))
    });
    run.signal(libc::SIGTERM);
    run.wait_exit(TIMEOUT);
    let err = run.stderr_all();
    let want =
        format!("pid {sleep} (sleep) is still running after the grace: it was not sent TERM");
    assert!(
        err.lines()
            .any(|l| said(l, "reap").is_some_and(|m| m.starts_with(&want))),
        "no {want:?} in:\n{err}"
    );
    let want = format!(
        "pid {} (sigprobe) is still running after the grace: it blocks TERM",
        job.pid
    );
    assert!(
        err.lines()
            .any(|l| said(l, "reap").is_some_and(|m| m.starts_with(&want))),
        "no {want:?} in:\n{err}"
    );
    assert!(
        !err.contains(&format!("pid {pgwrap} ")),
        "pgwrap, only waiting for its COMMAND, is blamed:\n{err}"
    );
    guard.wait_all_gone("every survivor is killed", TIMEOUT);
}
