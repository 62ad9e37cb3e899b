//! reap --cgroup: COMMAND in a cgroup v2 of its own. Leftovers are what is
//! still in it, wherever they were re-parented; KILL is `cgroup.kill`; the
//! wait for the tree to end is `cgroup.events`, not a walk of `/proc`; where
//! the cgroup cannot be made, 125 and nothing started.
//!
//! Each test has a twin without `--cgroup` that shows what the option
//! changes. They need root and a writable cgroup2 mount (else skipped, and
//! counted); the refusals also need `unshare` for a mount namespace of
//! their own (the machine's mounts are never changed).

use crate::kit::{Run, TIMEOUT};
use crate::procfs;
use crate::reap_kit::{reap, Guard};
use crate::skip;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// The cgroup2 directory this test process runs in, if root may make a
/// cgroup below it; else the test is skipped (and counted).
fn cgroup_or_skip(test: &str) -> Option<PathBuf> {
    if let Some(why) = skip::needs_root() {
        skip::skip(test, &why);
        return None;
    }
    let own = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    let rel = own.lines().find_map(|l| l.strip_prefix("0::"));
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let mount = mountinfo
        .lines()
        .filter(|l| {
            l.split(" - ")
                .nth(1)
                .is_some_and(|t| t.starts_with("cgroup2 "))
        })
        .filter_map(|l| l.split(' ').nth(4))
        .next_back();
    let (Some(rel), Some(mount)) = (rel, mount) else {
        skip::skip(test, "no cgroup2 mount (cgroup v2 not in use here)");
        return None;
    };
    let dir = PathBuf::from(mount).join(rel.trim_start_matches('/'));
    // Named by the test too: tests run in parallel in one process, and a
    // probe of the same name made by another test refused this one's.
    let probe = dir.join(format!("pgwrap-probe.{}.{test}", std::process::id()));
    let writable = std::fs::create_dir(&probe).is_ok();
    let _ = std::fs::remove_dir(&probe);
    if !writable {
        skip::skip(
            test,
            &format!("cgroup {} is not writable (not delegated)", dir.display()),
        );
        return None;
    }
    Some(dir)
}

/// The processes whose environment holds `PGWRAP_CGROUP_TEST=tag`.
fn marked(tag: &str) -> Vec<i32> {
    let needle = format!("PGWRAP_CGROUP_TEST={tag}");
    procfs::all_pids()
        .into_iter()
        .filter(|&p| {
            std::fs::read(format!("/proc/{p}/environ"))
                .is_ok_and(|env| env.split(|&b| b == 0).any(|v| v == needle.as_bytes()))
        })
        .filter(|&p| procfs::alive(p))
        .collect()
}

/// SIGKILL by pid whatever is still marked `tag`.
struct Marked(String);

impl Drop for Marked {
    fn drop(&mut self) {
        for pid in marked(&self.0) {
            // SAFETY: plain syscall on a pid just read.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
    }
}

fn tag(test: &str, with: bool) -> String {
    format!(
        "{test}.{}.{}",
        std::process::id(),
        if with { "cg" } else { "walk" }
    )
}

/// Hoppers that ignore TERM: each forks its successor and exits at once,
/// so a pid seen is gone a moment later; 20 chains at a time.
const STORM: &str = "trap '' TERM; f() { f & }; i=0; while [ $i -lt 20 ]; do f; i=$((i+1)); done; \
                     echo storm; sleep 0.3";

fn storm(test: &str, with: bool) {
    let Some(_) = cgroup_or_skip(test) else {
        return;
    };
    let tag = tag(test, with);
    let _cleanup = Marked(tag.clone());
    let mut args = vec!["--grace", "0.5s"];
    if with {
        args.push("--cgroup");
    }
    args.extend(["--", "sh", "-c", STORM]);
    let started = Instant::now();
    let mut run = reap(args)
        .env("PGWRAP_CGROUP_TEST", &tag)
        .stderr_piped()
        .spawn();
    run.expect_line("storm", TIMEOUT);
    let status = run.wait_exit(Duration::from_secs(60));
    let took = started.elapsed();
    eprintln!("{test}: the storm ended in {took:?} (--cgroup: {with})");
    assert_eq!(status.code(), Some(0), "{}", run.stderr_all());
    // reap exits only once its tree is gone: nothing of the storm is left.
    let left = marked(&tag);
    assert!(left.is_empty(), "left behind: {left:?}");
}

/// The bound is generous (60 s for what takes well under a second): the
/// point is that it ends and leaves nothing.
#[test]
fn a_fork_storm_ends_within_a_bound_and_leaves_nothing_with_cgroup() {
    storm(
        "a_fork_storm_ends_within_a_bound_and_leaves_nothing_with_cgroup",
        true,
    );
}

/// The twin: this storm's hoppers are re-parented to reap at every hop,
/// so the walk ends it too; what it costs the walk is in scripts/bench.
#[test]
fn a_fork_storm_twin_without_cgroup() {
    storm("a_fork_storm_twin_without_cgroup", false);
}

/// COMMAND enters a PID namespace whose init is not reap's descendant
/// (`nsenter --pid`) and leaves a process there: once its parent exits,
/// the kernel re-parents it to that namespace's init, out of reap's tree.
/// It is still in COMMAND's cgroup.
fn reparented_away(test: &str, with: bool) -> Option<bool> {
    cgroup_or_skip(test)?;
    if let Some(why) = skip::needs_program("unshare", "util-linux")
        .or_else(|| skip::needs_program("nsenter", "util-linux"))
    {
        skip::skip(test, &why);
        return None;
    }
    let tag = tag(test, with);
    let _cleanup = Marked(tag.clone());
    let mut guard = Guard::new();
    // The outside namespace: unshare's child is its init.
    let mut ns = Run::new("unshare")
        .args(["--pid", "--fork", "sh", "-c", "echo init; exec sleep 600"])
        .spawn();
    ns.expect_line("init", TIMEOUT);
    let mut init = 0;
    procfs::wait_until("the namespace's init runs sleep", TIMEOUT, || {
        init = procfs::children_of(ns.pid()).first().copied().unwrap_or(0);
        init > 0 && procfs::cmdline(init).is_some_and(|c| c.first().is_some_and(|a| a == "sleep"))
    });
    guard.watch(init);
    let init_s = init.to_string();
    let mut args = vec!["--grace", "1s"];
    if with {
        args.push("--cgroup");
    }
    let script = "trap '' TERM; sleep 600 & echo left; exit 0";
    args.extend([
        "--", "nsenter", "-t", &init_s, "--pid", "--", "sh", "-c", script,
    ]);
    let mut run = reap(args).env("PGWRAP_CGROUP_TEST", &tag).spawn();
    run.expect_line("left", TIMEOUT);
    assert_eq!(run.wait_exit(TIMEOUT).code(), Some(0));
    let left: Vec<i32> = marked(&tag)
        .into_iter()
        .filter(|&p| procfs::cmdline(p).is_some_and(|c| c.first().is_some_and(|a| a == "sleep")))
        .collect();
    for &p in &left {
        guard.watch(p);
        assert_eq!(
            procfs::ppid(p),
            Some(init),
            "re-parented to the namespace's init"
        );
    }
    Some(left.is_empty())
}

#[test]
fn a_leftover_reparented_out_of_reaps_tree_is_still_killed_with_cgroup() {
    let test = "a_leftover_reparented_out_of_reaps_tree_is_still_killed_with_cgroup";
    if let Some(gone) = reparented_away(test, true) {
        assert!(gone, "the leftover outside reap's tree was not killed");
    }
}

/// The twin: ancestry cannot reach it; it outlives reap.
#[test]
fn a_leftover_reparented_out_of_reaps_tree_survives_without_cgroup() {
    let test = "a_leftover_reparented_out_of_reaps_tree_survives_without_cgroup";
    if let Some(gone) = reparented_away(test, false) {
        assert!(
            !gone,
            "without --cgroup the walk found a process outside reap's tree"
        );
    }
}

/// reap under `strace -f`: how many `/proc` files its processes open while
/// 20 leftovers that ignore TERM exit one by one during the grace (each
/// exit a wake).
fn proc_opens(test: &str, with: bool) -> Option<usize> {
    cgroup_or_skip(test)?;
    if let Some(why) = skip::needs_program("strace", "strace") {
        skip::skip(test, &why);
        return None;
    }
    let dir = crate::kit::temp_dir("cgroup-strace");
    let out = dir.join("trace");
    let tag = tag(test, with);
    let _cleanup = Marked(tag.clone());
    let script = "trap '' TERM; i=1; while [ $i -le 20 ]; do (sleep 0.$((i*4/10))$((i*4%10))) & \
                  i=$((i+1)); done; exit 0";
    let mut args = vec![
        "-f".to_string(),
        "-qq".into(),
        "-e".into(),
        "trace=open,openat".into(),
        "-o".into(),
        out.display().to_string(),
        crate::kit::bin("reap").display().to_string(),
        "--grace".into(),
        "30s".into(),
    ];
    if with {
        args.push("--cgroup".into());
    }
    args.extend(["--", "sh", "-c", script].map(String::from));
    let mut run = Run::new("strace")
        .args(args)
        .env("PGWRAP_CGROUP_TEST", &tag)
        .spawn();
    assert_eq!(run.wait_exit(Duration::from_secs(60)).code(), Some(0));
    let trace = std::fs::read_to_string(&out).unwrap_or_default();
    let opens = trace.lines().filter(|l| l.contains("\"/proc/")).count();
    let others = trace
        .lines()
        .filter(|l| l.contains("\"/proc/") && !l.contains("\"/proc/self/"))
        .count();
    eprintln!("{test}: {opens} opens of /proc, {others} of other processes' files");
    Some(others)
}

#[test]
fn the_wait_for_the_tree_walks_no_proc_with_cgroup() {
    let test = "the_wait_for_the_tree_walks_no_proc_with_cgroup";
    if let Some(others) = proc_opens(test, true) {
        assert_eq!(others, 0, "a /proc file of another process was opened");
    }
}

/// The twin: without --cgroup, every wake is a walk.
#[test]
fn the_wait_for_the_tree_walks_proc_without_cgroup() {
    let test = "the_wait_for_the_tree_walks_proc_without_cgroup";
    if let Some(others) = proc_opens(test, false) {
        assert!(
            others >= 20,
            "only {others} opens of other processes' /proc files"
        );
    }
}

/// `reap [--cgroup] -- touch MARKER` in a mount namespace of its own
/// after `prepare` (shell): the exit status, stderr, and whether COMMAND
/// ran.
fn refused(test: &str, prepare: &str, with: bool) -> Option<(Option<i32>, String, bool)> {
    cgroup_or_skip(test)?;
    if let Some(why) = skip::needs_program("unshare", "util-linux") {
        skip::skip(test, &why);
        return None;
    }
    let dir = crate::kit::temp_dir("cgroup-refused");
    let marker = dir.join("ran");
    let reap = crate::kit::bin("reap");
    let opt = if with { "--cgroup" } else { "" };
    let script = format!(
        "{prepare} && exec '{}' {opt} -- touch '{}'",
        reap.display(),
        marker.display()
    );
    let mut run = Run::new("unshare")
        .args(["--mount", "--propagation", "private", "sh", "-c", &script])
        .stderr_piped()
        .spawn();
    let status = run.wait_exit(TIMEOUT);
    Some((status.code(), run.stderr_all(), marker.exists()))
}

/// The cgroup2 mount of this namespace, read-only.
const READ_ONLY: &str =
    "m=$(awk '$9 == \"cgroup2\" { print $5 }' /proc/self/mountinfo | tail -n 1) \
                         && mount -o remount,bind,ro \"$m\"";
/// No cgroup2 mount left in this namespace.
const UNMOUNTED: &str =
    "for m in $(awk '$9 == \"cgroup2\" { print $5 }' /proc/self/mountinfo | sort -r); \
                         do umount -l \"$m\" || exit 1; done; true";

fn assert_refused(got: Option<(Option<i32>, String, bool)>, why: &str) {
    let Some((code, stderr, ran)) = got else {
        return;
    };
    assert_eq!(code, Some(125), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
    assert!(stderr.starts_with("reap: --cgroup: "), "{stderr}");
    assert!(stderr.contains(why), "{stderr}");
    assert!(!ran, "COMMAND ran");
}

fn assert_ran(got: Option<(Option<i32>, String, bool)>) {
    let Some((code, stderr, ran)) = got else {
        return;
    };
    assert_eq!(code, Some(0), "{stderr}");
    assert!(ran, "COMMAND did not run");
}

#[test]
fn refused_where_the_cgroup_is_read_only() {
    let test = "refused_where_the_cgroup_is_read_only";
    assert_refused(refused(test, READ_ONLY, true), "not writable");
}

#[test]
fn refused_where_the_cgroup_is_read_only_twin_without_cgroup_runs() {
    let test = "refused_where_the_cgroup_is_read_only_twin_without_cgroup_runs";
    assert_ran(refused(test, READ_ONLY, false));
}

#[test]
fn refused_without_a_cgroup2_mount() {
    let test = "refused_without_a_cgroup2_mount";
    assert_refused(refused(test, UNMOUNTED, true), "no cgroup2 mount");
}

#[test]
fn refused_without_a_cgroup2_mount_twin_without_cgroup_runs() {
    let test = "refused_without_a_cgroup2_mount_twin_without_cgroup_runs";
    assert_ran(refused(test, UNMOUNTED, false));
}

/// reap in a threaded cgroup: what it would make below cannot hold a
/// process.
fn threaded(test: &str, with: bool) -> Option<(Option<i32>, String, bool)> {
    let own = cgroup_or_skip(test)?;
    let parent = own.join(format!("pgwrap-threaded.{}.{with}", std::process::id()));
    let inner = parent.join("t");
    std::fs::create_dir_all(&inner).expect("make the test's cgroups");
    std::fs::write(inner.join("cgroup.type"), "threaded").expect("make a threaded cgroup");
    let dir = crate::kit::temp_dir("cgroup-threaded");
    let marker = dir.join("ran");
    let script = format!(
        "echo $$ > '{}/cgroup.procs' && exec '{}' {} -- touch '{}'",
        inner.display(),
        crate::kit::bin("reap").display(),
        if with { "--cgroup" } else { "" },
        marker.display()
    );
    let mut run = Run::new("sh").args(["-c", &script]).stderr_piped().spawn();
    let status = run.wait_exit(TIMEOUT);
    let got = (status.code(), run.stderr_all(), marker.exists());
    procfs::wait_until("the test's cgroups are removed", TIMEOUT, || {
        let _ = std::fs::remove_dir(&inner);
        std::fs::remove_dir(&parent).is_ok()
    });
    Some(got)
}

#[test]
fn refused_in_a_threaded_cgroup() {
    let test = "refused_in_a_threaded_cgroup";
    assert_refused(threaded(test, true), "internal processes");
}

#[test]
fn refused_in_a_threaded_cgroup_twin_without_cgroup_runs() {
    let test = "refused_in_a_threaded_cgroup_twin_without_cgroup_runs";
    assert_ran(threaded(test, false));
}

/// COMMAND's first instruction already runs in the cgroup, the cleanup
/// runs outside it, and the cgroup is gone before the cleanup starts; the
/// exit event carries the job's CPU time.
#[test]
fn command_runs_inside_and_the_cleanup_outside_the_removed_cgroup() {
    let test = "command_runs_inside_and_the_cleanup_outside_the_removed_cgroup";
    let Some(own) = cgroup_or_skip(test) else {
        return;
    };
    let dir = crate::kit::temp_dir("cgroup-inside");
    let events = dir.join("events");
    let cleanup = "echo cleanup=$(grep ^0:: /proc/self/cgroup)";
    let mut run = reap([
        "--cgroup",
        "--events",
        &events.display().to_string(),
        "--cleanup",
        cleanup,
        "--",
        "sh",
        "-c",
        "echo command=$(grep ^0:: /proc/self/cgroup)",
    ])
    .spawn();
    let command = run.expect_line("command=", TIMEOUT);
    let cleanup = run.expect_line("cleanup=", TIMEOUT);
    assert_eq!(run.wait_exit(TIMEOUT).code(), Some(0));
    let rel = command.trim_start_matches("command=0::").to_string();
    let name = rel.rsplit('/').next().unwrap_or_default().to_string();
    assert!(name.starts_with("reap."), "{command}");
    assert!(
        !own.join(&name).exists(),
        "the cgroup {name} is still there"
    );
    assert!(
        !cleanup.contains(&name),
        "the cleanup ran inside: {cleanup}"
    );
    let log = std::fs::read_to_string(&events).unwrap_or_default();
    let exit = log
        .lines()
        .find(|l| l.contains("\"event\":\"exit\""))
        .unwrap_or_default();
    assert!(exit.contains("\"cpu_usec\":"), "{log}");
}

/// The cleanup's own leftovers are swept too (by the walk: the cleanup
/// runs outside COMMAND's cgroup, which is gone by then).
#[test]
fn the_cleanups_leftovers_are_swept_after_the_cgroup_is_removed() {
    let test = "the_cleanups_leftovers_are_swept_after_the_cgroup_is_removed";
    if cgroup_or_skip(test).is_none() {
        return;
    }
    let tag = tag(test, true);
    let _cleanup = Marked(tag.clone());
    let mut run = reap([
        "--cgroup",
        "--grace",
        "0.5s",
        "--cleanup",
        "(trap '' TERM; exec sleep 600) & echo cleanup-left",
        "--",
        "true",
    ])
    .env("PGWRAP_CGROUP_TEST", &tag)
    .stderr_piped()
    .spawn();
    run.expect_line("cleanup-left", TIMEOUT);
    assert_eq!(
        run.wait_exit(TIMEOUT).code(),
        Some(0),
        "{}",
        run.stderr_all()
    );
    let left = marked(&tag);
    assert!(left.is_empty(), "the cleanup's leftover survived: {left:?}");
}

/// The guarantee holds with --cgroup: reap's back SIGKILLed while COMMAND
/// runs; the front kills COMMAND's cgroup, runs the cleanup, removes the
/// cgroup and exits 125.
#[test]
fn a_killed_back_leaves_nothing_and_no_cgroup() {
    let test = "a_killed_back_leaves_nothing_and_no_cgroup";
    let Some(own) = cgroup_or_skip(test) else {
        return;
    };
    let tag = tag(test, true);
    let _cleanup = Marked(tag.clone());
    let mut run = reap([
        "--cgroup",
        "--cleanup",
        "echo cause=$REAP_CAUSE",
        "--",
        "sh",
        "-c",
        "(trap '' TERM; exec sleep 600) & echo running; exec sleep 600",
    ])
    .env("PGWRAP_CGROUP_TEST", &tag)
    .stderr_piped()
    .spawn();
    run.expect_line("running", TIMEOUT);
    let back = crate::reap_kit::back_of(run.pid());
    let name = format!("reap.{}", run.pid());
    assert!(own.join(&name).exists(), "no cgroup {name}");
    // SAFETY: plain syscall; the back is our grandchild, alive (its
    // front waits for it).
    unsafe { libc::kill(back, libc::SIGKILL) };
    run.expect_line("cause=lost", TIMEOUT);
    assert_eq!(run.wait_exit(TIMEOUT).code(), Some(125));
    let left = marked(&tag);
    assert!(left.is_empty(), "left behind: {left:?}");
    assert!(
        !own.join(&name).exists(),
        "the cgroup {name} is still there"
    );
}

/// A process of the job that moves itself out of COMMAND's cgroup (into
/// reap's own, which is delegated) while still reap's child is found by
/// the walk once the cgroup is empty: reap still leaves nothing.
#[test]
fn a_child_that_left_the_cgroup_is_still_swept() {
    let test = "a_child_that_left_the_cgroup_is_still_swept";
    let Some(own) = cgroup_or_skip(test) else {
        return;
    };
    let tag = tag(test, true);
    let _cleanup = Marked(tag.clone());
    let procs = own.join("cgroup.procs").display().to_string();
    let script = format!(
        "sh -c 'echo $$ > {procs} && echo moved && trap \"\" TERM && exec sleep 600' & \
         read x; exit 0"
    );
    let mut run = reap([
        "--cgroup", "-v", "--grace", "0.5s", "--", "sh", "-c", &script,
    ])
    .env("PGWRAP_CGROUP_TEST", &tag)
    .stdin_piped()
    .stderr_piped()
    .spawn();
    run.expect_line("moved", TIMEOUT);
    run.close_stdin();
    assert_eq!(
        run.wait_exit(TIMEOUT).code(),
        Some(0),
        "{}",
        run.stderr_all()
    );
    let left = marked(&tag);
    assert!(left.is_empty(), "left behind: {left:?}");
    assert!(
        run.stderr_all().contains("walking /proc for the rest"),
        "{}",
        run.stderr_all()
    );
}

/// `reap --cgroup -c OUTER -- reap -c INNER -- JOB`, the outer front
/// SIGKILLed with its group (a CI agent's kill): the outer reap kills
/// COMMAND's cgroup, but not what the inner reap guards, which is in that
/// cgroup too. The inner cleanup still runs, once, and the outer one after
/// it, as without `--cgroup` (deadline.rs). `inner`: the inner reap's
/// options.
fn over_an_inner_reap(test: &str, with: bool, inner_opts: &[&str]) {
    if cgroup_or_skip(test).is_none() {
        return;
    }
    let tag = tag(test, with);
    let _cleanup = Marked(tag.clone());
    let dir = crate::kit::temp_dir("cgroup-reap-over-reap");
    let log = dir.join("cleanups");
    let inner = format!("sleep 0.5; echo inner >> '{}'", log.display());
    let outer = format!("echo outer >> '{}'", log.display());
    let reap_bin = crate::kit::bin("reap");
    let mut args = vec!["--cleanup", &outer];
    if with {
        args.push("--cgroup");
    }
    args.extend(["--", reap_bin.to_str().unwrap()]);
    args.extend(inner_opts);
    args.extend(["--cleanup", &inner]);
    args.extend(["--", "sh", "-c", "echo up; exec sleep 600"]);
    let mut run = reap(args)
        .env("PGWRAP_CGROUP_TEST", &tag)
        .setpgid(true)
        .stderr_piped()
        .spawn();
    run.expect_line("up", TIMEOUT);
    let mut guard = Guard::new();
    guard.watch_tree(run.pid());
    run.signal_group(libc::SIGKILL);
    run.wait_exit(TIMEOUT);
    guard.wait_all_gone("both reaps have ended", TIMEOUT + crate::grace::SLACK);
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    assert_eq!(
        text, "inner\nouter\n",
        "the cleanups that ran (--cgroup: {with})"
    );
    let left = marked(&tag);
    assert!(left.is_empty(), "left behind: {left:?}");
}

#[test]
fn an_inner_reaps_cleanup_is_spared_by_the_kill_with_cgroup() {
    over_an_inner_reap(
        "an_inner_reaps_cleanup_is_spared_by_the_kill_with_cgroup",
        true,
        &[],
    );
}

/// With `--exec-cleanup` the inner cleanup holds no mark: it is known by
/// what its reap wrote into the cleanup mark, which `cgroup.kill` waits on
/// until the outer reap has read it.
#[test]
fn an_inner_exec_cleanup_is_spared_by_the_kill_with_cgroup() {
    over_an_inner_reap(
        "an_inner_exec_cleanup_is_spared_by_the_kill_with_cgroup",
        true,
        &["--exec-cleanup"],
    );
}

/// The twin: the walk spares it too.
#[test]
fn an_inner_reaps_cleanup_is_spared_by_the_kill_twin_without_cgroup() {
    over_an_inner_reap(
        "an_inner_reaps_cleanup_is_spared_by_the_kill_twin_without_cgroup",
        false,
        &[],
    );
}

/// Two reaps that are PID 1 of their namespaces in one parent cgroup both
/// name theirs `reap.1`: one must never remove the other's. Here the other
/// reap's cgroup, made a moment ago and still empty, is played by a
/// directory this test makes; a reap as PID 1 of a new PID namespace runs
/// beside it and must leave it as it was.
#[test]
fn a_namesake_cgroup_of_another_reap_is_left_alone() {
    let test = "a_namesake_cgroup_of_another_reap_is_left_alone";
    let Some(own) = cgroup_or_skip(test) else {
        return;
    };
    if let Some(why) = skip::needs_program("unshare", "util-linux") {
        skip::skip(test, &why);
        return;
    }
    let other = own.join("reap.1");
    if std::fs::create_dir(&other).is_err() {
        skip::skip(test, &format!("{} exists already", other.display()));
        return;
    }
    /// The other reap's cgroup, removed when the test ends.
    struct Other(PathBuf);
    impl Drop for Other {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir(&self.0);
        }
    }
    let other = Other(other);
    use std::os::unix::fs::MetadataExt;
    let ino = std::fs::metadata(&other.0).map(|m| m.ino()).unwrap_or(0);
    let mut run = Run::new("unshare")
        .args(["--pid", "--fork", "--mount-proc"])
        .arg(crate::kit::bin("reap"))
        .args(["--cgroup", "--", "sh", "-c"])
        .arg("echo command=$(grep ^0:: /proc/self/cgroup)")
        .stderr_piped()
        .spawn();
    let command = run.expect_line("command=", TIMEOUT);
    assert_eq!(
        run.wait_exit(TIMEOUT).code(),
        Some(0),
        "{}",
        run.stderr_all()
    );
    assert!(
        !command.ends_with("/reap.1"),
        "took the other's name: {command}"
    );
    let now = std::fs::metadata(&other.0).map(|m| m.ino()).ok();
    assert_eq!(now, Some(ino), "the other reap's cgroup reap.1 was removed");
    let name = command.rsplit('/').next().unwrap_or_default();
    assert!(
        !own.join(name).exists(),
        "its own cgroup {name} is still there"
    );
}

/// Beside an inner reap (whose back and cleanup are spared), `--cgroup`'s
/// KILL goes member by member, once: a member that came after that round
/// (here a TERM-proof process the test moves into the cgroup) was never
/// killed, and the sweep waited for it. Now each wake of the KILL stage
/// kills the members it has not killed yet (by pid and start time); the
/// inner reap's end wakes it here.
#[test]
fn a_member_after_the_kill_round_beside_an_inner_reap_is_killed() {
    let test = "a_member_after_the_kill_round_beside_an_inner_reap_is_killed";
    if cgroup_or_skip(test).is_none() {
        return;
    }
    let inner = crate::kit::bin("reap").display().to_string();
    let script = format!(
        "{inner} -c 'sleep 3' -- true & (trap '' TERM; exec sleep 100) & echo up; sleep 0.2"
    );
    let mut run = reap(["-v", "--cgroup", "--grace", "1", "--", "sh", "-c", &script])
        .stderr_piped()
        .spawn();
    run.expect_line("up", TIMEOUT);
    let mut guard = Guard::new();
    guard.watch_tree(run.pid());
    // The KILL stage, member by member.
    procfs::wait_until("reap's KILL round", TIMEOUT, || {
        run.stderr_so_far().contains("sent KILL to")
    });
    let err = run.stderr_so_far();
    let cgroup = (err.split("made cgroup ").nth(1))
        .and_then(|r| r.split(" for COMMAND").next())
        .map(PathBuf::from)
        .unwrap_or_else(|| panic!("no cgroup in {err:?}"));
    let mut late = std::process::Command::new("sh")
        .args(["-c", "trap '' TERM; exec sleep 100"])
        .spawn()
        .expect("sh");
    let late_pid = late.id() as i32;
    guard.watch(late_pid);
    std::fs::write(cgroup.join("cgroup.procs"), late_pid.to_string()).expect("move it in");
    let ended = (0..((TIMEOUT + Duration::from_secs(5)).as_millis() / 20))
        .find(|_| {
            std::thread::sleep(Duration::from_millis(20));
            run.try_exit().is_some()
        })
        .is_some();
    let alive = procfs::alive(late_pid);
    let _ = late.kill();
    let _ = late.wait();
    assert!(
        ended && !alive,
        "reap ended: {ended}, the late member alive: {alive}: {}",
        run.stderr_so_far()
    );
    guard.wait_all_gone("both reaps have ended", TIMEOUT);
}

/// A member whose group is led from outside reap's PID namespace: here a
/// process `nsenter --pid` put into the namespace of a reap that is PID 1
/// there, moved into reap's cgroup, in nsenter's group. `getpgid` answers
/// 0 for it, which rustix's typed `Pid` cannot hold: `--stop-all`'s round
/// over the members panicked in a debug reap (and built a `NonZero` of 0 in
/// a release one). 0 is not COMMAND's group: the member gets the signal.
#[test]
fn a_member_whose_group_is_led_from_outside_the_namespace_gets_stop_all() {
    let test = "a_member_whose_group_is_led_from_outside_the_namespace_gets_stop_all";
    if cgroup_or_skip(test).is_none() {
        return;
    }
    if let Some(why) = skip::needs_program("unshare", "util-linux")
        .or_else(|| skip::needs_program("nsenter", "util-linux"))
    {
        skip::skip(test, &why);
        return;
    }
    let mut run = Run::new("unshare")
        .args(["--pid", "--fork", "--mount-proc"])
        .arg(crate::kit::bin("reap"))
        .args(["-v", "--cgroup", "--stop-all", "--grace", "60s", "--"])
        .args(["sh", "-c", "echo up; exec sleep 600"])
        .stderr_piped()
        .spawn();
    run.expect_line("up", TIMEOUT);
    let mut guard = Guard::new();
    guard.watch_tree(run.pid());
    let mut inner = 0;
    procfs::wait_until("reap runs as the namespace's init", TIMEOUT, || {
        inner = procfs::children_of(run.pid()).first().copied().unwrap_or(0);
        inner > 0
    });
    let err = run.stderr_so_far();
    let cgroup = (err.split("made cgroup ").nth(1))
        .and_then(|r| r.split(" for COMMAND").next())
        .map(PathBuf::from)
        .unwrap_or_else(|| panic!("no cgroup in {err:?}"));
    let mut nsenter = std::process::Command::new("nsenter")
        .args(["-t", &inner.to_string(), "--pid", "--", "sleep", "600"])
        .spawn()
        .expect("nsenter");
    guard.watch(nsenter.id() as i32);
    let mut member = 0;
    procfs::wait_until("nsenter's child runs sleep", TIMEOUT, || {
        member = procfs::children_of(nsenter.id() as i32)
            .first()
            .copied()
            .unwrap_or(0);
        member > 0
            && procfs::cmdline(member).is_some_and(|c| c.first().is_some_and(|a| a == "sleep"))
    });
    guard.watch(member);
    std::fs::write(cgroup.join("cgroup.procs"), member.to_string()).expect("move it in");
    crate::grace::kill(inner, libc::SIGTERM);
    let status = nsenter.wait().expect("nsenter's status");
    let code = run.wait_exit(TIMEOUT).code();
    let err = run.stderr_all();
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(code, Some(143), "{err}");
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(status.signal(), Some(libc::SIGTERM), "{status:?}: {err}");
}
