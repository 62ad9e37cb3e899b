//! graceful's options and environment: which signals trigger the stop, which
//! are passed on or dropped, `GRACEFUL_GRACE_MS` and the nested cap, bad
//! input, and the man page covering every option of `--help`.

use crate::command_line::assert_rejected;
use crate::grace::{graceful, graceful_sh, probe_path, Death, SLACK};
use crate::kit::{bin, Run, TIMEOUT};
use crate::procfs;
use std::os::unix::process::ExitStatusExt;
use std::time::{Duration, Instant};

fn rtmin(n: i32) -> i32 {
    libc::SIGRTMIN() + n
}

#[test]
fn on_sets_the_triggers_and_drops_the_default_ones() {
    let mut run = graceful(&["--on", "USR1", "-v"], &["--exit-on", "USR1"]);
    let probe = run.expect_ready(TIMEOUT);
    run.signal(libc::SIGTERM);
    // WINCH (forwarded, numbered above TERM) as a barrier: a TERM passed on
    // would be reported before it.
    run.signal(libc::SIGWINCH);
    run.expect_line(&format!("got WINCH pid={}", probe.pid), TIMEOUT);
    assert!(
        procfs::alive(run.pid()),
        "graceful must not die of a dropped TERM"
    );
    run.signal(libc::SIGUSR1);
    run.expect_line(
        &format!("got USR1 pid={} from={}", probe.pid, run.pid()),
        TIMEOUT,
    );
    assert_eq!(run.wait_exit(TIMEOUT).code(), Some(0));
    assert!(!run.lines_so_far().iter().any(|l| l.starts_with("got TERM")));
    let err = run.stderr_all();
    assert!(
        err.contains("received TERM") && err.contains("dropped"),
        "{err}"
    );
    assert!(
        err.contains("received USR1") && err.contains("stop trigger"),
        "{err}"
    );
}

#[test]
fn on_wins_over_forward() {
    // USR1 in both lists: it starts the ladder (so KILL follows the grace),
    // it is not merely passed on.
    let mut run = graceful(
        &["--on", "USR1", "--forward", "USR1,USR2", "--grace", "300ms"],
        &["--exit-on", "none"],
    );
    let probe = run.expect_ready(TIMEOUT);
    run.signal(libc::SIGUSR2);
    run.expect_line(&format!("got USR2 pid={}", probe.pid), TIMEOUT);
    run.signal(libc::SIGUSR1);
    run.expect_line(&format!("got USR1 pid={}", probe.pid), TIMEOUT);
    assert_eq!(run.wait_exit(TIMEOUT).signal(), Some(libc::SIGKILL));
}

#[test]
fn forward_passes_on_and_every_other_signal_is_dropped() {
    let mut run = graceful(&["-v"], &[]);
    let probe = run.expect_ready(TIMEOUT);
    for sig in [libc::SIGUSR1, libc::SIGUSR2] {
        run.signal(sig);
    }
    run.expect_line(
        &format!("got USR1 pid={} from={}", probe.pid, run.pid()),
        TIMEOUT,
    );
    run.expect_line(
        &format!("got USR2 pid={} from={}", probe.pid, run.pid()),
        TIMEOUT,
    );
    for sig in [
        libc::SIGALRM,
        libc::SIGPIPE,
        libc::SIGVTALRM,
        rtmin(1),
        libc::SIGCONT,
    ] {
        run.signal(sig);
    }
    run.signal(libc::SIGWINCH);
    run.expect_line(&format!("got WINCH pid={}", probe.pid), TIMEOUT);
    procfs::wait_until("the drops are logged", TIMEOUT, || {
        run.stderr_so_far().matches("dropped").count() >= 5
    });
    assert!(
        procfs::alive(run.pid()),
        "graceful must not die of a dropped signal"
    );
    run.signal(libc::SIGTERM);
    assert_eq!(run.wait_exit(TIMEOUT).code(), Some(0));
    let unexpected = ["ALRM", "PIPE", "VTALRM", "RTMIN", "CONT"];
    let lines = run.lines_so_far();
    assert!(
        !lines.iter().any(|l| unexpected
            .iter()
            .any(|s| l.starts_with(&format!("got {s}")))),
        "{lines:?}"
    );

    // A forward list replaces the default; HUP is passed on, not a trigger.
    let mut run = graceful(
        &["--on", "TERM", "--forward", "HUP"],
        &["--exit-on", "TERM"],
    );
    let probe = run.expect_ready(TIMEOUT);
    run.signal(libc::SIGUSR1);
    run.signal(libc::SIGHUP);
    run.expect_line(&format!("got HUP pid={}", probe.pid), TIMEOUT);
    assert!(procfs::alive(probe.pid) && procfs::alive(run.pid()));
    run.signal(libc::SIGTERM);
    assert_eq!(run.wait_exit(TIMEOUT).code(), Some(0));
    assert!(!run.lines_so_far().iter().any(|l| l.starts_with("got USR1")));
}

#[test]
fn verbose_lines_are_prefixed_and_name_the_decisions() {
    let mut run = graceful(&["-v", "--grace", "300ms"], &["--exit-on", "none"]);
    run.expect_ready(TIMEOUT);
    run.signal(libc::SIGTERM);
    run.wait_exit(TIMEOUT);
    let err = run.stderr_all();
    let prefix = format!("graceful[{}]: ", run.pid());
    for line in err.lines() {
        // The survivors, named even without -v, too.
        assert!(line.starts_with(&prefix), "{line:?}");
    }
    for needle in [
        "stop trigger",
        "sent TERM to group",
        "grace period started",
        "sent KILL",
    ] {
        assert!(err.contains(needle), "{needle:?} missing in:\n{err}");
    }
}

/// Durations are said as given (not what is left of them when the line is
/// written: "999 ms" for 1s), in one form: `1s`, `30s`, `250ms`, `4.5s`.
#[test]
fn durations_are_said_in_one_form_as_given() {
    let mut run = graceful(
        &["-v", "--stop-delay", "1s", "--grace", "250ms"],
        &["--exit-on", "none"],
    );
    run.expect_ready(TIMEOUT);
    run.signal(libc::SIGTERM);
    run.wait_exit(TIMEOUT);
    let err = run.stderr_all();
    assert!(
        err.contains("the stop signal goes out in 1s (or at the next trigger)"),
        "{err}"
    );
    assert!(err.contains("grace period started: KILL in 250ms"), "{err}");
    assert!(!err.contains(" ms"), "{err}");
    let mut run = graceful(&["-v", "--grace", "30s"], &["--exit-on", "TERM"]);
    run.expect_ready(TIMEOUT);
    run.signal(libc::SIGTERM);
    run.wait_exit(TIMEOUT);
    let err = run.stderr_all();
    assert!(err.contains("grace 30s"), "{err}");
    assert!(err.contains("grace period started: KILL in 30s"), "{err}");
}

/// COMMAND's view of the variable: its value or `unset`.
fn exported(opts: &[&str], env: Option<&str>) -> (String, String) {
    let mut builder = Run::new(bin("graceful"))
        .arg("-v")
        .args(opts)
        .args([
            "--",
            "sh",
            "-c",
            "echo \"GRACE=${GRACEFUL_GRACE_MS-unset}\"",
        ])
        .stderr_piped();
    builder = match env {
        Some(v) => builder.env("GRACEFUL_GRACE_MS", v),
        None => builder.env_remove("GRACEFUL_GRACE_MS"),
    };
    let mut run = builder.spawn();
    let line = run.expect_line("GRACE=", TIMEOUT);
    assert_eq!(run.wait_exit(TIMEOUT).code(), Some(0));
    (line["GRACE=".len()..].to_string(), run.stderr_all())
}

#[test]
fn command_gets_the_grace_in_milliseconds() {
    assert_eq!(exported(&[], None).0, "10000", "the default grace");
    assert_eq!(exported(&["--grace", "2.5s"], None).0, "2500");
    assert_eq!(exported(&["-g", "1m"], None).0, "60000");
    assert_eq!(exported(&["-g", "0"], None).0, "0");
    assert_eq!(exported(&["-g", "inf"], None).0, "unset");
}

#[test]
fn an_outer_budget_caps_the_grace_with_a_margin() {
    let (value, err) = exported(&["--grace", "10s"], Some("2000"));
    assert_eq!(value, "1500");
    assert!(
        err.contains("grace capped at 1.5s by GRACEFUL_GRACE_MS=2000"),
        "{err}"
    );
    // Within the budget: unchanged.
    let (value, err) = exported(&["--grace", "1s"], Some("2000"));
    assert_eq!(value, "1000");
    assert!(!err.contains("capped"), "{err}");
    // inf is capped too; an outer grace no larger than the margin leaves 0.
    assert_eq!(exported(&["--grace", "inf"], Some("30000")).0, "29500");
    assert_eq!(exported(&[], Some("300")).0, "0");
    // Not a number of milliseconds: ignored, and said with -v.
    for junk in ["abc", "", "-5", "1.5", "10s"] {
        let (value, err) = exported(&["--grace", "3s"], Some(junk));
        assert_eq!(value, "3000", "{junk:?}");
        assert!(
            err.contains("ignoring GRACEFUL_GRACE_MS"),
            "{junk:?}: {err}"
        );
    }
}

#[test]
fn nested_graceful_escalates_before_the_outer_one() {
    // outer grace 4 s => inner grace 3.5 s: the inner kills its group and
    // exits before the outer's deadline, so the outer never escalates.
    let p = probe_path();
    let inner = format!(
        "exec '{}' -v --grace 30s -- {p} --exit-on none",
        bin("graceful").display()
    );
    let mut run = graceful_sh(&["-v", "--grace", "4s"], &inner);
    let probe = run.expect_ready(TIMEOUT);
    let death = Death::watch(probe.pid);
    let sent = Instant::now();
    run.signal(libc::SIGTERM);
    run.expect_line(&format!("got TERM pid={}", probe.pid), TIMEOUT);
    let dead = death.wait(Duration::from_secs(4) + SLACK);
    assert!(
        dead >= sent + Duration::from_millis(3500),
        "inner killed early"
    );
    let status = run.wait_exit(TIMEOUT);
    assert_eq!(
        status.signal(),
        Some(libc::SIGKILL),
        "killed, and said so up the chain"
    );
    let err = run.stderr_all();
    let inner_pid = probe.ppid;
    let outer = format!("graceful[{}]: ", run.pid());
    let inner = format!("graceful[{inner_pid}]: ");
    // The cap is said even without -v, by the inner one, with its pid.
    assert_eq!(
        err.matches(&format!("{inner}grace capped at 3.5s")).count(),
        1,
        "{err}"
    );
    assert!(err.contains(&format!("{inner}sent KILL")), "{err}");
    assert!(
        !err.contains(&format!("{outer}sent KILL")),
        "the outer escalated:\n{err}"
    );
}

#[test]
fn graceful_rejects_malformed_invocations() {
    assert_rejected(
        "graceful",
        &[
            &["--bogus"],
            &["-x"],
            &["--grace"],
            &["--grace", "10x"],
            &["--grace", "-1"],
            &["--grace=1e3x"],
            &["-g", ""],
            &["--timeout", "1.2.3"],
            &["-t", "5S"],
            &["--signal", "FOO"],
            &["--signal", "0"],
            &["-s", "65"],
            &["--kill-signal", "RTMIN+99"],
            &["-k", "SIGNOPE"],
            // timeout's -k DURATION: never read as signal 5 (TRAP).
            &["-k", "5"],
            &["-k5"],
            &["--kill-signal=9"],
            &["--kill-after", "5x"],
            &["--on", "KILL"],
            &["--on", "CHLD"],
            &["--on", ""],
            &["--on", "TERM,,INT"],
            &["--forward", "STOP"],
            &["-f", "TERM,"],
            &["--pdeathsig", "bogus"],
            &["--preserve-status=yes"],
            &["--foreground=1"],
            &["--help=x"],
        ],
    );
}

#[test]
fn graceful_without_command_is_125() {
    for args in [&[][..], &["-v"], &["--"], &["-g", "5"]] {
        let mut run = Run::new(bin("graceful")).args(args).stderr_piped().spawn();
        assert_eq!(run.wait_exit(TIMEOUT).code(), Some(125), "{args:?}");
        let err = run.stderr_all();
        assert!(err.starts_with("graceful: missing COMMAND"), "{err}");
        assert_eq!(err.lines().count(), 1, "{err}");
    }
}

#[test]
fn exit_codes_pass_through_and_126_127() {
    for code in [0, 3, 255] {
        let mut run = graceful_sh(&[], &format!("exit {code}"));
        assert_eq!(run.wait_exit(TIMEOUT).code(), Some(code));
    }
    for (cmd, code) in [("no-such-command-anywhere", 127), ("/etc", 126)] {
        let mut run = Run::new(bin("graceful"))
            .args(["--", cmd])
            .stderr_piped()
            .spawn();
        assert_eq!(run.wait_exit(TIMEOUT).code(), Some(code), "{cmd}");
        let err = run.stderr_all();
        assert!(
            err.starts_with(&format!("graceful[{}]: ", run.pid())) && err.lines().count() == 1,
            "{err}"
        );
    }
}

#[test]
fn help_version_and_man_page() {
    let mut run = Run::new(bin("graceful")).arg("-V").spawn();
    run.expect_line(&format!("graceful {}", env!("CARGO_PKG_VERSION")), TIMEOUT);
    assert_eq!(run.wait_exit(TIMEOUT).code(), Some(0));
    crate::docs::check_tool("graceful");
    let page = concat!(env!("CARGO_MANIFEST_DIR"), "/packaging/man/graceful.1");
    let man = std::fs::read_to_string(page).unwrap().replace("\\-", "-");
    for section in ["ENVIRONMENT", "NOTES"] {
        assert!(man.contains(&format!(".SH {section}")), "section {section}");
    }
    for needle in [
        "exec graceful --grace 30s -- ./step",
        "KillMode=mixed",
        "TimeoutStopSec=",
    ] {
        assert!(man.contains(needle), "{needle}");
    }
}

#[test]
fn kill_after_is_timeouts_name_for_the_grace() {
    // `timeout -k 1` habits: `--kill-after 1` is the grace, and `-k 1` is
    // refused with the pointer to it.
    let mut run = Run::new(bin("graceful"))
        .args(["-k", "1", "--", "true"])
        .stderr_piped()
        .spawn();
    assert_eq!(run.wait_exit(TIMEOUT).code(), Some(125));
    let err = run.stderr_all();
    assert!(err.contains("--grace 1"), "{err}");
    let mut run = Run::new(bin("graceful"))
        .args(["-v", "--kill-after", "1.", "--", "sh", "-c"])
        .arg("trap '' TERM; echo ready; exec sleep 30")
        .stderr_piped()
        .spawn();
    run.expect_line("ready", TIMEOUT);
    run.signal(libc::SIGTERM);
    let status = run.wait_exit(TIMEOUT);
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&status),
        Some(libc::SIGKILL),
        "KILL at the end of the 1 s grace: {}",
        run.stderr_all()
    );
}
