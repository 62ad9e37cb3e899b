//! Tests of the test kit and of sigprobe themselves.

use std::time::Duration;

use crate::kit::{bin, temp_dir, Ready, Run, TIMEOUT};
use crate::procfs;

fn probe() -> crate::kit::RunBuilder {
    Run::new(bin("sigprobe"))
}

fn my_pid() -> i32 {
    std::process::id() as i32
}

#[test]
fn probe_reports_term_with_sender_and_exits_zero() {
    let mut run = probe().spawn();
    let ready = run.expect_ready(TIMEOUT);
    assert_eq!(ready.pid, run.pid());
    assert_eq!(ready.pgid, run.pid(), "setpgid(true) is the default");
    assert_eq!(ready.ppid, my_pid());
    assert_eq!(ready.role, "main");
    assert_eq!(procfs::pgid(run.pid()), Some(run.pid()));

    run.signal(libc::SIGTERM);
    let got = run.expect_line("got TERM", TIMEOUT);
    assert_eq!(got, format!("got TERM pid={} from={}", run.pid(), my_pid()));
    run.expect_line(&format!("exit pid={}", run.pid()), TIMEOUT);
    let status = run.wait_exit(TIMEOUT);
    assert_eq!(status.code(), Some(0));
}

#[test]
fn status_mode_shows_clean_inherited_state() {
    let mut run = probe().arg("--status").spawn();
    let blk = run.expect_line("SigBlk:", TIMEOUT);
    let ign = run.expect_line("SigIgn:", TIMEOUT);
    let cgt = run.expect_line("SigCgt:", TIMEOUT);
    let fds = run.expect_line("fds=", TIMEOUT);
    assert_eq!(run.wait_exit(TIMEOUT).code(), Some(0));

    let mask = |line: &str| procfs::parse_mask(line.split(':').nth(1).unwrap()).unwrap();
    // std's Command clears the signal mask and resets SIGPIPE; sigprobe itself adds nothing
    // (no runtime SIGPIPE ignore, no SIGSEGV handler).
    // Ignored signals are inherited across exec: expect ours, less SIGPIPE. glibc's
    // posix_spawn may leave its internal signals 32 and 33 ignored; they are not compared.
    let internal = procfs::sig_bit(32) | procfs::sig_bit(33);
    let (_, my_ign, _) = procfs::masks(my_pid()).unwrap();
    let expected_ign = my_ign & !procfs::sig_bit(libc::SIGPIPE) & !internal;
    assert_eq!(mask(&blk), 0, "{blk}");
    assert_eq!(mask(&ign) & !internal, expected_ign, "{ign}");
    assert_eq!(mask(&cgt), 0, "{cgt}");
    assert!(fds.starts_with("fds=0,1,2"), "{fds}");
    assert_eq!(run.lines_so_far().len(), 4, "{:?}", run.lines_so_far());
}

#[test]
fn status_mode_sees_closed_stdin_and_extra_fds() {
    use std::os::unix::process::CommandExt;
    let mut run = probe()
        .arg("--status")
        .configure(|cmd| {
            // SAFETY: only async-signal-safe calls between fork and exec.
            unsafe {
                cmd.pre_exec(|| {
                    libc::close(0);
                    libc::dup2(2, 7);
                    Ok(())
                });
            }
        })
        .spawn();
    let fds = run.expect_line("fds=", TIMEOUT);
    assert_eq!(run.wait_exit(TIMEOUT).code(), Some(0));
    let list: Vec<i32> = fds["fds=".len()..]
        .split(',')
        .map(|s| s.parse().unwrap())
        .collect();
    assert!(!list.contains(&0), "{fds}");
    assert!(
        list.contains(&1) && list.contains(&2) && list.contains(&7),
        "{fds}"
    );
}

#[test]
fn ignore_is_applied_and_others_are_blocked_and_caught() {
    let mut run = probe().args(["--ignore", "USR2,RTMIN+2"]).spawn();
    let ready = run.expect_ready(TIMEOUT);
    let (blk, ign, cgt) = procfs::masks(ready.pid).expect("probe is running");
    assert_eq!(procfs::sig_bit(libc::SIGUSR2), 1 << 11);
    assert!(procfs::has_sig(ign, libc::SIGUSR2), "SigIgn {ign:016x}");
    assert!(
        procfs::has_sig(ign, libc::SIGRTMIN() + 2),
        "SigIgn {ign:016x}"
    );
    assert!(!procfs::has_sig(blk, libc::SIGUSR2), "SigBlk {blk:016x}");
    for sig in [
        libc::SIGTERM,
        libc::SIGINT,
        libc::SIGUSR1,
        libc::SIGWINCH,
        libc::SIGCONT,
    ] {
        assert!(
            procfs::has_sig(blk, sig),
            "{sig} blocked: SigBlk {blk:016x}"
        );
        assert!(procfs::has_sig(cgt, sig), "{sig} caught: SigCgt {cgt:016x}");
    }
    for sig in [
        libc::SIGCHLD,
        libc::SIGSEGV,
        libc::SIGTSTP,
        libc::SIGKILL,
        32,
        33,
    ] {
        assert!(
            !procfs::has_sig(blk, sig),
            "{sig} not blocked: SigBlk {blk:016x}"
        );
    }
    assert!(!procfs::has_sig(cgt, libc::SIGUSR2));

    run.signal(libc::SIGUSR2);
    run.signal(libc::SIGUSR1);
    run.expect_line("got USR1", TIMEOUT);
    run.signal(libc::SIGINT);
    run.expect_line("exit pid=", TIMEOUT);
    assert_eq!(run.wait_exit(TIMEOUT).code(), Some(0));
    let lines = run.lines_so_far();
    assert!(!lines.iter().any(|l| l.contains("got USR2")), "{lines:?}");
}

#[test]
fn realtime_signals_queue_and_are_all_reported() {
    let mut run = probe().spawn();
    let ready = run.expect_ready(TIMEOUT);
    let rt = libc::SIGRTMIN() + 1;
    for i in 0..5 {
        // SAFETY: plain syscall on our own unreaped child.
        let rc = unsafe {
            let mut value: libc::sigval = std::mem::zeroed();
            value.sival_ptr = i as *mut libc::c_void;
            libc::sigqueue(ready.pid, rt, value)
        };
        assert_eq!(rc, 0, "sigqueue: {}", std::io::Error::last_os_error());
    }
    for _ in 0..3 {
        run.signal(libc::SIGRTMAX());
    }
    for _ in 0..5 {
        run.expect_line(
            &format!("got RTMIN+1 pid={} from={}", ready.pid, my_pid()),
            TIMEOUT,
        );
    }
    for _ in 0..3 {
        run.expect_line("got RTMAX ", TIMEOUT);
    }
    run.signal(libc::SIGTERM);
    assert_eq!(run.wait_exit(TIMEOUT).code(), Some(0));
    let lines = run.lines_so_far();
    assert_eq!(
        lines
            .iter()
            .filter(|l| l.starts_with("got RTMIN+1 "))
            .count(),
        5
    );
    assert_eq!(
        lines.iter().filter(|l| l.starts_with("got RTMAX ")).count(),
        3
    );
}

#[test]
fn realtime_names_cover_the_range() {
    let mut run = probe().spawn();
    run.expect_ready(TIMEOUT);
    let (min, max) = (libc::SIGRTMIN(), libc::SIGRTMAX());
    let half = (max - min) / 2;
    let mut expected = Vec::new();
    for sig in min..=max {
        run.signal(sig);
        let name = match sig - min {
            0 => "RTMIN".to_string(),
            n if n <= half => format!("RTMIN+{n}"),
            _ if sig == max => "RTMAX".to_string(),
            _ => format!("RTMAX-{}", max - sig),
        };
        expected.push(name);
    }
    for name in &expected {
        run.expect_line(&format!("got {name} "), TIMEOUT);
    }
    run.signal(libc::SIGTERM);
    assert_eq!(run.wait_exit(TIMEOUT).code(), Some(0));
}

#[test]
fn exit_on_linger_and_exit_code() {
    let mut run = probe()
        .args(["--exit-on", "USR1", "--linger", "4000", "--exit-code", "5"])
        .spawn();
    let ready = run.expect_ready(TIMEOUT);
    run.signal(libc::SIGTERM);
    run.expect_line("got TERM", TIMEOUT);
    assert!(procfs::alive(ready.pid), "TERM is not in --exit-on");
    run.signal(libc::SIGUSR1);
    run.expect_line("got USR1", TIMEOUT);
    // Still lingering: a signal now is reported before the exit line.
    run.signal(libc::SIGWINCH);
    run.expect_line("got WINCH", TIMEOUT);
    run.expect_line("exit pid=", TIMEOUT);
    assert_eq!(run.wait_exit(TIMEOUT).code(), Some(5));
    let lines = run.lines_so_far();
    let pos = |prefix: &str| lines.iter().position(|l| l.starts_with(prefix)).unwrap();
    assert!(pos("got WINCH") < pos("exit pid="), "{lines:?}");
}

#[test]
fn exit_on_none_and_sleep_ms() {
    let mut run = probe()
        .args(["--exit-on", "none", "--sleep-ms", "300", "--exit-code", "3"])
        .spawn();
    run.expect_ready(TIMEOUT);
    run.signal(libc::SIGTERM);
    run.expect_line("got TERM", TIMEOUT);
    run.expect_line("exit pid=", TIMEOUT);
    assert_eq!(run.wait_exit(TIMEOUT).code(), Some(3));
}

#[test]
fn read_mode_echoes_lines_and_eof() {
    let mut run = probe().arg("--read").stdin_piped().spawn();
    run.expect_ready(TIMEOUT);
    run.write_stdin("hello\nwor");
    run.expect_line("read: hello", TIMEOUT);
    run.write_stdin("ld\n");
    assert_eq!(run.expect_line("read: ", TIMEOUT), "read: world");
    run.close_stdin();
    run.expect_line("eof", TIMEOUT);
    // Still running after eof.
    run.signal(libc::SIGUSR1);
    run.expect_line("got USR1", TIMEOUT);
    run.signal(libc::SIGHUP);
    assert_eq!(run.wait_exit(TIMEOUT).code(), Some(0));
}

#[test]
fn bad_flags_exit_2_with_a_message() {
    for args in [
        &["--bogus"][..],
        &["--fork"],
        &["--fork", "x"],
        &["--ignore", "NOPE"],
        &["--exit-code", "256"],
        &["--linger", "-1"],
    ] {
        let mut run = probe().args(args).stderr_piped().spawn();
        assert_eq!(run.wait_exit(TIMEOUT).code(), Some(2), "{args:?}");
        let stderr = run.stderr_all();
        assert!(stderr.contains("sigprobe: "), "{args:?}: {stderr}");
        assert!(run.lines_so_far().is_empty(), "{args:?}");
    }
}

#[test]
fn fork_and_escape_roles_and_drop_kills_all() {
    let mut run = probe().args(["--fork", "2", "--escape", "1"]).spawn();
    let readies = run.expect_readies(4, TIMEOUT);
    let by_role =
        |role: &str| -> Vec<&Ready> { readies.iter().filter(|r| r.role == role).collect() };
    let main = by_role("main");
    let children = by_role("child");
    let escapees = by_role("escapee");
    assert_eq!(
        (main.len(), children.len(), escapees.len()),
        (1, 2, 1),
        "{readies:?}"
    );
    let main = main[0];
    assert_eq!(main.pid, run.pid());
    for child in &children {
        assert_eq!(child.ppid, main.pid);
        assert_eq!(child.pgid, main.pgid);
        assert_eq!(child.sid, main.sid);
    }
    let escapee = escapees[0];
    assert_eq!(escapee.ppid, main.pid);
    assert_eq!(escapee.sid, escapee.pid);
    assert_eq!(escapee.pgid, escapee.pid);
    assert_eq!(procfs::sid(escapee.pid), Some(escapee.pid));

    let mut descendants = procfs::descendants(main.pid);
    descendants.sort_unstable();
    let mut forked: Vec<i32> = readies
        .iter()
        .filter(|r| r.role != "main")
        .map(|r| r.pid)
        .collect();
    forked.sort_unstable();
    assert_eq!(descendants, forked);
    assert_eq!(procfs::children_of(main.pid), forked);

    // Children survive their parent.
    run.signal(libc::SIGKILL);
    run.wait_exit(TIMEOUT);
    for pid in &forked {
        assert!(procfs::alive(*pid), "{pid} died with its parent");
    }

    let all: Vec<i32> = readies.iter().map(|r| r.pid).collect();
    drop(run);
    procfs::wait_until("every probe is dead", TIMEOUT, || {
        all.iter().all(|&pid| !procfs::alive(pid))
    });
}

#[test]
fn children_report_signals_and_follow_exit_rules() {
    let mut run = probe().args(["--fork", "1", "--escape", "1"]).spawn();
    let readies = run.expect_readies(3, TIMEOUT);
    let child = readies.iter().find(|r| r.role == "child").unwrap().clone();
    let escapee = readies
        .iter()
        .find(|r| r.role == "escapee")
        .unwrap()
        .clone();

    // The group signal reaches main and child, not the escapee.
    run.signal_group(libc::SIGUSR1);
    run.expect_line(&format!("got USR1 pid={} ", child.pid), TIMEOUT);
    run.expect_line(&format!("got USR1 pid={} ", run.pid()), TIMEOUT);

    // SAFETY: plain syscall; the escapee is alive (its ready line was just read and nothing
    // killed it).
    unsafe { libc::kill(escapee.pid, libc::SIGTERM) };
    run.expect_line(&format!("got TERM pid={} ", escapee.pid), TIMEOUT);
    run.expect_line(&format!("exit pid={}", escapee.pid), TIMEOUT);
    procfs::wait_until("escapee exited", TIMEOUT, || !procfs::alive(escapee.pid));

    let lines = run.lines_so_far();
    assert!(
        !lines
            .iter()
            .any(|l| l.starts_with(&format!("got USR1 pid={} ", escapee.pid))),
        "{lines:?}"
    );
}

#[test]
fn watchdog_kills_a_stuck_run() {
    let mut run = probe()
        .args(["--exit-on", "none", "--fork", "1"])
        .watchdog(Duration::from_millis(500))
        .spawn();
    let readies = run.expect_readies(2, TIMEOUT);
    let status = run.wait_exit(TIMEOUT);
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(status.signal(), Some(libc::SIGKILL));
    for r in &readies {
        procfs::wait_until("forked probe killed", TIMEOUT, || !procfs::alive(r.pid));
    }
}

#[test]
fn setpgid_false_keeps_the_test_group() {
    let mut run = probe().setpgid(false).spawn();
    let ready = run.expect_ready(TIMEOUT);
    // SAFETY: plain syscall.
    assert_eq!(ready.pgid, unsafe { libc::getpgrp() });
    run.signal(libc::SIGQUIT);
    assert_eq!(run.wait_exit(TIMEOUT).code(), Some(0));
}

#[test]
fn expect_line_keeps_unmatched_lines() {
    let mut run = probe().args(["--fork", "1"]).spawn();
    // Ask for the lines in an order that may differ from the arrival order.
    run.expect_line("role=main", TIMEOUT);
    run.expect_line("role=child", TIMEOUT);
    assert_eq!(run.announced_pids().len(), 2);
}

#[test]
fn temp_dir_is_unique_and_removed() {
    let a = temp_dir("self test");
    let b = temp_dir("self test");
    assert_ne!(a.path(), b.path());
    std::fs::write(a.join("f"), "x").unwrap();
    let path = a.path().to_path_buf();
    assert!(path.is_dir());
    drop(a);
    assert!(!path.exists());
}

#[test]
fn bin_paths_point_into_the_target_dir() {
    assert!(bin("sigprobe").is_file(), "{:?}", bin("sigprobe"));
    assert!(bin("reap").ends_with("reap"));
}
