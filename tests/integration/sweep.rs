//! reap as a child subreaper: orphans are adopted and reaped as they appear;
//! once COMMAND exits, every leftover descendant — setsid escapees and
//! double-forked orphans included — gets the stop signal, then KILL after
//! `--grace`; reap exits only when none is left.

use crate::kit::{slowed, TIMEOUT};
use crate::procfs;
use crate::reap_kit::{back_of, field, reap, sigprobe, zombies_of, Guard};
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::time::{Duration, Instant};

#[test]
fn orphans_are_adopted_and_reaped_with_no_zombie_left() {
    let script = "sh -c 'sleep 2 & echo orphan=$!'; exec \"$0\"";
    let mut run = reap(["--", "sh", "-c", script, &sigprobe()]).spawn();
    let mut guard = Guard::new();
    let orphan = field(&run.expect_line("orphan=", TIMEOUT), "orphan");
    guard.watch(orphan);
    let probe = run.expect_ready(TIMEOUT);
    let back = probe.ppid;
    assert_eq!(
        back,
        back_of(run.pid()),
        "COMMAND's parent is reap's subreaper"
    );
    procfs::wait_until("the orphan is re-parented to reap", TIMEOUT, || {
        procfs::ppid(orphan) == Some(back) || !procfs::alive(orphan)
    });
    procfs::wait_until("the orphan has exited and was reaped", TIMEOUT, || {
        procfs::state(orphan).is_none()
    });
    assert!(
        zombies_of(back).is_empty(),
        "zombies: {:?}",
        zombies_of(back)
    );
    run.signal(libc::SIGTERM);
    assert_eq!(run.wait_exit(TIMEOUT).code(), Some(0));
}

#[test]
fn two_thousand_double_forked_orphans_leave_no_zombie() {
    let script =
        "i=0; while [ $i -lt 2000 ]; do (true &); i=$((i+1)); done; echo made; exec \"$0\"";
    // A native machine's bounds, times the slowdown: 2000 forks of sh
    // take that many times longer under an emulated CPU.
    let mut run = reap(["--", "sh", "-c", script, &sigprobe()])
        .watchdog(slowed(Duration::from_secs(240)))
        .spawn();
    run.expect_line("made", slowed(Duration::from_secs(180)));
    let probe = run.expect_ready(slowed(TIMEOUT));
    let back = probe.ppid;
    procfs::wait_until(
        "no zombie under reap",
        slowed(Duration::from_secs(30)),
        || zombies_of(back).is_empty(),
    );
    assert_eq!(
        procfs::children_of(back),
        [probe.pid],
        "only COMMAND is left"
    );
    run.signal(libc::SIGTERM);
    assert_eq!(run.wait_exit(TIMEOUT).code(), Some(0));
}

/// Orphans that exit one after another are reaped in batches: reap's back
/// does not wake up once per exit (CPU is what a storm of orphans costs),
/// and still leaves no zombie.
#[test]
fn a_burst_of_orphans_is_reaped_in_batches_not_one_wake_up_per_exit() {
    crate::reap_kit::burst_is_batched("reap", "reap's back", |run| back_of(run.pid()));
}

#[test]
fn leftover_trapping_term_exits_and_one_ignoring_it_is_killed_after_grace() {
    // Three leftovers: one exits on TERM, one ignores it, one escaped into a
    // session of its own. COMMAND waits until they are ready, then exits.
    let script = "\"$0\" & echo trap=$!; \"$0\" --ignore TERM & echo ignore=$!; \
                  setsid \"$0\" & echo escapee=$!; read x";
    let grace = Duration::from_millis(1500);
    let mut run = reap(["--grace", "1.5s", "--", "sh", "-c", script, &sigprobe()])
        .stdin_piped()
        .spawn();
    let back = back_of(run.pid());
    let trap = field(&run.expect_line("trap=", TIMEOUT), "trap");
    let ignore = field(&run.expect_line("ignore=", TIMEOUT), "ignore");
    let escapee = field(&run.expect_line("escapee=", TIMEOUT), "escapee");
    let readies = run.expect_readies(3, TIMEOUT);
    let mut guard = Guard::new();
    for p in [trap, ignore, escapee] {
        assert!(
            readies.iter().any(|r| r.pid == p),
            "{p} not ready: {readies:?}"
        );
        guard.watch(p);
    }
    let escaped = readies.iter().find(|r| r.pid == escapee).unwrap();
    assert_eq!(escaped.sid, escapee, "the escapee has a session of its own");

    let t0 = Instant::now();
    run.write_stdin("go\n");
    run.expect_line(&format!("got TERM pid={trap} from={back}"), TIMEOUT);
    run.expect_line(&format!("exit pid={trap}"), TIMEOUT);
    run.expect_line(&format!("got TERM pid={escapee} from={back}"), TIMEOUT);
    let status = run.wait_exit(grace + Duration::from_secs(15));
    let elapsed = t0.elapsed();
    assert_eq!(status.code(), Some(0), "COMMAND's status");
    assert!(elapsed >= grace, "KILL came before the grace: {elapsed:?}");
    assert!(guard.existing().is_empty(), "left: {:?}", guard.existing());
    let lines = run.lines_so_far();
    assert!(
        !lines
            .iter()
            .any(|l| l.starts_with(&format!("got TERM pid={ignore} "))),
        "the ignorer caught TERM: {lines:?}"
    );
}

#[test]
fn reap_exits_only_when_no_descendant_is_left() {
    // A leftover with two children of its own (grandchildren of reap's
    // subreaper), all lingering after TERM before they exit.
    let script = "\"$0\" --fork 2 --linger 700 & read x";
    let mut run = reap(["--", "sh", "-c", script, &sigprobe()])
        .stdin_piped()
        .spawn();
    let readies = run.expect_readies(3, TIMEOUT);
    let mut guard = Guard::new();
    for r in &readies {
        guard.watch(r.pid);
    }
    let t0 = Instant::now();
    run.write_stdin("go\n");
    let status = run.wait_exit(TIMEOUT);
    assert!(
        t0.elapsed() >= Duration::from_millis(700),
        "{:?}",
        t0.elapsed()
    );
    assert_eq!(status.code(), Some(0));
    assert!(
        guard.existing().is_empty(),
        "reap exited with descendants left: {:?}",
        guard.existing()
    );
    let lines = run.expect_eof(TIMEOUT);
    for r in &readies {
        let exited = format!("exit pid={}", r.pid);
        assert!(
            run.lines_so_far().contains(&exited),
            "{exited} missing: {lines:?}"
        );
    }
}

#[test]
fn keep_orphans_waits_for_leftovers_without_signalling_them() {
    let script = "\"$0\" --sleep-ms 1000 & echo left=$!";
    let t0 = Instant::now();
    let mut run = reap([
        "--keep-orphans",
        "--grace",
        "0",
        "--",
        "sh",
        "-c",
        script,
        &sigprobe(),
    ])
    .spawn();
    let left = field(&run.expect_line("left=", TIMEOUT), "left");
    let mut guard = Guard::new();
    guard.watch(left);
    run.expect_line(&format!("exit pid={left}"), TIMEOUT);
    let status = run.wait_exit(TIMEOUT);
    assert!(t0.elapsed() >= Duration::from_millis(1000));
    assert_eq!(status.code(), Some(0));
    assert!(guard.existing().is_empty());
    let lines = run.lines_so_far();
    assert!(!lines.iter().any(|l| l.starts_with("got ")), "{lines:?}");
}

#[test]
fn keep_orphans_wait_ends_on_a_stop_request() {
    let script = "\"$0\" --ignore TERM & echo left=$!";
    let mut run = reap([
        "--keep-orphans",
        "--grace",
        "0.5s",
        "-c",
        "echo cause=$REAP_CAUSE",
    ])
    .args(["--", "sh", "-c", script, &sigprobe()])
    .spawn();
    let left = field(&run.expect_line("left=", TIMEOUT), "left");
    let mut guard = Guard::new();
    guard.watch(left);
    run.expect_ready(TIMEOUT);
    let back = back_of(run.pid());
    procfs::wait_until(
        "COMMAND has exited, the leftover is adopted",
        TIMEOUT,
        || procfs::children_of(back) == [left],
    );
    run.signal(libc::SIGTERM);
    run.expect_line("cause=cancel", TIMEOUT);
    assert_eq!(run.wait_exit(TIMEOUT).code(), Some(0));
    assert!(guard.existing().is_empty());
}

#[test]
fn verbose_with_a_broken_stderr_does_not_spin() {
    // Each -v line written to a stderr nobody reads raises SIGPIPE on reap
    // itself; reap must not take that for news to log (and so on, for ever).
    let mut fds = [0; 2];
    // SAFETY: pipe writes two descriptors into the array.
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
    // SAFETY: both descriptors are new and owned here.
    let (read, write) = unsafe {
        use std::os::fd::FromRawFd;
        (
            std::os::fd::OwnedFd::from_raw_fd(fds[0]),
            std::os::fd::OwnedFd::from_raw_fd(fds[1]),
        )
    };
    drop(read);
    // A native machine's 0.2 s, 1 s and 500 ms of CPU, times the slowdown:
    // a busy loop uses about all of the 1.2 s on every machine.
    let k = crate::kit::slowdown();
    let script = format!(
        "sleep {}; (true &); (true &); sleep {k}; echo done",
        0.2 * f64::from(k)
    );
    let bound_ms = 500 * u64::from(k);
    let broken = write.as_raw_fd();
    let mut run = reap(["-v", "--", "sh", "-c", &script])
        .configure(move |cmd| {
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
    drop(write);
    let back = back_of(run.pid());
    run.expect_line("done", slowed(TIMEOUT));
    let ticks = |pid: i32| -> u64 {
        let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let rest = text.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
        let f: Vec<&str> = rest.split_whitespace().collect();
        f.get(11).and_then(|s| s.parse::<u64>().ok()).unwrap_or(0)
            + f.get(12).and_then(|s| s.parse::<u64>().ok()).unwrap_or(0)
    };
    let used = ticks(back) + ticks(run.pid());
    // SAFETY: sysconf has no memory arguments.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    assert!(
        used * 1000 / hz < bound_ms,
        "reap used {} ms of CPU in about {:.1} s (bound {bound_ms} ms)",
        used * 1000 / hz,
        1.2 * f64::from(k)
    );
    assert_eq!(run.wait_exit(TIMEOUT).code(), Some(0));
}

/// `-v` names the processes it signals as the survivor lines do: pid and
/// name.
#[test]
fn verbose_names_the_leftovers_it_signals() {
    let mut run = crate::reap_kit::reap(["-v", "--grace", "5s", "--", "sh", "-c"])
        // "up" once the leftover runs sleep (not the shell's fork of it
        // still), so the line names it as it is when the sweep comes.
        .arg("sleep 30 & while [ \"$(cat /proc/$!/comm)\" != sleep ]; do :; done; echo up")
        .stderr_piped()
        .spawn();
    run.expect_line("up", TIMEOUT);
    run.wait_exit(TIMEOUT);
    let err = run.stderr_all();
    assert!(
        err.lines()
            .any(|l| l.contains("sent TERM to pid ") && l.contains(" (sleep; parent ")),
        "{err}"
    );
}

/// A leftover that survives the stop signal and keeps forking: its children
/// born after the last walk were never sent TERM (reap is not woken by a
/// grandchild's fork). When the grace is over, no survivor line may say
/// TERM has failed to end a process it was never sent to: each such one is
/// "not sent TERM". (That they then get KILL with no TERM first is what
/// the deadline leaves; the line at least says so.)
#[test]
fn a_leftover_forked_after_the_last_walk_is_said_not_to_have_been_sent_term() {
    let dir = crate::kit::temp_dir("forker");
    let ready = dir.join("ready");
    let script = format!(
        "sh -c 'trap : TERM; echo r > {r}; while :; do sleep 30 & sleep 0.05; done' & \
         while [ ! -s {r} ]; do sleep 0.01; done; sleep 0.3",
        r = ready.display()
    );
    let mut run = crate::reap_kit::reap(["-v", "--grace", "1s", "--", "sh", "-c"])
        .arg(script)
        .stderr_piped()
        .spawn();
    run.wait_exit(TIMEOUT);
    let err = run.stderr_all();
    let pid_after = |line: &str, key: &str| -> Option<i32> {
        let rest = &line[line.find(key)? + key.len()..];
        rest.split(|c: char| !c.is_ascii_digit())
            .next()?
            .parse()
            .ok()
    };
    let termed: std::collections::BTreeSet<i32> = err
        .lines()
        .filter_map(|l| pid_after(l, "sent TERM to pid "))
        .collect();
    let wrong: Vec<&str> = err
        .lines()
        .filter(|l| l.contains("still running after the grace"))
        .filter(|l| pid_after(l, ": pid ").is_some_and(|p| !termed.contains(&p)))
        .filter(|l| !l.contains("it was not sent TERM"))
        .collect();
    assert!(
        wrong.is_empty(),
        "survivors never sent TERM, named as if they had been:\n{}\n\nall:\n{err}",
        wrong.join("\n")
    );
    assert!(
        err.contains("it was not sent TERM"),
        "the forker's late children were expected among the survivors:\n{err}"
    );
}
