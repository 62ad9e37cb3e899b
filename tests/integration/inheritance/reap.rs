//! What COMMAND and the cleanup inherit from reap's caller: its signal mask
//! and ignored signals, every fd it passed — and none of reap's own (the
//! pipes between front and back, signalfds, pidfds), in both processes of
//! the split and with `--exec-cleanup`.

use crate::kit::{bin, Run, TIMEOUT};
use std::os::unix::process::CommandExt;

/// Run `ARGS... --status` (after `reap OPTIONS -- ` when given) with USR2
/// and PIPE ignored, USR1 blocked and fd 7 open; return the status blocks
/// printed (one per `sigprobe --status`).
fn status_blocks(args: &[String]) -> Vec<Vec<String>> {
    let mut run = Run::new(&args[0])
        .args(&args[1..])
        .configure(|cmd| {
            // SAFETY: runs in the forked child before exec; only
            // async-signal-safe calls (signal, sigprocmask, dup2).
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
        })
        .spawn();
    let lines = run.expect_eof(TIMEOUT);
    assert_eq!(
        run.wait_exit(TIMEOUT).code(),
        Some(0),
        "{args:?}: {lines:?}"
    );
    let mut blocks: Vec<Vec<String>> = Vec::new();
    for line in lines {
        if line.starts_with("SigBlk") {
            blocks.push(Vec::new());
        }
        if let Some(block) = blocks.last_mut() {
            block.push(without_libc_reserved(line));
        }
    }
    blocks
}

/// Signals 32 and 33 belong to the C library; no program can use them.
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
fn command_and_cleanup_get_the_callers_state_and_no_fd_of_reaps() {
    let probe = bin("sigprobe").display().to_string();
    let status = format!("{probe} --status");
    let direct = status_blocks(&[probe.clone(), "--status".into()]);
    assert_eq!(direct.len(), 1);
    assert!(
        direct[0]
            .iter()
            .any(|l| l.starts_with("fds=") && l.contains('7')),
        "{direct:?}"
    );
    let reap = bin("reap").display().to_string();
    for options in [&[][..], &["--exec-cleanup"]] {
        let mut args = vec![reap.clone()];
        args.extend(options.iter().map(|s| s.to_string()));
        args.extend([
            "-c".into(),
            format!("exec {status}"),
            "--".into(),
            probe.clone(),
        ]);
        args.push("--status".into());
        let blocks = status_blocks(&args);
        assert_eq!(blocks.len(), 2, "{options:?}: {blocks:?}");
        assert_eq!(blocks[0], direct[0], "{options:?}: COMMAND");
        assert_eq!(blocks[1], direct[0], "{options:?}: the cleanup");
    }
}
