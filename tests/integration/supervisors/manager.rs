//! A real systemd for the tests: booted as PID 1 of private namespaces over
//! a throw-away root, driven with `systemctl` and `journalctl`, torn down
//! when the last test using it lets go.
//!
//! Boot: a cgroup of its own under the host's cgroup2 mount holds
//! `timeout -s KILL` (the hard bound on the manager's life), which runs
//! `unshare` (new pid, mount, uts, ipc, net and cgroup namespaces), whose
//! child runs `tests/systemd/boot` and becomes systemd. That script builds
//! the root (an overlay of the host's / with a tmpfs upper layer), binds the
//! build directory, the helper scripts and an output directory at their own
//! paths, copies the unit files in and boots `proof.target`.
//!
//! Every unit is installed before the boot, so no test ever needs a
//! `daemon-reload` while another one is stopping a unit. `proof.target`
//! names every unit in `Before=`: a unit referenced by an active one stays
//! loaded after a clean stop, so `systemctl show` still reports how its main
//! process ended (an unreferenced unit is garbage-collected and reloaded
//! with `ExecMainCode=0`).
//!
//! Teardown (on drop): SIGRTMIN+4 to systemd (poweroff; in a container it
//! simply exits, and the PID namespace dies with it), SIGKILL if it lingers,
//! each signal by PID after checking that the PID is still the process
//! started here; then the cgroup tree and the scratch directory are removed.

use crate::kit::{bin, temp_dir, TempDir};
use crate::procfs;
use std::collections::HashMap;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

/// `timeout -s KILL` bound on the whole manager, whatever happens to the tests.
const LIFETIME_S: u32 = 150;

/// Patience for the boot and for the teardown.
const BOOT_TIMEOUT: Duration = Duration::from_secs(30);

/// The repository's directory of unit templates and helper scripts.
pub fn systemd_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/systemd")
}

/// A unit file to install: its name and its text, placeholders filled in.
pub struct UnitFile {
    pub name: String,
    pub text: String,
}

/// Fill in a unit template: `@BIN@` is the directory of the built binaries,
/// `@HELPERS@` that of the helper scripts, `@OUT@` the unit's own output
/// directory (see [`Manager::out`]).
pub fn render(name: &str, template: &str, out_root: &Path) -> UnitFile {
    let bin_dir = bin_dir();
    let text = template
        .replace("@BIN@", &bin_dir.to_string_lossy())
        .replace(
            "@HELPERS@",
            &systemd_dir().join("helpers").to_string_lossy(),
        )
        .replace("@OUT@", &out_root.join(name).to_string_lossy());
    UnitFile {
        name: name.to_string(),
        text,
    }
}

/// Directory of `pgwrap`, `graceful`, `reap` and `sigprobe`.
pub fn bin_dir() -> PathBuf {
    let pgwrap = bin("pgwrap");
    let dir = pgwrap.parent().expect("binaries live in a directory");
    dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf())
}

/// A running manager. Use [`shared`] to get one.
pub struct Manager {
    /// `timeout`, our child: reaped only in drop.
    launcher: Child,
    /// systemd: host PID and start time (to never signal a reused PID).
    init: (i32, u64),
    /// `unshare`, parent of systemd.
    unshare: (i32, u64),
    /// The cgroup made for the namespaces (host path).
    cgroup: PathBuf,
    /// `units/`, `scratch/`, `out/`, `boot.log`.
    work: TempDir,
    /// How long the boot took (fork to `running`).
    pub boot_time: Duration,
}

/// The properties of a unit that the tests look at.
pub type Props = HashMap<String, String>;

impl Manager {
    /// Boot a manager with `units` installed. `Err` says why this machine
    /// cannot run one (the caller skips); any other failure panics.
    fn boot(work: TempDir, units: &[UnitFile]) -> Result<Manager, String> {
        let t0 = Instant::now();
        let cgroup2 = cgroup2_mount().ok_or("the host has no cgroup2 mount")?;
        let units_dir = work.join("units");
        let scratch = work.join("scratch");
        let out = work.join("out");
        for dir in [&units_dir, &scratch, &out] {
            std::fs::create_dir_all(dir).unwrap();
        }
        let mut before = Vec::new();
        for unit in units {
            std::fs::write(units_dir.join(&unit.name), &unit.text).unwrap();
            std::fs::create_dir_all(out.join(&unit.name)).unwrap();
            before.push(unit.name.as_str());
        }
        std::fs::write(
            units_dir.join("proof.target"),
            format!(
                "[Unit]\nDescription=Test services' boot target\n\
                 Requires=basic.target\nAfter=basic.target\n\
                 # Keeps every test unit loaded after it stops.\nBefore={}\n",
                before.join(" ")
            ),
        )
        .unwrap();

        remove_stale_cgroups(&cgroup2);
        let cgroup = cgroup2.join(format!(
            "pgwrap-proof.{}.{}",
            std::process::id(),
            work.file_name().unwrap().to_string_lossy()
        ));
        std::fs::create_dir(&cgroup)
            .unwrap_or_else(|e| panic!("cannot create cgroup {}: {e}", cgroup.display()));

        let log = std::fs::File::create(work.join("boot.log")).unwrap();
        let binds = [bin_dir(), systemd_dir().join("helpers"), out.clone()];
        let launcher = Command::new("sh")
            .args([
                "-c",
                "echo $$ > \"$1/cgroup.procs\" && shift && exec \"$@\"",
                "sh",
            ])
            .arg(&cgroup)
            .args(["timeout", "-s", "KILL", &LIFETIME_S.to_string()])
            .args(["unshare", "--pid", "--fork", "--kill-child=SIGKILL"])
            .args(["--mount", "--uts", "--ipc", "--net", "--cgroup"])
            .arg(systemd_dir().join("boot"))
            .arg(&scratch)
            .arg(&units_dir)
            .args(&binds)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .process_group(0)
            .spawn()
            .expect("cannot start sh");
        let mut manager = Manager {
            init: (0, 0),
            unshare: (0, 0),
            launcher,
            cgroup,
            work,
            boot_time: Duration::ZERO,
        };

        // timeout -> unshare -> systemd
        let deadline = Instant::now() + BOOT_TIMEOUT;
        let launcher_pid = manager.launcher.id() as i32;
        loop {
            if let Some(&u) = procfs::children_of(launcher_pid).first() {
                if let Some(&i) = procfs::children_of(u).first() {
                    manager.unshare = (u, procfs::start_time(u).unwrap_or(0));
                    manager.init = (i, procfs::start_time(i).unwrap_or(0));
                    break;
                }
            }
            if Instant::now() > deadline || manager.launcher_done() {
                manager.boot_failed("the namespaces' first process did not appear");
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        // Wait for systemd to be the init (the boot script execs it) and the
        // boot to complete.
        loop {
            let cmd = procfs::cmdline(manager.init.0).unwrap_or_default();
            if cmd.first().is_some_and(|c| c.ends_with("/systemd")) {
                let state = manager.exec(&["systemctl", "is-system-running"]);
                let state = String::from_utf8_lossy(&state.stdout).trim().to_string();
                match state.as_str() {
                    "running" => break,
                    "degraded" => {
                        // A unit of the host that cannot run in a container
                        // (the tests' units are not started at boot): say
                        // which, and go on.
                        let failed = manager.exec(&["systemctl", "--failed", "--no-legend"]);
                        eprintln!(
                            "systemd manager: boot degraded by host units:\n{}",
                            String::from_utf8_lossy(&failed.stdout)
                        );
                        break;
                    }
                    _ => {}
                }
            }
            if Instant::now() > deadline || manager.launcher_done() {
                manager.boot_failed("systemd did not reach `running`");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        manager.boot_time = t0.elapsed();
        eprintln!("systemd manager up in {:?}", manager.boot_time);
        Ok(manager)
    }

    fn launcher_done(&mut self) -> bool {
        matches!(self.launcher.try_wait(), Ok(Some(_)))
    }

    fn boot_failed(&mut self, why: &str) -> ! {
        let log = std::fs::read_to_string(self.work.join("boot.log")).unwrap_or_default();
        let journal = if self.init_alive() {
            let out = self.exec(&["journalctl", "-b", "--no-pager", "-p", "notice"]);
            String::from_utf8_lossy(&out.stdout).into_owned()
        } else {
            String::new()
        };
        panic!("systemd manager: {why}\nboot log:\n{log}\njournal:\n{journal}");
    }

    /// Is systemd (the process booted here) still alive?
    pub fn init_alive(&self) -> bool {
        same_process(self.init) && procfs::alive(self.init.0)
    }

    /// Run `args` inside the manager's namespaces (root, mounts, PIDs...).
    pub fn exec(&self, args: &[&str]) -> Output {
        assert!(
            same_process(self.init),
            "the systemd manager is gone (bound to {LIFETIME_S} s)"
        );
        Command::new("nsenter")
            .args(["-t", &self.init.0.to_string(), "-a"])
            .args(args)
            .stdin(Stdio::null())
            .output()
            .expect("cannot run nsenter")
    }

    /// `systemctl ARGS`; panics with the unit's journal unless it succeeds.
    pub fn systemctl(&self, args: &[&str]) -> Output {
        let mut all = vec!["systemctl"];
        all.extend_from_slice(args);
        let out = self.exec(&all);
        if !out.status.success() {
            let unit = args.last().copied().unwrap_or_default();
            panic!(
                "systemctl {}: {}\n{}\njournal of {unit}:\n{}",
                args.join(" "),
                out.status,
                String::from_utf8_lossy(&out.stderr),
                self.journal(unit)
            );
        }
        out
    }

    /// `systemctl start UNIT` (returns once it is started).
    pub fn start(&self, unit: &str) {
        self.systemctl(&["start", unit]);
    }

    /// `systemctl stop UNIT`; returns how long the stop took.
    pub fn stop(&self, unit: &str) -> Duration {
        let t0 = Instant::now();
        self.systemctl(&["stop", unit]);
        t0.elapsed()
    }

    /// `systemctl show` of the properties the tests read.
    pub fn show(&self, unit: &str) -> Props {
        let out = self.systemctl(&[
            "show",
            "-p",
            "ActiveState,SubState,Result,ExecMainCode,ExecMainStatus,ExecMainPID,MainPID",
            unit,
        ]);
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    /// The unit's journal: messages of systemd about it and its output.
    pub fn journal(&self, unit: &str) -> String {
        self.exec(&["journalctl", "--sync"]);
        let out = self.exec(&["journalctl", "-u", unit, "-o", "cat", "--no-pager"]);
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Wait until the journal of `unit` contains `needle`; returns it.
    pub fn journal_has(&self, unit: &str, needle: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let journal = self.journal(unit);
            if journal.contains(needle) {
                return journal;
            }
            if Instant::now() > deadline {
                panic!("the journal of {unit} never showed {needle:?}:\n{journal}");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Host PIDs of the unit's processes (its cgroup, seen from the host).
    pub fn unit_pids(&self, unit: &str) -> Vec<i32> {
        let procs = self
            .cgroup
            .join("manager/system.slice")
            .join(unit)
            .join("cgroup.procs");
        std::fs::read_to_string(procs)
            .unwrap_or_default()
            .split_whitespace()
            .filter_map(|p| p.parse().ok())
            .collect()
    }

    /// The unit's output directory (host path; the same path inside).
    pub fn out(&self, unit: &str) -> PathBuf {
        self.work.join("out").join(unit)
    }

    fn signal_if_same(&self, process: (i32, u64), sig: i32) {
        if process.0 > 1 && same_process(process) {
            // SAFETY: kill(2) of a process started here, checked by start time.
            unsafe { libc::kill(process.0, sig) };
        }
    }
}

impl Drop for Manager {
    fn drop(&mut self) {
        let t0 = Instant::now();
        // Poweroff: systemd stops every unit and exits; the PID namespace
        // (every process in it) dies with it.
        self.signal_if_same(self.init, libc::SIGRTMIN() + 4);
        let deadline = Instant::now() + Duration::from_secs(10);
        while procfs::alive(self.init.0) && same_process(self.init) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        self.signal_if_same(self.init, libc::SIGKILL);
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            match self.launcher.try_wait() {
                Ok(Some(_)) | Err(_) => break,
                Ok(None) if Instant::now() > deadline => {
                    self.signal_if_same(self.unshare, libc::SIGKILL);
                    let _ = self.launcher.kill();
                    let _ = self.launcher.wait();
                    break;
                }
                Ok(None) => std::thread::sleep(Duration::from_millis(10)),
            }
        }
        // The namespace's processes die asynchronously: the cgroups can be
        // removed once they are empty.
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.cgroup.exists() && remove_cgroup_tree(&self.cgroup).is_err() {
            if Instant::now() > deadline {
                eprintln!(
                    "systemd manager: cgroup {} left behind",
                    self.cgroup.display()
                );
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        eprintln!("systemd manager down in {:?}", t0.elapsed());
        // `work` (scratch, units, out) is removed when it drops, after this.
    }
}

/// Is `process` (pid, start time) still the same process?
fn same_process(process: (i32, u64)) -> bool {
    process.0 > 0 && procfs::start_time(process.0) == Some(process.1)
}

/// The host's cgroup2 mount point (`/sys/fs/cgroup` on a unified host,
/// `/sys/fs/cgroup/unified` on a hybrid one).
fn cgroup2_mount() -> Option<PathBuf> {
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    mountinfo.lines().find_map(|line| {
        let (left, right) = line.split_once(" - ")?;
        let target = left.split_whitespace().nth(4)?;
        (right.split_whitespace().next()? == "cgroup2").then(|| PathBuf::from(target))
    })
}

/// rmdir a cgroup and everything below it, deepest first.
fn remove_cgroup_tree(dir: &Path) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        if entry.file_type()?.is_dir() {
            remove_cgroup_tree(&entry.path())?;
        }
    }
    std::fs::remove_dir(dir)
}

/// Remove the empty cgroups of earlier runs whose test process is gone
/// (a run that was SIGKILLed could not clean up; `timeout` ended its manager).
fn remove_stale_cgroups(cgroup2: &Path) {
    let Ok(dir) = std::fs::read_dir(cgroup2) else {
        return;
    };
    for entry in dir.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(pid) = name
            .strip_prefix("pgwrap-proof.")
            .and_then(|rest| rest.split('.').next())
            .and_then(|p| p.parse::<i32>().ok())
        else {
            continue;
        };
        let populated = std::fs::read_to_string(entry.path().join("cgroup.events"))
            .map_or(true, |e| e.contains("populated 1"));
        if !procfs::alive(pid) && !populated {
            let _ = remove_cgroup_tree(&entry.path());
        }
    }
}

/// Why a systemd manager cannot be booted on this machine, if it cannot.
fn cannot_boot() -> Option<String> {
    if let Some(why) = crate::skip::needs_root() {
        return Some(why);
    }
    if !Path::new("/lib/systemd/systemd").exists() {
        return Some("no /lib/systemd/systemd (apt-get install systemd)".into());
    }
    for (program, package) in [
        ("unshare", "util-linux"),
        ("nsenter", "util-linux"),
        ("setpriv", "util-linux"),
        ("timeout", "coreutils"),
    ] {
        if let Some(why) = crate::skip::needs_program(program, package) {
            return Some(why);
        }
    }
    let filesystems = std::fs::read_to_string("/proc/filesystems").unwrap_or_default();
    if !filesystems.split_whitespace().any(|fs| fs == "overlay") {
        // The module may just not be loaded yet.
        let _ = Command::new("modprobe").arg("overlay").output();
        let filesystems = std::fs::read_to_string("/proc/filesystems").unwrap_or_default();
        if !filesystems.split_whitespace().any(|fs| fs == "overlay") {
            return Some("the kernel has no overlay file system".into());
        }
    }
    if cgroup2_mount().is_none() {
        return Some("the host has no cgroup2 mount".into());
    }
    None
}

/// The one manager the tests share, booted on first use with every unit of
/// [`units`](super::units) installed and torn down when the last test holding
/// it drops it. `Err` says why this machine cannot run one.
pub fn shared() -> Result<Arc<Manager>, String> {
    static SLOT: Mutex<Weak<Manager>> = Mutex::new(Weak::new());
    let mut slot = SLOT.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(manager) = slot.upgrade() {
        if manager.init_alive() {
            return Ok(manager);
        }
    }
    if let Some(why) = cannot_boot() {
        return Err(why);
    }
    let work = temp_dir("systemd");
    let units = super::units(&work.join("out"));
    let manager = Arc::new(Manager::boot(work, &units)?);
    *slot = Arc::downgrade(&manager);
    Ok(manager)
}
