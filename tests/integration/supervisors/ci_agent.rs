//! The Buildkite case, with a CI agent of our own that cancels the way the
//! report describes: the job runs as a process-group leader; a cancel is
//! TERM to the group, the agent's grace period, then SIGKILL to the group.
//!
//! The job (`tests/systemd/helpers/ci-steps`) starts a "container" (a
//! daemon in a session of its own that records its PID), runs the command,
//! then a post-command step that ignores TERM and outlasts the grace. Its
//! pre-exit hook (`ci-pre-exit`) stops the container.
//!
//! - Without the suite (`ci-plain`: the steps, then the pre-exit hook), the
//!   agent's SIGKILL ends the job in the post-step: the pre-exit hook never
//!   runs and the container survives.
//! - With `exec reap --cleanup PRE-EXIT -- graceful --grace 1s -- STEPS`
//!   (`ci-hook`), the pre-exit hook runs and no container survives, also
//!   when the agent's SIGKILL comes before the post-step is over, and when
//!   the agent SIGKILLs the job without a cancel first.

use crate::kit::{bin, temp_dir, TempDir, TIMEOUT};
use crate::procfs;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

fn helper(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/systemd/helpers")
        .join(name)
}

/// The agent's view of one job: a process-group leader it started.
struct Agent {
    job: Child,
    pgid: i32,
    reaped: Option<ExitStatus>,
}

/// How a cancel ended.
struct Ending {
    /// The grace ran out and the agent SIGKILLed the group.
    killed: bool,
    status: ExitStatus,
}

impl Agent {
    /// Run `hook OUTDIR` as the leader of a new process group.
    fn start(hook: &Path, out: &Path) -> Agent {
        let bin_dir = bin("reap").parent().unwrap().to_path_buf();
        let job = Command::new(hook)
            .arg(out)
            .env("BIN", bin_dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .process_group(0)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", hook.display()));
        let pgid = job.id() as i32;
        Agent {
            job,
            pgid,
            reaped: None,
        }
    }

    fn signal_group(&self, sig: i32) {
        // The leader is unreaped (the agent reaps it only in `wait_for`), so
        // the group's id cannot have been reused.
        assert!(self.reaped.is_none());
        // SAFETY: plain kill(2) of the group this agent created.
        unsafe { libc::kill(-self.pgid, sig) };
    }

    /// Wait up to `limit` for the job's leader to exit.
    fn wait_for(&mut self, limit: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = self.job.try_wait().expect("waitpid") {
                self.reaped = Some(status);
                return Some(status);
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Cancel: TERM to the group, wait `grace` for the job, else SIGKILL the
    /// group.
    fn cancel(&mut self, grace: Duration) -> Ending {
        self.signal_group(libc::SIGTERM);
        if let Some(status) = self.wait_for(grace) {
            return Ending {
                killed: false,
                status,
            };
        }
        self.kill()
    }

    /// SIGKILL the group at once.
    fn kill(&mut self) -> Ending {
        self.signal_group(libc::SIGKILL);
        let status = self.wait_for(TIMEOUT).expect("a SIGKILLed job exits");
        Ending {
            killed: true,
            status,
        }
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        if self.reaped.is_none() {
            self.signal_group(libc::SIGKILL);
            let _ = self.job.wait();
        }
    }
}

/// A job's output directory. On drop, every process still running from the
/// job (found by the directory's unique path in its command line) and its
/// container (by the PID it recorded) is SIGKILLed.
struct JobDir {
    dir: TempDir,
}

impl JobDir {
    fn new(tag: &str) -> JobDir {
        JobDir { dir: temp_dir(tag) }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn read(&self, name: &str) -> String {
        std::fs::read_to_string(self.dir.join(name)).unwrap_or_default()
    }

    /// Wait until the job is in its command, its container up; returns the
    /// container's PID.
    fn wait_running(&self) -> i32 {
        procfs::wait_until("the job runs its command", TIMEOUT, || {
            self.read("job.log").contains("command running")
        });
        self.read("container.pid")
            .trim()
            .parse()
            .expect("container.pid")
    }

    /// Processes of the job still running (zombies aside), the container
    /// not included.
    fn running(&self) -> Vec<i32> {
        let needle = self.dir.path().to_string_lossy().into_owned();
        procfs::all_pids()
            .into_iter()
            .filter(|&pid| {
                procfs::alive(pid)
                    && procfs::cmdline(pid).is_some_and(|c| c.iter().any(|a| a.contains(&needle)))
            })
            .collect()
    }

    fn container_alive(&self) -> Option<i32> {
        let pid: i32 = self.read("container.pid").trim().parse().ok()?;
        let is_it = procfs::cmdline(pid).is_some_and(|c| c.join(" ") == "sleep infinity");
        (is_it && procfs::alive(pid)).then_some(pid)
    }

    /// Wait until nothing of the job runs any more.
    fn wait_all_gone(&self) {
        procfs::wait_until("every process of the job is gone", TIMEOUT, || {
            self.running().is_empty()
        });
    }
}

impl Drop for JobDir {
    fn drop(&mut self) {
        let mut pids = self.running();
        pids.extend(self.container_alive());
        for pid in pids {
            // SAFETY: kill(2) of a process of this test's job, found just now.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
    }
}

#[test]
fn without_the_suite_a_cancel_skips_pre_exit_and_leaves_the_container() {
    let job = JobDir::new("ci-plain");
    let mut agent = Agent::start(&helper("ci-plain"), job.path());
    let container = job.wait_running();
    let ending = agent.cancel(Duration::from_secs(2));
    assert!(
        ending.killed,
        "the post-step ignores TERM and outlasts the agent's grace: {}",
        ending.status
    );
    // Everything in the agent's group is dead: nothing can run the hook later.
    job.wait_all_gone();
    let log = job.read("job.log");
    assert!(
        log.contains("post: started") && !log.contains("post: done"),
        "{log}"
    );
    assert_eq!(
        job.read("pre-exit"),
        "",
        "the pre-exit hook never ran\n{log}"
    );
    assert_eq!(
        job.container_alive(),
        Some(container),
        "the container, in a session of its own, survived the cancel\n{log}"
    );
    // JobDir's drop kills the container.
}

#[test]
fn with_reap_and_graceful_a_cancel_runs_pre_exit_and_no_container_survives() {
    let job = JobDir::new("ci-hook");
    let mut agent = Agent::start(&helper("ci-hook"), job.path());
    let container = job.wait_running();
    let ending = agent.cancel(Duration::from_secs(3));
    procfs::wait_until("the pre-exit hook ran", TIMEOUT, || {
        !job.read("pre-exit").is_empty()
    });
    let log = job.read("job.log");
    // graceful killed the post-step after its 1 s: the job died of KILL;
    // reap had stopped the container before the hook ran.
    assert_eq!(
        job.read("pre-exit"),
        "container=gone cause=cancel status=137 signal=KILL\n",
        "{log}"
    );
    assert!(!log.contains("post: done"), "{log}");
    assert!(!procfs::alive(container), "the container is gone");
    job.wait_all_gone();
    // The chain ended the way its job did, within the agent's grace.
    assert!(
        !ending.killed,
        "the agent had to SIGKILL: {}",
        ending.status
    );
    assert_eq!(
        ending.status.signal(),
        Some(libc::SIGKILL),
        "{}",
        ending.status
    );
}

#[test]
fn with_reap_and_graceful_the_agents_sigkill_mid_post_step_still_runs_pre_exit() {
    let job = JobDir::new("ci-hook-kill");
    let mut agent = Agent::start(&helper("ci-hook"), job.path());
    let container = job.wait_running();
    // The agent's grace is shorter than graceful's: the SIGKILL comes while
    // the post-step still runs.
    let ending = agent.cancel(Duration::from_millis(300));
    assert!(ending.killed, "{}", ending.status);
    procfs::wait_until("the pre-exit hook ran", TIMEOUT, || {
        !job.read("pre-exit").is_empty()
    });
    let log = job.read("job.log");
    assert!(log.contains("post: started"), "{log}");
    assert!(!log.contains("post: done"), "{log}");
    assert_eq!(
        job.read("pre-exit"),
        "container=gone cause=cancel status=137 signal=KILL\n",
        "{log}"
    );
    assert!(!procfs::alive(container), "the container is gone");
    job.wait_all_gone();
}

#[test]
fn with_reap_and_graceful_a_sigkill_without_cancel_still_runs_pre_exit() {
    let job = JobDir::new("ci-hook-lost");
    let mut agent = Agent::start(&helper("ci-hook"), job.path());
    let container = job.wait_running();
    let ending = agent.kill();
    assert_eq!(ending.status.signal(), Some(libc::SIGKILL));
    procfs::wait_until("the pre-exit hook ran", TIMEOUT, || {
        !job.read("pre-exit").is_empty()
    });
    assert_eq!(
        job.read("pre-exit"),
        "container=gone cause=lost status=137 signal=KILL\n",
        "{}",
        job.read("job.log")
    );
    assert!(!procfs::alive(container), "the container is gone");
    job.wait_all_gone();
}
