//! Readers of /proc for "eventually" facts about processes.
//!
//! Every reader returns `None` / an empty list / `false` when the process is gone, so they can be
//! polled with [`wait_until`].

#![allow(dead_code)]

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

/// Fields of /proc/PID/stat after the command name: index 0 is the state (field 3 of proc(5)),
/// 1 ppid, 2 pgrp, 3 session, ..., 19 starttime.
fn stat_fields(pid: i32) -> Option<Vec<String>> {
    if pid <= 0 {
        return None;
    }
    // Bytes, not text: a process name need not be UTF-8, and a reader that
    // gave up on it would report the process gone while it runs.
    let text = std::fs::read(format!("/proc/{pid}/stat")).ok()?;
    let rest = &text[text.iter().rposition(|&b| b == b')')? + 1..];
    Some(
        String::from_utf8_lossy(rest)
            .split_whitespace()
            .map(str::to_string)
            .collect(),
    )
}

fn stat_num(pid: i32, index: usize) -> Option<i64> {
    stat_fields(pid)?.get(index)?.parse().ok()
}

/// Process state letter (`R`, `S`, `D`, `T`, `t`, `Z`, `X`, ...), `None` if there is no such
/// process.
pub fn state(pid: i32) -> Option<char> {
    stat_fields(pid)?.first()?.chars().next()
}

/// True if the process exists and is a zombie (exited, not yet reaped).
pub fn is_zombie(pid: i32) -> bool {
    state(pid) == Some('Z')
}

/// True if the process exists and is neither a zombie nor dead.
pub fn alive(pid: i32) -> bool {
    matches!(state(pid), Some(s) if s != 'Z' && s != 'X')
}

/// True if the process is stopped (job control `T` or traced `t`).
pub fn is_stopped(pid: i32) -> bool {
    matches!(state(pid), Some('T' | 't'))
}

pub fn ppid(pid: i32) -> Option<i32> {
    stat_num(pid, 1).map(|v| v as i32)
}

pub fn pgid(pid: i32) -> Option<i32> {
    stat_num(pid, 2).map(|v| v as i32)
}

pub fn sid(pid: i32) -> Option<i32> {
    stat_num(pid, 3).map(|v| v as i32)
}

/// Start time in clock ticks since boot (field 22): with the pid, identifies a process.
pub fn start_time(pid: i32) -> Option<u64> {
    stat_num(pid, 19).map(|v| v as u64)
}

/// Every pid currently listed in /proc (processes, not threads), sorted.
pub fn all_pids() -> Vec<i32> {
    let mut pids: Vec<i32> = match std::fs::read_dir("/proc") {
        Ok(dir) => dir
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
            .collect(),
        Err(_) => Vec::new(),
    };
    pids.sort_unstable();
    pids
}

/// (pid, ppid) of every process, read once.
fn parent_map() -> HashMap<i32, i32> {
    all_pids()
        .into_iter()
        .filter_map(|pid| Some((pid, ppid(pid)?)))
        .collect()
}

/// Direct children of `pid` (zombies included), sorted.
pub fn children_of(pid: i32) -> Vec<i32> {
    let mut kids: Vec<i32> = parent_map()
        .into_iter()
        .filter(|&(_, parent)| parent == pid)
        .map(|(child, _)| child)
        .collect();
    kids.sort_unstable();
    kids
}

/// All descendants of `pid` (children, grandchildren, ...; zombies included), sorted. Built from
/// one snapshot of every process's ppid.
pub fn descendants(pid: i32) -> Vec<i32> {
    let map = parent_map();
    let mut by_parent: HashMap<i32, Vec<i32>> = HashMap::new();
    for (&child, &parent) in &map {
        by_parent.entry(parent).or_default().push(child);
    }
    let mut out = Vec::new();
    let mut queue = VecDeque::from([pid]);
    while let Some(p) = queue.pop_front() {
        for &child in by_parent.get(&p).map(Vec::as_slice).unwrap_or(&[]) {
            if child != pid && !out.contains(&child) {
                out.push(child);
                queue.push_back(child);
            }
        }
    }
    out.sort_unstable();
    out
}

/// Every process whose process group is `pgid` (zombies included), sorted.
pub fn group_members(pgid: i32) -> Vec<i32> {
    all_pids()
        .into_iter()
        .filter(|&p| self::pgid(p) == Some(pgid))
        .collect()
}

/// The value of one `Key:` line of /proc/PID/status, trimmed.
pub fn status_field(pid: i32, key: &str) -> Option<String> {
    if pid <= 0 {
        return None;
    }
    // The Name: line holds the process name, which need not be UTF-8.
    let bytes = std::fs::read(format!("/proc/{pid}/status")).ok()?;
    let text = String::from_utf8_lossy(&bytes);
    text.lines().find_map(|line| {
        let (k, v) = line.split_once(':')?;
        (k == key).then(|| v.trim().to_string())
    })
}

fn status_hex(pid: i32, key: &str) -> Option<u64> {
    u64::from_str_radix(&status_field(pid, key)?, 16).ok()
}

/// (SigBlk, SigIgn, SigCgt) of the process. Bit `sig - 1` stands for signal `sig`.
pub fn masks(pid: i32) -> Option<(u64, u64, u64)> {
    Some((
        status_hex(pid, "SigBlk")?,
        status_hex(pid, "SigIgn")?,
        status_hex(pid, "SigCgt")?,
    ))
}

/// Parse a hex mask as printed in /proc/PID/status (e.g. `0000000000000800`).
pub fn parse_mask(hex: &str) -> Option<u64> {
    u64::from_str_radix(hex.trim(), 16).ok()
}

/// The bit of signal `sig` in a /proc signal mask.
pub fn sig_bit(sig: i32) -> u64 {
    1u64 << (sig - 1)
}

/// True if signal `sig` is set in `mask`.
pub fn has_sig(mask: u64, sig: i32) -> bool {
    mask & sig_bit(sig) != 0
}

/// voluntary_ctxt_switches + nonvoluntary_ctxt_switches from /proc/PID/status.
pub fn ctxt_switches(pid: i32) -> Option<u64> {
    let vol: u64 = status_field(pid, "voluntary_ctxt_switches")?.parse().ok()?;
    let nonvol: u64 = status_field(pid, "nonvoluntary_ctxt_switches")?
        .parse()
        .ok()?;
    Some(vol + nonvol)
}

/// The process's voluntary context switches: how often it went to sleep.
pub fn voluntary_switches(pid: i32) -> Option<u64> {
    status_field(pid, "voluntary_ctxt_switches")?.parse().ok()
}

/// Open fd numbers of the process, sorted (`None` if unreadable).
pub fn open_fds(pid: i32) -> Option<Vec<i32>> {
    let mut fds: Vec<i32> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .ok()?
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect();
    fds.sort_unstable();
    Some(fds)
}

/// argv of the process (`None` if gone; empty for zombies and kernel threads).
pub fn cmdline(pid: i32) -> Option<Vec<String>> {
    let raw = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    Some(
        raw.split(|&b| b == 0)
            .filter(|s| !s.is_empty())
            .map(|s| String::from_utf8_lossy(s).into_owned())
            .collect(),
    )
}

/// Poll `cond` every 10 ms until it returns true; panic mentioning `what` after `timeout`.
pub fn wait_until(what: &str, timeout: Duration, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    loop {
        if cond() {
            return;
        }
        if Instant::now() >= deadline {
            panic!("timed out after {timeout:?} waiting until {what}");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}
