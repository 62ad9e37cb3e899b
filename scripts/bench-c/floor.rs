//! The same floor in Rust with std, for what the standard library and the
//! static C library cost by themselves: `std::process::Command` (which
//! uses posix_spawn) into a new process group, wait, exit with COMMAND's
//! status. Built by scripts/bench with the release profile's settings
//! (opt-level s, LTO, panic abort, stripped, crt-static).
//!
//! usage: floor-rs COMMAND [ARG]...

use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{exit, Command};

fn main() {
    let mut args = std::env::args_os().skip(1);
    let Some(program) = args.next() else { exit(125) };
    match Command::new(program).args(args).process_group(0).status() {
        Ok(status) => exit(status.code().unwrap_or_else(|| 128 + status.signal().unwrap_or(0))),
        Err(_) => exit(127),
    }
}
