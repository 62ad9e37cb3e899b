//! pgwrap's signal rules: what is passed on, mapped or dropped, to whom, and
//! that nothing is lost or polled for.

/// reap: the back, COMMAND's parent, is the one sender; a paused front loses nothing.
pub mod one_route;
/// reap's --map, --to child and --success-status (dumb-init's and tini's habits).
mod peers;
/// Signal storms at each tool: nothing forwarded is lost, nothing dropped gets through.
pub mod storms;

use crate::kit::{bin, slowed, Run, TIMEOUT};
use crate::procfs;
use std::os::unix::process::ExitStatusExt;
use std::time::Duration;

fn pgwrap(opts: &[&str], probe: &[&str]) -> Run {
    Run::new(bin("pgwrap"))
        .args(opts)
        .arg("--")
        .arg(bin("sigprobe"))
        .args(probe)
        .stderr_piped()
        .spawn()
}

fn rtmin(n: i32) -> i32 {
    libc::SIGRTMIN() + n
}

fn kill(pid: i32, sig: i32) {
    // SAFETY: plain kill(2) of a process the test started and has not reaped.
    assert_eq!(unsafe { libc::kill(pid, sig) }, 0, "kill({pid}, {sig})");
}

#[test]
fn forwarded_signal_reaches_command_and_exit_follows() {
    let mut run = pgwrap(&[], &[]);
    let probe = run.expect_ready(TIMEOUT);
    assert_eq!(probe.pgid, probe.pid, "COMMAND leads a new process group");
    assert_ne!(probe.pgid, run.pgid(), "not pgwrap's group");
    assert_eq!(probe.ppid, run.pid(), "pgwrap stays as the parent");
    run.signal(libc::SIGTERM);
    run.expect_line(
        &format!("got TERM pid={} from={}", probe.pid, run.pid()),
        TIMEOUT,
    );
    assert_eq!(run.wait_exit(TIMEOUT).code(), Some(0));
}

/// A stopped COMMAND acts on nothing but KILL: a stop request passed on
/// to it is followed by CONT, as under graceful and reap.
#[test]
fn a_stopped_command_is_continued_after_a_forwarded_stop_request() {
    let mut run = pgwrap(&["-v"], &[]);
    let probe = run.expect_ready(TIMEOUT);
    kill(probe.pid, libc::SIGSTOP);
    procfs::wait_until("pgwrap sees COMMAND stopped", TIMEOUT, || {
        run.stderr_so_far().contains("COMMAND stopped by STOP")
    });
    run.signal(libc::SIGTERM);
    run.expect_line(&format!("got TERM pid={}", probe.pid), TIMEOUT);
    assert_eq!(run.wait_exit(TIMEOUT).code(), Some(0));
}

#[test]
fn signal_right_after_start_is_not_lost() {
    for _ in 0..20 {
        let mut run = pgwrap(&[], &[]);
        // As soon as pgwrap has blocked TERM (before main runs), send it:
        // COMMAND may not exist yet.
        procfs::wait_until("pgwrap blocks TERM", TIMEOUT, || {
            procfs::masks(run.pid()).is_some_and(|(blk, _, _)| procfs::has_sig(blk, libc::SIGTERM))
        });
        run.signal(libc::SIGTERM);
        let status = run.wait_exit(TIMEOUT);
        run.expect_eof(TIMEOUT);
        // Either the probe caught it and exited 0, or it arrived before the
        // probe blocked TERM and killed it by TERM, which pgwrap re-raised.
        let caught = run.lines_so_far().iter().any(|l| l.starts_with("got TERM"));
        assert!(
            (caught && status.code() == Some(0)) || status.signal() == Some(libc::SIGTERM),
            "TERM lost: {status:?} {:?}",
            run.lines_so_far()
        );
    }
}

#[test]
fn idle_pgwrap_does_not_wake_up() {
    let mut run = pgwrap(&[], &[]);
    run.expect_ready(TIMEOUT);
    // Let pgwrap reach its one blocking call first (on a loaded machine it
    // may not have run since the spawn returned).
    procfs::wait_until("pgwrap asleep", TIMEOUT, || {
        procfs::state(run.pid()) == Some('S')
    });
    std::thread::sleep(Duration::from_millis(300));
    let before = procfs::ctxt_switches(run.pid()).unwrap();
    std::thread::sleep(Duration::from_secs(1));
    let after = procfs::ctxt_switches(run.pid()).unwrap();
    assert_eq!(before, after, "pgwrap woke up while nothing happened");
}

#[test]
fn sigkill_of_pgwrap_kills_command_unless_pdeathsig_none() {
    let mut run = pgwrap(&[], &["--exit-on", "none"]);
    let probe = run.expect_ready(TIMEOUT);
    run.signal(libc::SIGKILL);
    procfs::wait_until("COMMAND killed with pgwrap", TIMEOUT, || {
        !procfs::alive(probe.pid)
    });

    let mut run = pgwrap(&["--pdeathsig", "none"], &["--exit-on", "none"]);
    let probe = run.expect_ready(TIMEOUT);
    run.signal(libc::SIGKILL);
    run.wait_exit(TIMEOUT);
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        procfs::alive(probe.pid),
        "--pdeathsig none must leave COMMAND running"
    );
    // Dropping `run` kills the probe by its announced pid.
}

#[test]
fn quit_to_pgwraps_group_is_dropped_with_forward_term() {
    let mut run = pgwrap(&["--forward", "TERM", "-v"], &[]);
    let probe = run.expect_ready(TIMEOUT);
    // The way systemd's KillMode=control-group or a terminal would: the
    // whole group pgwrap belongs to.
    run.signal_group(libc::SIGQUIT);
    run.signal_group(libc::SIGUSR1);
    run.signal(rtmin(2));
    procfs::wait_until("pgwrap logged the drops", TIMEOUT, || {
        run.stderr_so_far().matches("dropped").count() >= 3
    });
    assert!(
        procfs::alive(run.pid()),
        "pgwrap must not die of a dropped signal"
    );
    run.signal(libc::SIGTERM);
    run.expect_line(&format!("got TERM pid={}", probe.pid), TIMEOUT);
    assert_eq!(run.wait_exit(TIMEOUT).code(), Some(0));
    run.expect_eof(TIMEOUT);
    let lines = run.lines_so_far();
    assert!(
        !lines
            .iter()
            .any(|l| l.contains("QUIT") || l.contains("USR1") || l.contains("RTMIN")),
        "{lines:?}"
    );
}

/// The main probe and one forked child (same group); returns the readies.
fn family(opts: &[&str]) -> (Run, i32, i32) {
    let mut run = pgwrap(opts, &["--fork", "1", "--exit-on", "none"]);
    let readies = run.expect_readies(2, TIMEOUT);
    let main = readies.iter().find(|r| r.role == "main").unwrap().pid;
    let child = readies.iter().find(|r| r.role == "child").unwrap().pid;
    (run, main, child)
}

#[test]
fn to_child_reaches_command_alone() {
    let (mut run, main, child) = family(&["--to", "child"]);
    run.signal(libc::SIGTERM);
    run.expect_line(&format!("got TERM pid={main}"), TIMEOUT);
    // A sentinel sent straight to the grandchild, numbered above TERM: a
    // pending TERM would be reported before it.
    kill(child, rtmin(1));
    run.expect_line(&format!("got RTMIN+1 pid={child}"), TIMEOUT);
    assert!(!run
        .lines_so_far()
        .contains(&format!("got TERM pid={child} from={}", run.pid())));
}

#[test]
fn to_group_reaches_every_member() {
    let (mut run, main, child) = family(&[]);
    run.signal(libc::SIGTERM);
    run.expect_line(&format!("got TERM pid={main}"), TIMEOUT);
    run.expect_line(&format!("got TERM pid={child}"), TIMEOUT);
}

#[test]
fn map_passes_quit_on_as_term() {
    let mut run = pgwrap(&["--map", "QUIT:TERM"], &[]);
    let probe = run.expect_ready(TIMEOUT);
    run.signal(libc::SIGQUIT);
    run.expect_line(&format!("got TERM pid={}", probe.pid), TIMEOUT);
    assert_eq!(run.wait_exit(TIMEOUT).code(), Some(0));
    run.expect_eof(TIMEOUT);
    assert!(!run.lines_so_far().iter().any(|l| l.contains("got QUIT")));
}

#[test]
fn ignore_removes_from_the_forward_set() {
    let mut run = pgwrap(&["--ignore", "INT"], &[]);
    let probe = run.expect_ready(TIMEOUT);
    run.signal(libc::SIGINT);
    run.signal(libc::SIGTERM);
    run.expect_line(&format!("got TERM pid={}", probe.pid), TIMEOUT);
    assert_eq!(run.wait_exit(TIMEOUT).code(), Some(0));
    run.expect_eof(TIMEOUT);
    assert!(!run.lines_so_far().iter().any(|l| l.contains("got INT")));
}

#[test]
fn setsid_makes_a_new_session() {
    let mut run = pgwrap(&["--setsid"], &[]);
    let probe = run.expect_ready(TIMEOUT);
    assert_eq!(probe.sid, probe.pid);
    assert_eq!(probe.pgid, probe.pid);
    run.signal(libc::SIGTERM);
    run.expect_line("got TERM", TIMEOUT);
    assert_eq!(run.wait_exit(TIMEOUT).code(), Some(0));
}

#[test]
fn realtime_signals_queue_and_each_is_passed_on() {
    let mut run = pgwrap(&["--forward", "RTMIN+3,TERM"], &[]);
    let probe = run.expect_ready(TIMEOUT);
    for _ in 0..5 {
        run.signal(rtmin(3));
    }
    // Each of the five arrives: realtime signals queue, and pgwrap reads
    // one record per signal. (TERM only afterwards: a pending TERM is
    // dequeued before any realtime signal and would end the probe.)
    for _ in 0..5 {
        run.expect_line(&format!("got RTMIN+3 pid={}", probe.pid), TIMEOUT);
    }
    run.signal(libc::SIGTERM);
    run.expect_line(&format!("got TERM pid={}", probe.pid), TIMEOUT);
    run.wait_exit(TIMEOUT);
    run.expect_eof(TIMEOUT);
    let n = run
        .lines_so_far()
        .iter()
        .filter(|l| l.starts_with("got RTMIN+3"))
        .count();
    assert_eq!(n, 5, "exactly five, no duplicate: {:?}", run.lines_so_far());
}

#[test]
fn verbose_lines_are_prefixed() {
    let mut run = pgwrap(&["-v"], &[]);
    run.expect_ready(TIMEOUT);
    run.signal(libc::SIGTERM);
    run.wait_exit(TIMEOUT);
    let err = run.stderr_all();
    let prefix = format!("pgwrap[{}]: ", run.pid());
    assert!(err.lines().count() >= 3, "{err}");
    for line in err.lines() {
        assert!(line.starts_with(&prefix), "{line:?}");
    }
    assert!(err.contains("forwarded to group"), "{err}");
}

#[test]
fn verbose_with_a_broken_stderr_does_not_spin() {
    use std::os::fd::{FromRawFd, OwnedFd};
    let mut fds = [-1; 2];
    // SAFETY: pipe2 writes two new descriptors into `fds`.
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
    // SAFETY: both descriptors are new and owned here; the read end is
    // closed at once, so every write to the other end fails with EPIPE.
    let (read_end, write_end) =
        unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    drop(read_end);
    use std::os::unix::fs::MetadataExt;
    let pipe_ino = std::fs::metadata(format!("/proc/self/fd/{}", fds[1]))
        .expect("the pipe's write end")
        .ino();
    let broken = fds[1];
    let mut run = Run::new(bin("pgwrap"))
        .args(["-v", "--"])
        .arg(bin("sigprobe"))
        .configure(move |cmd| {
            // A pre_exec hook, as spawn sets the stdio it does not pipe to
            // inherit (a `Command::stderr` here would be overwritten).
            use std::os::unix::process::CommandExt;
            // SAFETY: runs in the child before exec; dup2 is async-signal-safe.
            unsafe {
                cmd.pre_exec(move || {
                    if libc::dup2(broken, 2) < 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
        })
        .spawn();
    drop(write_end);
    let probe = run.expect_ready(TIMEOUT);
    // pgwrap's stderr is that pipe, not the test's own stderr.
    let stderr = std::fs::read_link(format!("/proc/{}/fd/2", run.pid()));
    assert_eq!(
        stderr.ok(),
        Some(std::path::PathBuf::from(format!("pipe:[{pipe_ino}]"))),
        "pgwrap's stderr is not the broken pipe"
    );
    for _ in 0..3 {
        run.signal(libc::SIGWINCH);
        run.expect_line(&format!("got WINCH pid={}", probe.pid), TIMEOUT);
    }
    // A spinning pgwrap would use most of a core over this second (a
    // native machine's second and 30 ticks, times the slowdown).
    std::thread::sleep(slowed(Duration::from_secs(1)));
    let ticks = cpu_ticks(run.pid());
    let bound = 30 * u64::from(crate::kit::slowdown());
    assert!(
        ticks < bound,
        "pgwrap burns CPU on a broken stderr: {ticks} ticks (bound {bound})"
    );
    run.signal(libc::SIGTERM);
    assert_eq!(run.wait_exit(TIMEOUT).code(), Some(0));
}

/// utime + stime of `pid`, in clock ticks.
fn cpu_ticks(pid: i32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap()
}
