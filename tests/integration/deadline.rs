//! graceful's deadline reaches everything below it (design.md, graceful:
//! "The deadline reaches everything below"): the kill signal goes to
//! COMMAND's group and to every process still below graceful, through an
//! inner pgwrap or graceful, sparing only what an inner reap guards (its
//! subreaper process and its cleanup, which then runs); after a kill
//! graceful exits when nothing is left below it. Survivors are named
//! through the suite's own tools.

use crate::grace::{Death, SLACK};
use crate::kit::{bin, said, Run, TIMEOUT};
use crate::procfs;
use crate::reap_kit::{sigprobe, Guard};
use std::os::unix::process::ExitStatusExt;
use std::time::{Duration, Instant};

/// The issue's example: `graceful -g 1 -- pgwrap -- sh -c 'trap "" TERM;
/// sleep 100'`, TERM to graceful: nothing is left, and the survivors named
/// are sh and sleep, never pgwrap.
#[test]
fn graceful_over_pgwrap_kills_what_ignores_term_and_names_it() {
    over_pgwrap(&bin("pgwrap"));
}

/// The same, with the pgwrap of another installation (a copy in a
/// directory of its own): it is still one of the suite's tools.
#[test]
fn graceful_sees_through_a_pgwrap_installed_elsewhere() {
    let dir = crate::kit::temp_dir("elsewhere");
    let copy = dir.join("pgwrap");
    std::fs::copy(bin("pgwrap"), &copy).unwrap();
    over_pgwrap(&copy);
}

fn over_pgwrap(pgwrap: &std::path::Path) {
    let mut run = Run::new(bin("graceful"))
        .args(["-g", "1", "--", pgwrap.to_str().unwrap(), "--"])
        .args(["sh", "-c", r#"trap "" TERM; sleep 100 & echo up $!; wait"#])
        .stderr_piped()
        .spawn();
    let line = run.expect_line("up ", TIMEOUT);
    let sleep: i32 = line[3..].trim().parse().unwrap();
    let mut guard = Guard::new();
    guard.watch_tree(run.pid());
    let sh = procfs::ppid(sleep).unwrap();
    let pgwrap = procfs::ppid(sh).unwrap();
    assert_eq!(procfs::ppid(pgwrap), Some(run.pid()));
    run.signal(libc::SIGTERM);
    let status = run.wait_exit(TIMEOUT + SLACK);
    let err = run.stderr_all();
    assert_eq!(status.signal(), Some(libc::SIGKILL), "{err}");
    guard.wait_all_gone("nothing below graceful is left", TIMEOUT);
    for (pid, name) in [(sh, "sh"), (sleep, "sleep")] {
        let want = format!("pid {pid} ({name}) is still running after the grace: it ignores TERM");
        assert!(
            err.lines()
                .any(|l| said(l, "graceful") == Some(want.as_str())),
            "no {want:?} in:\n{err}"
        );
    }
    assert!(
        !err.contains(&format!("pid {pgwrap} ")),
        "pgwrap, only waiting for its COMMAND, is blamed:\n{err}"
    );
}

/// A setsid escapee and a double-forked orphan of COMMAND, both ignoring
/// TERM: neither is in COMMAND's group, both are below graceful (the
/// subreaper); the deadline kills them, and graceful waits for them.
#[test]
fn the_deadline_kills_escapees_and_orphans_below_graceful() {
    let probe = sigprobe();
    let script = format!(
        "trap '' TERM; {probe} --exit-on none --escape 1 & ({probe} --exit-on none --fork 0 &) ; wait"
    );
    let mut run = Run::new(bin("graceful"))
        .args(["-g", "1", "--", "sh", "-c", &script])
        .stderr_piped()
        .spawn();
    let readies = run.expect_readies(3, TIMEOUT);
    let mut guard = Guard::new();
    for r in &readies {
        guard.watch(r.pid);
    }
    let escapee = readies.iter().find(|r| r.role == "escapee").unwrap();
    assert_ne!(escapee.sid, run.pgid());
    let deaths: Vec<Death> = readies.iter().map(|r| Death::watch(r.pid)).collect();
    let sent = Instant::now();
    run.signal(libc::SIGTERM);
    for d in &deaths {
        let at = d.wait(Duration::from_secs(1) + SLACK);
        assert!(
            at >= sent + Duration::from_secs(1),
            "killed before the deadline"
        );
    }
    let status = run.wait_exit(TIMEOUT);
    let err = run.stderr_all();
    assert_eq!(status.signal(), Some(libc::SIGKILL), "{err}");
    guard.wait_all_gone("every process below graceful is gone", TIMEOUT);
    let want = format!(
        "pid {} (sigprobe) is still running after the grace: it was not sent TERM",
        escapee.pid
    );
    assert!(
        err.lines()
            .any(|l| said(l, "graceful").is_some_and(|m| m.starts_with(&want))),
        "no {want:?} in:\n{err}"
    );
}

/// `graceful -g 1 -- reap -c CLEANUP -- JOB`: at graceful's deadline JOB
/// (ignoring TERM) and reap's front are killed, reap's subreaper process
/// and its cleanup are spared: the cleanup runs (REAP_CAUSE=cancel: reap
/// was asked to stop), with a child of its own, and graceful exits after
/// it, with the status of its COMMAND (reap's front, killed).
#[test]
fn graceful_over_reap_spares_the_back_and_waits_for_the_cleanup() {
    let probe = sigprobe();
    let dir = crate::kit::temp_dir("deadline-reap");
    let done = dir.join("cleanup-done");
    let cleanup = format!(
        "echo cleanup-start cause=$REAP_CAUSE; sleep 1.5 & {probe} --exit-on none --sleep-ms 1200; wait; echo cleanup-done; : > '{}'",
        done.display()
    );
    let mut run = Run::new(bin("graceful"))
        .args(["-g", "1", "--", bin("reap").to_str().unwrap()])
        .args(["--cleanup", &cleanup, "--", &probe, "--exit-on", "none"])
        .stderr_piped()
        .spawn();
    let job = run.expect_ready(TIMEOUT);
    let mut guard = Guard::new();
    guard.watch_tree(run.pid());
    let job_death = Death::watch(job.pid);
    let sent = Instant::now();
    run.signal(libc::SIGTERM);
    let killed = job_death.wait(Duration::from_secs(1) + SLACK);
    assert!(killed >= sent + Duration::from_secs(1), "JOB killed early");
    assert!(
        killed < sent + Duration::from_secs(4),
        "JOB lived to reap's own deadline, not graceful's"
    );
    run.expect_line("cleanup-start cause=cancel", TIMEOUT);
    let cleanup_probe = run.expect_ready(TIMEOUT);
    guard.watch(cleanup_probe.pid);
    run.expect_line("cleanup-done", TIMEOUT + SLACK);
    let status = run.wait_exit(TIMEOUT);
    assert!(done.exists(), "graceful exited before the cleanup ended");
    let err = run.stderr_all();
    assert_eq!(status.signal(), Some(libc::SIGKILL), "{err}");
    assert!(
        run.lines_so_far()
            .iter()
            .any(|l| l.starts_with(&format!("exit pid={}", cleanup_probe.pid))),
        "the cleanup's child ran to its end: {:?}",
        run.lines_so_far()
    );
    guard.wait_all_gone("nothing is left", TIMEOUT);
}

/// graceful names itself in `GRACEFUL_GUARD` as `PID:INODE:BACK:CLEANUP`
/// (graceful.1): its pid, its back mark's inode, its two marks' descriptors,
/// the first of which is that pipe. A reap whose entry gives graceful's pid
/// and descriptors with another inode (what a later owner of the pid would
/// hold) takes no mark: only the reap given the right entry holds the back
/// mark, besides graceful.
#[test]
fn an_inner_reap_takes_the_back_mark_only_from_the_entry_with_its_inode() {
    let probe = sigprobe();
    let reap = bin("reap").display().to_string();
    let script = format!(
        r#"echo "guard $GRACEFUL_GUARD"; IFS=: read -r pid ino back cleanup <<EOF
$GRACEFUL_GUARD
EOF
GRACEFUL_GUARD="$pid:$((ino + 1)):$back:$cleanup" '{reap}' -- '{probe}' &
echo "wrong $!"; exec '{reap}' -- '{probe}'"#
    );
    let mut run = Run::new(bin("graceful"))
        .args(["--", "sh", "-c", &script])
        .env_remove("GRACEFUL_GUARD")
        .spawn();
    let mut guard = Guard::new();
    guard.watch_tree(run.pid());
    let line = run.expect_line("guard ", TIMEOUT);
    let fields: Vec<&str> = line["guard ".len()..].split(':').collect();
    let [pid, ino, back, cleanup] = fields[..] else {
        panic!("not PID:INODE:BACK:CLEANUP: {line:?}")
    };
    assert_eq!(pid, run.pid().to_string(), "{line}");
    let link = |pid: i32, fd: &str| {
        std::fs::read_link(format!("/proc/{pid}/fd/{fd}")).map(|l| l.display().to_string())
    };
    let back_link = format!("pipe:[{ino}]");
    assert_eq!(
        link(run.pid(), back).ok(),
        Some(back_link.clone()),
        "{line}"
    );
    let cleanup_link = link(run.pid(), cleanup).unwrap_or_default();
    assert!(
        cleanup_link.starts_with("pipe:[") && cleanup_link != back_link,
        "{cleanup_link}"
    );
    let wrong: i32 = run.expect_line("wrong ", TIMEOUT)[6..]
        .trim()
        .parse()
        .unwrap_or(0);
    run.expect_readies(2, TIMEOUT);
    let holds = |p: &i32| {
        let fds = procfs::open_fds(*p).unwrap_or_default();
        fds.iter()
            .any(|fd| link(*p, &fd.to_string()).is_ok_and(|l| l == back_link))
    };
    let held: Vec<i32> = procfs::descendants(run.pid())
        .into_iter()
        .filter(holds)
        .collect();
    assert_eq!(
        held.len(),
        1,
        "one holder of the back mark below graceful: {held:?}"
    );
    assert!(
        !procfs::descendants(wrong).contains(&held[0]) && held[0] != wrong,
        "the reap given another inode took the mark: {held:?}"
    );
    run.signal(libc::SIGTERM);
    run.wait_exit(TIMEOUT);
    guard.wait_all_gone("nothing is left", TIMEOUT);
}

/// `reap -- graceful --grace 1s -- pgwrap -- JOB`: the inner graceful's
/// 1 s holds inside reap's 5 s, through pgwrap.
#[test]
fn an_inner_gracefuls_deadline_holds_through_pgwrap() {
    let probe = sigprobe();
    let mut run = Run::new(bin("reap"))
        .args([
            "--",
            bin("graceful").to_str().unwrap(),
            "--grace",
            "1s",
            "--",
        ])
        .args([
            bin("pgwrap").to_str().unwrap(),
            "--",
            &probe,
            "--exit-on",
            "none",
            "--fork",
            "1",
        ])
        .stderr_piped()
        .spawn();
    // The member, not pgwrap's child: pgwrap's --pdeathsig does not reach it.
    let job = run
        .expect_readies(2, TIMEOUT)
        .into_iter()
        .find(|r| r.role == "child")
        .unwrap();
    let mut guard = Guard::new();
    guard.watch_tree(run.pid());
    let death = Death::watch(job.pid);
    let sent = Instant::now();
    run.signal(libc::SIGTERM);
    let killed = death.wait(Duration::from_secs(1) + SLACK);
    assert!(killed >= sent + Duration::from_secs(1), "JOB killed early");
    assert!(
        killed < sent + Duration::from_millis(4000),
        "JOB lived {:?}: reap's deadline, not graceful's",
        killed - sent
    );
    run.wait_exit(TIMEOUT);
    guard.wait_all_gone("nothing is left", TIMEOUT);
}

/// `graceful -- pgwrap -- JOB` whose leader stops at once but leaves a
/// member that does not: pgwrap leaves with its COMMAND, graceful does not
/// leave with pgwrap. Once the stop signal is sent graceful waits for
/// everything below it, and kills at its deadline what is left, like
/// `graceful -- JOB`.
#[test]
fn after_the_stop_graceful_waits_for_what_outlives_an_inner_pgwrap() {
    let probe = sigprobe();
    let script = format!("{probe} --role member --exit-on none & wait");
    let mut run = Run::new(bin("graceful"))
        .args(["-g", "1", "--", bin("pgwrap").to_str().unwrap(), "--"])
        .args(["sh", "-c", &script])
        .stderr_piped()
        .spawn();
    let member = run.expect_ready(TIMEOUT);
    let mut guard = Guard::new();
    guard.watch_tree(run.pid());
    let death = Death::watch(member.pid);
    let sent = Instant::now();
    run.signal(libc::SIGTERM);
    run.expect_line(&format!("got TERM pid={}", member.pid), TIMEOUT);
    let killed = death.wait(Duration::from_secs(1) + SLACK);
    assert!(killed >= sent + Duration::from_secs(1), "killed early");
    let status = run.wait_exit(TIMEOUT);
    let err = run.stderr_all();
    assert_eq!(
        status.signal(),
        Some(libc::SIGTERM),
        "pgwrap's status: {err}"
    );
    let want = format!(
        "pid {} (sigprobe) is still running after the grace: it blocks TERM",
        member.pid
    );
    assert!(
        err.lines()
            .any(|l| said(l, "graceful") == Some(want.as_str())),
        "no {want:?} in:\n{err}"
    );
    guard.wait_all_gone("nothing is left", TIMEOUT);
}

/// `reap -- reap -c CLEANUP -- JOB`, the outer front SIGKILLed with its
/// group (a CI agent's kill): the outer subreaper kills COMMAND's tree at
/// once, but not what the inner reap guards: the inner cleanup still runs,
/// once, and the outer one after it.
#[test]
fn an_outer_reaps_kill_spares_an_inner_reaps_cleanup() {
    let probe = sigprobe();
    let dir = crate::kit::temp_dir("reap-over-reap");
    let log = dir.join("cleanups");
    let inner = format!("sleep 0.5; echo inner >> '{}'", log.display());
    let outer = format!("echo outer >> '{}'", log.display());
    let mut run = Run::new(bin("reap"))
        .args(["--cleanup", &outer, "--", bin("reap").to_str().unwrap()])
        .args(["--cleanup", &inner, "--", &probe, "--exit-on", "none"])
        .setpgid(true)
        .stderr_piped()
        .spawn();
    let job = run.expect_ready(TIMEOUT);
    let mut guard = Guard::new();
    guard.watch_tree(run.pid());
    run.signal_group(libc::SIGKILL);
    run.wait_exit(TIMEOUT);
    guard.wait_all_gone("both reaps have ended", TIMEOUT + SLACK);
    assert!(!procfs::alive(job.pid));
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    assert_eq!(text, "inner\nouter\n", "the cleanups that ran");
}

/// A member that outlives TERM and forks during the grace: its children
/// born after the stop signal went out were not sent it, and the
/// survivors' lines say so rather than that they ignore it.
#[test]
fn graceful_says_a_member_forked_after_the_stop_was_not_sent_it() {
    let script = r#"trap '' TERM; echo up; while :; do sleep 30 & sleep 0.05; done"#;
    let mut run = Run::new(bin("graceful"))
        .args(["--grace", "1s", "--", "sh", "-c", script])
        .stderr_piped()
        .spawn();
    run.expect_line("up", TIMEOUT);
    let mut guard = Guard::new();
    guard.watch_tree(run.pid());
    // Some sleeps exist before the stop signal, more are forked during the grace.
    std::thread::sleep(Duration::from_millis(300));
    run.signal(libc::SIGTERM);
    run.wait_exit(TIMEOUT + SLACK);
    guard.wait_all_gone("nothing below graceful is left", TIMEOUT);
    let err = run.stderr_all();
    let lines: Vec<&str> = err
        .lines()
        .filter_map(|l| said(l, "graceful"))
        .filter(|l| l.contains("(sleep) is still running after the grace"))
        .collect();
    let unsent = lines
        .iter()
        .filter(|l| l.contains("it was not sent TERM"))
        .count();
    let ignores = lines
        .iter()
        .filter(|l| l.ends_with("it ignores TERM"))
        .count();
    // ~6 sleeps before the stop, ~20 during the grace: generous bounds.
    assert!(unsent >= 5, "{unsent} sleeps said not sent TERM:\n{err}");
    assert!(
        ignores >= 1,
        "no sleep forked before the stop is said to ignore TERM:\n{err}"
    );
}

/// A daemon that left COMMAND's group (`setsid`): with `--stop-all` it gets
/// the stop signal from graceful with the group; without, only the
/// deadline's KILL.
#[test]
fn stop_all_reaches_a_daemon_that_left_the_group() {
    for stop_all in [true, false] {
        let mut run = Run::new(bin("graceful"))
            .args(stop_all.then_some("--stop-all"))
            .args([
                "-g",
                "1",
                "--",
                &sigprobe(),
                "--exit-on",
                "none",
                "--escape",
                "1",
            ])
            .spawn();
        let readies = run.expect_readies(2, TIMEOUT);
        let mut guard = Guard::new();
        for r in &readies {
            guard.watch(r.pid);
        }
        let daemon = readies.iter().find(|r| r.role == "escapee").unwrap();
        let death = Death::watch(daemon.pid);
        let sent = Instant::now();
        run.signal(libc::SIGTERM);
        assert!(death.wait(Duration::from_secs(1) + SLACK) >= sent + Duration::from_secs(1));
        run.wait_exit(TIMEOUT);
        guard.wait_all_gone("every process below graceful is gone", TIMEOUT);
        let got = format!("got TERM pid={} from={}", daemon.pid, run.pid());
        let lines = run.lines_so_far();
        assert_eq!(
            lines.contains(&got),
            stop_all,
            "--stop-all {stop_all}: {lines:#?}"
        );
    }
}

/// `graceful --stop-all -- reap -c CLEANUP -- JOB`: the stop signal goes
/// to JOB below reap's back, not to the back itself (what the deadline
/// spares, --stop-all spares), and the cleanup runs as for a cancel.
#[test]
fn stop_all_spares_an_inner_reaps_back() {
    let dir = crate::kit::temp_dir("stop-all-reap");
    let done = dir.join("cleanup");
    let cleanup = format!("echo cause=$REAP_CAUSE > '{}'", done.display());
    let mut run = Run::new(bin("graceful"))
        .args([
            "-v",
            "--stop-all",
            "-g",
            "1",
            "--",
            bin("reap").to_str().unwrap(),
        ])
        .args([
            "--cleanup",
            &cleanup,
            "--",
            &sigprobe(),
            "--exit-on",
            "none",
        ])
        .stderr_piped()
        .spawn();
    let job = run.expect_ready(TIMEOUT);
    let mut guard = Guard::new();
    guard.watch_tree(run.pid());
    run.signal(libc::SIGTERM);
    run.wait_exit(TIMEOUT + SLACK);
    guard.wait_all_gone("nothing below graceful is left", TIMEOUT);
    let err = run.stderr_all();
    let to_job = format!("sent TERM to pid {} (sigprobe) below", job.pid);
    assert!(err.contains(&to_job), "{err}");
    let to_reap = |l: &str| l.contains("sent TERM to pid ") && l.contains("(reap) below");
    assert!(!err.lines().any(to_reap), "{err}");
    let cause = std::fs::read_to_string(&done).unwrap_or_default();
    assert_eq!(cause, "cause=cancel\n", "{err}");
}

/// The issue's step: COMMAND's trap on TERM starts a `sleep` (in COMMAND's
/// group, TERM at its default) after the stop signal went out. At the end
/// of the grace neither graceful nor reap (its stop request's grace) says
/// TERM has not ended it, nor that it is outside the groups TERM went to:
/// it started after TERM went out.
#[test]
fn a_process_started_after_the_stop_is_said_to_be_so() {
    for tool in ["graceful", "reap"] {
        let script = "trap 'sleep 30' TERM; echo up; sleep 30 & wait";
        let mut run = Run::new(bin(tool))
            .args(["--grace", "1s", "--", "sh", "-c", script])
            .stderr_piped()
            .spawn();
        run.expect_line("up", TIMEOUT);
        let mut guard = Guard::new();
        guard.watch_tree(run.pid());
        run.signal(libc::SIGTERM);
        run.wait_exit(TIMEOUT + SLACK);
        guard.wait_all_gone("nothing below the tool is left", TIMEOUT);
        let err = run.stderr_all();
        let want = "(sleep) is still running after the grace: it was not sent TERM: \
                    it started after TERM went out";
        assert!(
            err.lines()
                .filter_map(|l| said(l, tool))
                .any(|l| l.contains(want)),
            "{tool}: no {want:?} in:\n{err}"
        );
    }
}

/// `graceful -g 0 -- pgwrap --setsid -- reap --keep-orphans -c CLEANUP --
/// JOB`, stopped: the deadline kills reap's front and JOB's tree. The
/// front's death must be what reap's back sees first (REAP_CAUSE=lost), so
/// graceful kills below the back only once the front is gone — a kill sent
/// first is not a death seen first. The front is held in its death here
/// (ptrace's exit stop: killed, its descriptors still open) until JOB is
/// dead or 200 ms have passed.
#[test]
fn the_deadline_kills_below_an_inner_reaps_back_once_its_front_is_gone() {
    let probe = sigprobe();
    let dir = crate::kit::temp_dir("deadline-front-first");
    let marker = dir.join("marker");
    let cleanup = format!(
        "echo \"cause=$REAP_CAUSE status=$REAP_STATUS\" >> '{}'",
        marker.display()
    );
    let mut run = Run::new(bin("graceful"))
        .args(["-g", "0", "--", bin("pgwrap").to_str().unwrap()])
        .args(["--setsid", "--forward", "USR1", "--"])
        .args([bin("reap").to_str().unwrap(), "--keep-orphans"])
        .args(["--cleanup", &cleanup, "--", &probe, "--exit-on", "none"])
        .stderr_piped()
        .spawn();
    let job = run.expect_ready(TIMEOUT);
    let mut guard = Guard::new();
    guard.watch_tree(run.pid());
    let back = procfs::ppid(job.pid).unwrap();
    let front = procfs::ppid(back).unwrap();
    // SAFETY: ptrace on a pid the test just read as reap's front (its
    // descendant); the test's thread is the tracer, detached on its end.
    let seized = unsafe {
        libc::ptrace(
            libc::PTRACE_SEIZE,
            front,
            0usize,
            libc::PTRACE_O_TRACEEXIT as usize,
        )
    };
    if seized != 0 {
        let e = std::io::Error::last_os_error();
        crate::skip::skip(
            "the_deadline_kills_below_an_inner_reaps_back_once_its_front_is_gone",
            &format!("ptrace is refused here ({e}: Yama's ptrace_scope 3, or seccomp)"),
        );
        return;
    }
    run.signal(libc::SIGTERM);
    procfs::wait_until("the front is held in its death", TIMEOUT, || {
        procfs::state(front) == Some('t')
    });
    let held = Instant::now();
    while procfs::alive(job.pid) && held.elapsed() < Duration::from_millis(200) {
        std::thread::sleep(Duration::from_millis(5));
    }
    let job_alive = procfs::alive(job.pid);
    if !job_alive {
        // Killed while the front still held its pipe: let the back decide.
        procfs::wait_until("the cleanup ran", TIMEOUT, || marker.exists());
    }
    // SAFETY: the tracee is in its exit stop.
    assert_eq!(
        unsafe { libc::ptrace(libc::PTRACE_DETACH, front, 0usize, 0usize) },
        0,
        "PTRACE_DETACH {front}"
    );
    let status = run.wait_exit(TIMEOUT);
    let err = run.stderr_all();
    assert_eq!(status.signal(), Some(libc::SIGKILL), "{err}");
    procfs::wait_until("the cleanup ran", TIMEOUT, || marker.exists());
    assert_eq!(
        std::fs::read_to_string(&marker).unwrap().trim(),
        "cause=lost status=137",
        "JOB killed while the front lived: {}; {err}",
        !job_alive
    );
    guard.wait_all_gone("nothing is left", TIMEOUT);
}

/// `graceful -g 0 -- reap -c CLEANUP -- JOB`, JOB ignoring TERM: with no
/// grace the kill signal goes to COMMAND's group (reap's front) right after
/// the stop signal, and only then below the back, once the front is gone.
/// The kill below was once sent with the stop signal, before the group's:
/// graceful then waited (a second at most) for a front it had not killed,
/// and killed JOB before it.
#[test]
fn with_no_grace_the_front_is_killed_before_what_is_below_reaps_back() {
    let probe = sigprobe();
    let mut run = Run::new(bin("graceful"))
        .args(["-v", "-g", "0", "--", bin("reap").to_str().unwrap()])
        .args(["--cleanup", "true", "--", &probe, "--exit-on", "none"])
        .stderr_piped()
        .spawn();
    let job = run.expect_ready(TIMEOUT);
    let mut guard = Guard::new();
    guard.watch_tree(run.pid());
    let back = procfs::ppid(job.pid).unwrap();
    let front = procfs::ppid(back).unwrap();
    let front_death = Death::watch(front);
    let job_death = Death::watch(job.pid);
    run.signal(libc::SIGTERM);
    job_death.wait(TIMEOUT);
    let front_first = front_death.happened();
    let status = run.wait_exit(TIMEOUT);
    let err = run.stderr_all();
    assert_eq!(status.signal(), Some(libc::SIGKILL), "{err}");
    let at = |line: &str| {
        err.find(line)
            .unwrap_or_else(|| panic!("no {line:?}: {err}"))
    };
    let group_killed = at(&format!("sent KILL to group {front}\n"));
    // Once its front is gone, reap's back kills JOB itself, and may do so
    // before graceful looks below it: graceful's own KILL to JOB is then
    // not sent. Either way JOB dies after the front, and a KILL graceful
    // sends it comes after the group's.
    let job_killed = err.find(&format!("sent KILL to pid {} ", job.pid));
    // The back kills JOB once its link from the front has reached end of
    // file, which the kernel gives as the front's descriptors close in its
    // exit, a moment before the front shows as exited (its pidfd, /proc): a
    // JOB killed by the back may show dead first. The back's line says it
    // acted on the front's death.
    let back_saw_it = err.contains(&format!(
        "the process the supervisor started (pid {front}) was killed"
    ));
    assert!(
        job_killed.map_or(true, |j| group_killed < j) && (front_first || back_saw_it),
        "JOB was killed before reap's front (front dead when JOB was: {front_first}): {err}"
    );
    guard.wait_all_gone("nothing is left", TIMEOUT);
}

/// `graceful -g 1 -- reap REAP_ARGS -- JOB`, TERM to graceful, where the
/// cleanup leaves a process behind and prints `leftover=PID`: graceful must
/// end, the leftover killed, before `bound`. Returns graceful's stderr.
fn a_cleanups_leftover_is_killed(reap_args: &[&str], bound: Duration) -> String {
    let probe = sigprobe();
    let mut run = Run::new(bin("graceful"))
        .args(["-g", "1", "--", bin("reap").to_str().unwrap()])
        .args(reap_args)
        .args(["--", &probe, "--exit-on", "none"])
        .stderr_piped()
        .spawn();
    run.expect_ready(TIMEOUT);
    let mut guard = Guard::new();
    guard.watch_tree(run.pid());
    let sent = Instant::now();
    run.signal(libc::SIGTERM);
    let line = run.expect_line("leftover=", TIMEOUT + SLACK);
    let leftover = crate::reap_kit::field(&line, "leftover");
    guard.watch(leftover);
    while run.try_exit().is_none() && sent.elapsed() < bound {
        std::thread::sleep(Duration::from_millis(20));
    }
    let took = sent.elapsed();
    let left = procfs::alive(leftover);
    run.kill_all();
    let err = run.stderr_all();
    assert!(
        took < bound && !left,
        "graceful ran {took:?} after TERM, the cleanup's leftover alive: {left}: {err}"
    );
    guard.wait_all_gone("nothing is left", TIMEOUT);
    err
}

/// `graceful -g 1 -- reap --exec-cleanup -c 'sleep 20 & ...' -- JOB`, TERM
/// to graceful (design.md, Chains: an inner reap's cleanup outlives a
/// deadline "while that cleanup runs — not what the cleanup leaves
/// behind"): once the cleanup, which replaced reap's back, has ended, its
/// leftover is killed and graceful ends, long before the leftover's 20 s.
/// Past its deadline graceful says once, without -v, what it waits for.
/// The leftover was once spared for its whole life: it had inherited the
/// cleanup's mark.
#[test]
fn what_an_exec_cleanup_leaves_is_not_spared_once_it_has_ended() {
    let err = a_cleanups_leftover_is_killed(
        // The cleanup outlasts graceful's first look after its kill (2 s),
        // so that look finds it guarded whatever the machine's load.
        &[
            "--exec-cleanup",
            "--cleanup",
            "sleep 20 & echo leftover=$!; sleep 2",
        ],
        Duration::from_secs(15),
    );
    let waiting: Vec<&str> = (err.lines())
        .filter_map(|l| said(l, "graceful"))
        .filter(|m| m.contains("inner reap"))
        .collect();
    assert_eq!(
        waiting.len(),
        1,
        "one line on what graceful waits for: {err}"
    );
}

/// The same with a cleanup reap starts as its child: once the cleanup's
/// first process has ended, what it left (a probe that ignores TERM) is
/// spared no more, and graceful, past its deadline, kills it then, not when
/// reap's own 30 s grace for leftovers runs out.
#[test]
fn what_a_cleanup_leaves_is_killed_once_it_has_ended() {
    let probe = sigprobe();
    let cleanup = format!("{probe} --role left --exit-on none & echo leftover=$!; sleep 0.5");
    a_cleanups_leftover_is_killed(
        &["--grace", "30", "--cleanup", &cleanup],
        Duration::from_secs(20),
    );
}

/// `graceful -- reap [--exec-cleanup] --cleanup-exec PROBE --status ; --
/// true`: the cleanup that replaces reap's back holds the same descriptors
/// as the one reap starts as a child, no descriptor of graceful's (design.md,
/// Chains: "no descriptor of an outer tool reaches the cleanup"). It once
/// held graceful's cleanup mark, kept open across the exec.
#[test]
fn no_descriptor_of_graceful_reaches_an_exec_cleanup() {
    let probe = sigprobe();
    let fds = |exec: &[&str]| {
        let mut run = Run::new(bin("graceful"))
            .args(["--", bin("reap").to_str().unwrap()])
            .args(exec)
            .args(["--cleanup-exec", &probe, "--status", ";", "--", "true"])
            .spawn();
        let lines = run.expect_eof(TIMEOUT);
        run.wait_exit(TIMEOUT);
        (lines.into_iter())
            .find(|l| l.starts_with("fds="))
            .unwrap_or_else(|| panic!("no fds= line from the cleanup"))
    };
    assert_eq!(
        fds(&["--exec-cleanup"]),
        fds(&[]),
        "exec'd cleanup vs child"
    );
}

/// `graceful -g 1 -- reap --exec-cleanup -c CLEANUP -- JOB`, TERM to
/// graceful: the cleanup, which replaced reap's back, and its child are
/// spared while it runs, past graceful's deadline: it completes.
#[test]
fn an_exec_cleanup_and_its_tree_are_spared_while_it_runs() {
    let probe = sigprobe();
    let cleanup = format!(
        "echo cleanup-start; {probe} --role helper --exit-on none --sleep-ms 1500 & wait; \
         echo cleanup-done"
    );
    let mut run = Run::new(bin("graceful"))
        .args(["-g", "1", "--", bin("reap").to_str().unwrap()])
        .args(["--exec-cleanup", "--cleanup", &cleanup])
        .args(["--", &probe, "--exit-on", "none"])
        .stderr_piped()
        .spawn();
    run.expect_ready(TIMEOUT);
    let mut guard = Guard::new();
    guard.watch_tree(run.pid());
    run.signal(libc::SIGTERM);
    run.expect_line("cleanup-start", TIMEOUT + SLACK);
    let helper = run.expect_ready(TIMEOUT);
    guard.watch(helper.pid);
    guard.watch_tree(run.pid());
    run.expect_line(&format!("exit pid={}", helper.pid), TIMEOUT);
    run.expect_line("cleanup-done", TIMEOUT);
    run.wait_exit(TIMEOUT);
    guard.wait_all_gone("nothing is left", TIMEOUT);
}
