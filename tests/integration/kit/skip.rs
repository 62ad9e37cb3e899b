//! Tests that cannot run on this machine say so, and are counted.
//!
//! A skipped test prints `SKIP: TEST: REASON` on stderr and, when the
//! environment names a file in `PGWRAP_SKIP_LOG`, appends the same line to
//! it. `scripts/check` points that variable at a file and prints how many
//! tests were skipped, and why, after `cargo test`: a skip never looks like
//! a pass.

use std::io::Write;

/// Record that `test` did not run because of `reason` (say exactly what is
/// missing). The caller returns right after.
pub fn skip(test: &str, reason: &str) {
    let line = format!("SKIP: {test}: {reason}\n");
    eprint!("{line}");
    if let Some(path) = std::env::var_os("PGWRAP_SKIP_LOG") {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path);
        // One write per line, so concurrent tests never interleave.
        if let Err(e) = file.and_then(|mut f| f.write_all(line.as_bytes())) {
            panic!("cannot record the skip in {path:?}: {e}");
        }
    }
}

/// Why a test needing root and namespaces cannot run here, if it cannot.
pub fn needs_root() -> Option<String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Some("needs root (namespaces, mounts, cgroups); run as root, as CI does".into());
    }
    None
}

/// Why `program` cannot be used, if it is not on PATH.
pub fn needs_program(program: &str, package: &str) -> Option<String> {
    let found = std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(program).is_file()));
    (!found).then(|| format!("`{program}` not found (apt-get install {package})"))
}
