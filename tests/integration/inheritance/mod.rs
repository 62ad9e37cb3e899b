//! What COMMAND inherits: the caller's signal mask and ignored signals (not
//! the tool's own blocked set), every fd the caller passed, none of the
//! tool's own.

/// The nohup rule: a signal the caller left ignored stays ignored unless an option names it.
mod nohup;
/// What reap's COMMAND and cleanup inherit.
mod reap;

use crate::kit::{bin, Run, TIMEOUT};
use std::os::unix::process::CommandExt;

/// `sigprobe --status` started directly, and under each wrapper, with the
/// same caller state: USR2 and PIPE ignored, USR1 blocked, fd 7 open.
fn status_lines(wrapper: &[&str]) -> Vec<String> {
    let mut builder = Run::new(if wrapper.is_empty() {
        bin("sigprobe")
    } else {
        bin(wrapper[0])
    });
    if !wrapper.is_empty() {
        builder = builder.args(&wrapper[1..]).arg("--").arg(bin("sigprobe"));
    }
    let builder = builder.arg("--status").configure(|cmd| {
        // SAFETY: runs in the forked child before exec; only async-signal-safe
        // calls (signal, sigprocmask, dup2/fcntl).
        unsafe {
            cmd.pre_exec(|| {
                libc::signal(libc::SIGUSR2, libc::SIG_IGN);
                libc::signal(libc::SIGPIPE, libc::SIG_IGN);
                let mut set: libc::sigset_t = std::mem::zeroed();
                libc::sigemptyset(&mut set);
                libc::sigaddset(&mut set, libc::SIGUSR1);
                libc::sigprocmask(libc::SIG_SETMASK, &set, std::ptr::null_mut());
                if libc::dup2(2, 7) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    });
    let mut run = builder.spawn();
    let lines = run.expect_eof(TIMEOUT);
    assert_eq!(
        run.wait_exit(TIMEOUT).code(),
        Some(0),
        "{wrapper:?}: {lines:?}"
    );
    lines.into_iter().map(without_libc_reserved).collect()
}

/// Signals 32 and 33 belong to the C library, which may leave them ignored
/// in its own spawn paths; no program can set or use them.
fn without_libc_reserved(line: String) -> String {
    match line.split_once(":\t") {
        Some((name, hex)) if name.starts_with("Sig") => {
            let bits = u64::from_str_radix(hex, 16).unwrap() & !(0b11 << 31);
            format!("{name}:\t{bits:016x}")
        }
        _ => line,
    }
}

#[test]
fn pgwrap_child_gets_the_callers_signal_state_and_fds() {
    let direct = status_lines(&[]);
    assert!(
        direct
            .iter()
            .any(|l| l.starts_with("fds=") && l.contains('7')),
        "{direct:?}"
    );
    let ign = direct.iter().find(|l| l.starts_with("SigIgn")).unwrap();
    assert!(
        ign.ends_with("0000000000001800"),
        "USR2 and PIPE ignored: {ign}"
    );
    for wrapper in [
        &["pgwrap"][..],
        &["pgwrap", "--setsid"],
        &["pgwrap", "--to", "child"],
    ] {
        assert_eq!(status_lines(wrapper), direct, "{wrapper:?}");
    }
}

#[test]
fn sigpipe_default_stays_default() {
    // The Rust runtime ignores SIGPIPE in pgwrap before main; a caller that
    // left it at its default must see COMMAND with nothing ignored at all.
    let mut run = Run::new(bin("pgwrap"))
        .args(["--"])
        .arg(bin("sigprobe"))
        .arg("--status")
        .spawn();
    let lines: Vec<_> = run
        .expect_eof(TIMEOUT)
        .into_iter()
        .map(without_libc_reserved)
        .collect();
    assert_eq!(run.wait_exit(TIMEOUT).code(), Some(0));
    for mask in ["SigBlk", "SigIgn", "SigCgt"] {
        let line = lines.iter().find(|l| l.starts_with(mask)).unwrap();
        assert!(line.ends_with("0000000000000000"), "{line}");
    }
}
