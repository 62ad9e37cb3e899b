//! System calls refused (strace's fault injection, as a container's seccomp
//! profile refuses them with EPERM or ENOSYS, or a filter with EINVAL): the
//! tool takes its fallback, or exits 125 with one line naming the call;
//! never a spin, never a hang, never COMMAND left running in silence. The
//! whole matrix is `scripts/refusal-matrix`; here, the cells that were
//! defects.

use super::faults::bounded_output;
use crate::kit::{bin, temp_dir, Run, TIMEOUT};
use crate::procfs;
use crate::skip;
use std::os::unix::process::ExitStatusExt;
use std::process::Command;
use std::time::Duration;

const ERRORS: [&str; 3] = ["ENOSYS", "EPERM", "EINVAL"];

/// reap with `waitid` refused. In the front alone (strace without `-f`
/// traces the process it starts only): the front learns the back's end
/// from `/proc` and how it ended from its last record. Everywhere: the back
/// reads COMMAND's status from `/proc` as well. Either way reap ends as
/// COMMAND ended, and says nothing. Before, both hung: the front took the
/// back for lost and then waited for ever on its zombie, and the back's
/// sweep waited for ever on zombies it could not reap. (Then everywhere
/// it ended with 125 and "its exit status is lost", which it is not:
/// [`a_refused_waitid_still_waits_for_command`].)
#[test]
fn reap_with_waitid_refused_ends_and_does_not_hang() {
    let test = "refusals::reap_with_waitid_refused_ends_and_does_not_hang";
    if let Some(why) = skip::needs_program("strace", "strace") {
        return skip::skip(test, &why);
    }
    for err in ERRORS {
        for (place, follow) in [("the front", false), ("every process", true)] {
            let mut cmd = Command::new("strace");
            cmd.args(["-qq", "-o", "/dev/null", "-e", "trace=waitid", "-e"])
                .arg(format!("inject=waitid:error={err}"));
            if follow {
                cmd.arg("-f");
            }
            cmd.arg(bin("reap")).args(["--", "sleep", "0.2"]);
            let out = bounded_output(cmd, Duration::from_secs(30));
            let stderr = String::from_utf8_lossy(&out.stderr);
            let case = format!("waitid refused with {err} in {place}");
            assert_eq!(
                out.status.code(),
                Some(0),
                "{case}: {:?}, {stderr:?}",
                out.status
            );
            assert_eq!(stderr, "", "{case}: stderr");
        }
    }
}

/// pgwrap and graceful with `kill` refused: a forwarded TERM (graceful's
/// stop signal) still reaches COMMAND, through its pidfd. With
/// `pidfd_send_signal` refused too, no way to signal is left: the tool
/// exits 125 with one line naming the calls, and COMMAND gets its
/// `--pdeathsig` KILL. Before, the TERM was dropped in silence and COMMAND
/// ran on.
#[test]
fn a_refused_kill_does_not_drop_a_forwarded_term() {
    let test = "refusals::a_refused_kill_does_not_drop_a_forwarded_term";
    if let Some(why) = skip::needs_program("strace", "strace") {
        return skip::skip(test, &why);
    }
    for tool in ["pgwrap", "graceful"] {
        for err in ERRORS {
            for calls in [&["kill"][..], &["kill", "pidfd_send_signal"][..]] {
                let case = format!("{tool}, {} refused with {err}", calls.join(" and "));
                let mut run = Run::new("strace")
                    .args(["-f", "-qq", "-o", "/dev/null"])
                    .arg(format!("-etrace={}", calls.join(",")))
                    .args(calls.iter().map(|c| format!("-einject={c}:error={err}")))
                    .arg(bin(tool))
                    .arg("--")
                    .arg(bin("sigprobe"))
                    .stderr_piped()
                    .spawn();
                let probe = run.expect_ready(TIMEOUT);
                // SAFETY: kill(2) of the tool, a live process of this test.
                assert_eq!(
                    unsafe { libc::kill(probe.ppid, libc::SIGTERM) },
                    0,
                    "{case}"
                );
                let status = run.wait_exit(Duration::from_secs(20));
                let stderr = run.stderr_all();
                procfs::wait_until(&format!("{case}: COMMAND gone"), TIMEOUT, || {
                    !procfs::alive(probe.pid)
                });
                if calls.len() == 1 {
                    let got = run.lines_so_far().iter().any(|l| l.starts_with("got TERM"));
                    assert!(
                        got && (status.code() == Some(0) || status.signal() == Some(libc::SIGTERM)),
                        "{case}: TERM not passed on: {status:?}, {stderr:?}"
                    );
                } else {
                    assert_eq!(status.code(), Some(125), "{case}: {status:?}, {stderr:?}");
                    assert_eq!(
                        stderr.lines().count(),
                        1,
                        "{case}: not one line: {stderr:?}"
                    );
                    assert!(
                        stderr.contains("kill"),
                        "{case}: the call not named: {stderr:?}"
                    );
                }
            }
        }
    }
}

/// reap with `kill` and `pidfd_send_signal` refused: a TERM it cannot pass
/// on is said on one line naming the calls (reap stays COMMAND's subreaper
/// and waits for its end). Before, it was dropped in silence.
#[test]
fn reap_says_a_term_it_cannot_pass_on() {
    let test = "refusals::reap_says_a_term_it_cannot_pass_on";
    if let Some(why) = skip::needs_program("strace", "strace") {
        return skip::skip(test, &why);
    }
    let mut run = Run::new("strace")
        .args([
            "-f",
            "-qq",
            "-o",
            "/dev/null",
            "-etrace=kill,pidfd_send_signal",
        ])
        .args([
            "-einject=kill:error=EPERM",
            "-einject=pidfd_send_signal:error=EPERM",
        ])
        .arg(bin("reap"))
        .arg("--")
        .arg(bin("sigprobe"))
        .args(["--sleep-ms", "1500"])
        .stderr_piped()
        .spawn();
    let probe = run.expect_ready(TIMEOUT);
    let front = procfs::ppid(probe.ppid).unwrap_or(0);
    // SAFETY: kill(2) of reap's front, a live process of this test.
    assert_eq!(unsafe { libc::kill(front, libc::SIGTERM) }, 0);
    run.wait_exit(Duration::from_secs(20));
    let stderr = run.stderr_all();
    assert!(
        stderr.contains("unable to send TERM") && stderr.contains("kill"),
        "the TERM dropped in silence: {stderr:?}"
    );
}

/// `TOOL -- ARGS` under strace, with every `call` of the tree refused with
/// `err`; its output, within 30 s.
fn refused(tool: &str, call: &str, err: &str, args: &[&str]) -> std::process::Output {
    let mut cmd = Command::new("strace");
    cmd.args(["-f", "-qq", "-o", "/dev/null"])
        .arg(format!("-etrace={call}"))
        .arg(format!("-einject={call}:error={err}"))
        .arg(bin(tool))
        .arg("--")
        .args(args);
    bounded_output(cmd, Duration::from_secs(30))
}

/// reap with `prctl(PR_SET_CHILD_SUBREAPER)` or `signalfd4` refused: 125
/// and one line naming what failed, without Rust's "(os error N)", and
/// COMMAND never started. Before, the front warned, the back failed, and
/// the front then said the back had ended: three lines for prctl, two
/// for signalfd4 (the front's and the back's).
#[test]
fn reap_says_a_refused_subreaper_or_signalfd_on_one_line() {
    let test = "refusals::reap_says_a_refused_subreaper_or_signalfd_on_one_line";
    if let Some(why) = skip::needs_program("strace", "strace") {
        return skip::skip(test, &why);
    }
    let dir = temp_dir("refused-start");
    let mark = dir.join("started");
    let script = format!("touch {}", mark.display());
    for (call, what) in [
        ("prctl", "unable to become a child subreaper: "),
        ("signalfd4", "unable to open a signalfd: "),
    ] {
        for err in ERRORS {
            let case = format!("reap, {call} refused with {err}");
            let out = refused("reap", call, err, &["sh", "-c", &script]);
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(
                out.status.code(),
                Some(125),
                "{case}: {:?}, {stderr:?}",
                out.status
            );
            assert_eq!(
                stderr.lines().count(),
                1,
                "{case}: not one line: {stderr:?}"
            );
            assert!(
                stderr.starts_with(&format!("reap: {what}")) && !stderr.contains("(os error"),
                "{case}: {stderr:?}"
            );
            assert!(!mark.exists(), "{case}: COMMAND was started");
        }
    }
}

/// Each tool with `signalfd4` refused while `NOTIFY_SOCKET` is set: 125,
/// and no notification socket or directory left in the temporary
/// directory. Before, each tool had made its relay's directory already
/// and exited without removing it.
#[test]
fn a_refused_start_leaves_no_notification_socket() {
    let test = "refusals::a_refused_start_leaves_no_notification_socket";
    if let Some(why) = skip::needs_program("strace", "strace") {
        return skip::skip(test, &why);
    }
    let dir = temp_dir("refused-notify");
    // Short enough for a socket's path (a sun_path holds 108 bytes).
    struct Tmp(std::path::PathBuf);
    impl Drop for Tmp {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
    let tmp = Tmp(std::path::PathBuf::from(format!(
        "/tmp/pgw-rn.{}",
        std::process::id()
    )));
    std::fs::create_dir(&tmp.0).unwrap();
    let tmp = &tmp.0;
    let upstream = dir.join("notify");
    let _upstream = std::os::unix::net::UnixDatagram::bind(&upstream).unwrap();
    for tool in ["pgwrap", "graceful", "reap"] {
        let mut cmd = Command::new("strace");
        cmd.args(["-f", "-qq", "-o", "/dev/null"])
            .args(["-etrace=signalfd4", "-einject=signalfd4:error=EPERM"])
            .arg(bin(tool))
            .args(["--", "true"])
            .env("NOTIFY_SOCKET", &upstream)
            .env("TMPDIR", tmp)
            .env_remove("RUNTIME_DIRECTORY");
        let out = bounded_output(cmd, Duration::from_secs(30));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(125), "{tool}: {stderr:?}");
        assert!(
            !stderr.contains("notification socket"),
            "{tool}: {stderr:?}"
        );
        let left: Vec<_> = std::fs::read_dir(tmp)
            .unwrap()
            .filter_map(|e| e.ok().map(|e| e.file_name()))
            .collect();
        for name in &left {
            let d = tmp.join(name);
            for f in std::fs::read_dir(&d).into_iter().flatten().flatten() {
                let _ = std::fs::remove_file(f.path());
            }
            let _ = std::fs::remove_dir(&d);
        }
        assert!(left.is_empty(), "{tool}: left in TMPDIR: {left:?}");
    }
}

/// Each tool with `read` refused. A static tool (the build images carry)
/// has no loader to meet the refusal first: its first read is its own,
/// of its signalfd, made before COMMAND starts, so it exits 125 with one
/// line naming it, and nothing is started. Before, pgwrap and graceful
/// spun (the signalfd readable, each read refused: 6 s of CPU in 9 s),
/// and reap's back took the refused read of the front's pipe for the
/// front's death and ended by KILL (137). A dynamic tool's loader reads
/// first: 127, before the tool runs.
#[test]
fn a_refused_read_is_said_before_anything_starts() {
    let test = "refusals::a_refused_read_is_said_before_anything_starts";
    if let Some(why) = skip::needs_program("strace", "strace") {
        return skip::skip(test, &why);
    }
    // COMMAND: a static busybox (a dynamic one would meet the refusal in
    // its own loader and end at once), marking that it started.
    let busybox = "/bin/busybox";
    if !std::path::Path::new(busybox).exists() {
        return skip::skip(test, "no /bin/busybox (apt-get install busybox-static)");
    }
    let dir = temp_dir("refused-read");
    let mark = dir.join("started");
    let script = format!("touch {}; exec sleep 2", mark.display());
    for tool in ["pgwrap", "graceful", "reap"] {
        for err in ERRORS {
            let case = format!("{tool}, read refused with {err}");
            let out = refused(tool, "read", err, &[busybox, "sh", "-c", &script]);
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(!mark.exists(), "{case}: COMMAND was started");
            if out.status.code() == Some(127) && !crate::kit::static_pass() {
                continue; // the dynamic loader's read
            }
            assert_eq!(
                out.status.code(),
                Some(125),
                "{case}: {:?}, {stderr:?}",
                out.status
            );
            assert_eq!(
                stderr.lines().collect::<Vec<_>>(),
                [format!(
                    "{tool}: unable to read its signalfd: {}",
                    describe(err)
                )],
                "{case}"
            );
        }
    }
}

/// strerror's text for the errors of [`ERRORS`].
fn describe(err: &str) -> &'static str {
    match err {
        "ENOSYS" => "Function not implemented",
        "EPERM" => "Operation not permitted",
        _ => "Invalid argument",
    }
}

/// reap with `ppoll` or `setsid` refused: the fallback works (COMMAND's
/// status is reap's) and is said once, on one line, without "(os error
/// N)". Before, a refused ppoll was said twice (by the front and by the
/// back), and a refused setsid read "... Function not implemented (os
/// error 38)".
#[test]
fn reap_says_a_working_fallback_once() {
    let test = "refusals::reap_says_a_working_fallback_once";
    if let Some(why) = skip::needs_program("strace", "strace") {
        return skip::skip(test, &why);
    }
    for call in ["ppoll", "setsid"] {
        for err in ERRORS {
            let case = format!("reap, {call} refused with {err}");
            // COMMAND outlives reap's start, so that reap has to wait for
            // it: one that exits at once may be reaped before reap's first
            // ppoll, and a ppoll never made is no fallback to say.
            let out = refused("reap", call, err, &["sh", "-c", "sleep 0.5; exit 3"]);
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(
                out.status.code(),
                Some(3),
                "{case}: {:?}, {stderr:?}",
                out.status
            );
            assert_eq!(
                stderr.lines().count(),
                1,
                "{case}: not one line: {stderr:?}"
            );
            assert!(!stderr.contains("(os error"), "{case}: {stderr:?}");
        }
    }
}

/// Each tool with `waitid` refused everywhere: COMMAND's end is learnt
/// from its pidfd and `/proc` (a zombie's `exit_code`), so the tool waits
/// for it and ends as it ended, an exit or a signal. Before, the first
/// look at a running COMMAND said "its exit status is lost" and the tool
/// exited 125 at once, COMMAND still running.
#[test]
fn a_refused_waitid_still_waits_for_command() {
    let test = "refusals::a_refused_waitid_still_waits_for_command";
    if let Some(why) = skip::needs_program("strace", "strace") {
        return skip::skip(test, &why);
    }
    for tool in ["pgwrap", "graceful", "reap"] {
        for err in ERRORS {
            for (script, code) in [
                ("sleep 0.5; exit 3", 3),
                ("sleep 0.5; kill -USR1 $$", 128 + libc::SIGUSR1),
            ] {
                let case = format!("{tool}, waitid refused with {err}, COMMAND {script:?}");
                let out = refused(tool, "waitid", err, &["sh", "-c", script]);
                let stderr = String::from_utf8_lossy(&out.stderr);
                let got = out.status.code().or(out.status.signal().map(|s| 128 + s));
                assert_eq!(got, Some(code), "{case}: {:?}, {stderr:?}", out.status);
                assert!(!stderr.contains("lost"), "{case}: {stderr:?}");
            }
        }
    }
}
