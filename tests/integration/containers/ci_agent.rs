//! The Buildkite report, with real containers: an agent runs a job as the
//! leader of a process group; a cancel is TERM to the group, the agent's
//! grace period, then SIGKILL to the group. The step starts an attached
//! `docker run` of a container whose PID 1 has no TERM handler (so the TERM
//! that the docker client passes on does nothing), and tears it down only
//! after the step: a teardown the agent's SIGKILL never lets run.
//!
//! - Twin, the job as is: the container is left running.
//! - `exec reap --cleanup 'docker rm -f NAME' -- graceful --grace 1s -- STEP`:
//!   none is left, and the cleanup sees REAP_CAUSE=cancel; also when the
//!   agent's SIGKILL lands in the middle of a slow cleanup.
//! - The seed's own setup: `docker compose run` with a dependency, and
//!   `docker compose down` as the cleanup (Debian's docker-compose).

use super::{docker, docker_ok, enter, image, Container, Image, LABEL};
use crate::kit::{bin, temp_dir, TempDir, TIMEOUT};
use crate::procfs;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The agent's view of one job: a process-group leader it started.
struct Agent {
    job: Child,
    pgid: i32,
    reaped: bool,
}

impl Agent {
    /// `sh -c SCRIPT` as the leader of a new group, in `dir`, its output in
    /// dir/job.log.
    fn start(script: &str, dir: &Path, env: &[(&str, &str)]) -> Agent {
        let log = std::fs::File::create(dir.join("job.log")).unwrap();
        let job = Command::new("sh")
            .args(["-c", script])
            .current_dir(dir)
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .process_group(0)
            .spawn()
            .expect("start the job");
        let pgid = job.id() as i32;
        Agent {
            job,
            pgid,
            reaped: false,
        }
    }

    fn signal_group(&self, sig: i32) {
        // The leader is unreaped, so the group's id cannot have been reused.
        assert!(!self.reaped);
        // SAFETY: plain kill(2) of the group this agent created.
        unsafe { libc::kill(-self.pgid, sig) };
    }

    fn wait_for(&mut self, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        loop {
            if self.job.try_wait().expect("waitpid").is_some() {
                self.reaped = true;
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Cancel: TERM to the group; then `until` (the grace period, or a
    /// handshake); if the job still runs, SIGKILL to the group. Whether
    /// it was killed.
    fn cancel(&mut self, until: impl FnOnce(&mut Agent) -> bool) -> bool {
        self.signal_group(libc::SIGTERM);
        if until(self) {
            return false;
        }
        self.signal_group(libc::SIGKILL);
        assert!(self.wait_for(TIMEOUT), "a SIGKILLed job exits");
        true
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        if !self.reaped {
            self.signal_group(libc::SIGKILL);
            let _ = self.job.wait();
        }
    }
}

/// Single quotes for sh (the strings here hold no single quote).
fn q(s: &str) -> String {
    assert!(!s.contains('\''), "{s}");
    format!("'{s}'")
}

/// The job line of the hook: the step as is, or under the tools.
fn job(step: &str, cleanup: Option<&str>) -> String {
    match cleanup {
        None => format!("exec sh -c {}", q(step)),
        Some(cleanup) => format!(
            "exec {} --cleanup {} -- {} --grace 1s -- sh -c {}",
            bin("reap").display(),
            q(cleanup),
            bin("graceful").display(),
            q(step)
        ),
    }
}

/// What a cancelled job left.
struct Left {
    running: bool,
    cause: String,
    log: String,
}

/// Run the step with an attached `docker run` of a TERM-ignoring container
/// and cancel it. `cleanup`: under the tools with this cleanup; `kill_at`:
/// SIGKILL the group as soon as this file exists (else a 20 s grace).
fn cancelled_docker_run(
    dir: &TempDir,
    name: &str,
    cleanup: Option<&str>,
    kill_at: Option<&str>,
) -> Left {
    let img = image(Image::Tools);
    let step = format!(
        "docker run --name {name} --network none --label {LABEL} {img} sleep 1000; \
         docker rm -f {name}"
    );
    let mut agent = Agent::start(&job(&step, cleanup), dir, &[]);
    procfs::wait_until("the step's container runs", TIMEOUT, || {
        super::exists_inspect(name, "{{.State.Running}}").as_deref() == Some("true")
    });
    let killed = agent.cancel(|agent| match kill_at {
        Some(file) => {
            let file = dir.join(file);
            procfs::wait_until("the cleanup started", TIMEOUT, || file.exists());
            false
        }
        None => agent.wait_for(Duration::from_secs(20)),
    });
    // With the tools the job ends within the grace (or is killed at the
    // handshake); without, its shell may die of the TERM while the docker
    // client it started keeps waiting on the container.
    if cleanup.is_some() {
        assert_eq!(killed, kill_at.is_some(), "agent SIGKILL");
    }
    settle(dir, cleanup.is_some());
    Left {
        running: super::exists_inspect(name, "{{.State.Running}}").as_deref() == Some("true"),
        cause: std::fs::read_to_string(dir.join("cause")).unwrap_or_default(),
        log: std::fs::read_to_string(dir.join("job.log")).unwrap_or_default(),
    }
}

/// After the cancel: with the tools, until the cleanup wrote its last line;
/// without, a bounded look (what is checked then is an absence).
fn settle(dir: &TempDir, tools: bool) {
    if tools {
        let cause = dir.join("cause");
        procfs::wait_until("the cleanup finished", Duration::from_secs(30), || {
            cause.exists()
        });
    } else {
        std::thread::sleep(Duration::from_secs(2));
    }
}

#[test]
fn cancelled_job_leaves_no_container_with_the_tools() {
    let Some(_slot) = enter("cancelled_job_leaves_no_container_with_the_tools") else {
        return;
    };
    // Twin: the job as is.
    let dir = temp_dir("ci-docker-twin");
    let twin = Container::named(super::unique("ci-twin"));
    let left = cancelled_docker_run(&dir, &twin.name, None, None);
    assert!(
        left.running,
        "the twin's container is gone: the test proves nothing\n{}",
        left.log
    );
    eprintln!(
        "ci twin (no tools) fails as expected: container {} left running",
        twin.name
    );
    drop(twin);

    let dir = temp_dir("ci-docker");
    let c = Container::named(super::unique("ci"));
    let cleanup = format!("docker rm -f {}; echo \"$REAP_CAUSE\" > cause", c.name);
    let left = cancelled_docker_run(&dir, &c.name, Some(&cleanup), None);
    assert!(!left.running, "container left running\n{}", left.log);
    assert!(!super::exists(&c.name), "container left\n{}", left.log);
    assert_eq!(left.cause.trim(), "cancel", "{}", left.log);
}

#[test]
fn agent_sigkill_during_a_slow_cleanup_still_removes_the_container() {
    let Some(_slot) = enter("agent_sigkill_during_a_slow_cleanup_still_removes_the_container")
    else {
        return;
    };
    let dir = temp_dir("ci-docker-slow");
    let c = Container::named(super::unique("ci-slow"));
    let cleanup = format!(
        "touch started; sleep 2; docker rm -f {}; echo \"$REAP_CAUSE\" > cause",
        c.name
    );
    let left = cancelled_docker_run(&dir, &c.name, Some(&cleanup), Some("started"));
    assert!(!super::exists(&c.name), "container left\n{}", left.log);
    assert_eq!(left.cause.trim(), "cancel", "{}", left.log);
    // Twin: the same slow teardown as the job's own last step (the step
    // ends on the cancel, the shell traps TERM and goes on to it): the
    // agent's SIGKILL lands in it, and the container stays.
    let dir = temp_dir("ci-docker-slow-twin");
    let twin = Container::named(super::unique("ci-slow-twin"));
    let img = image(Image::Tools);
    let script = format!(
        "trap 'echo cancelled' TERM; \
         docker run -d --name {n} --network none --label {LABEL} {img} sleep 1000; \
         sleep 1000 & touch waiting; wait $!; touch started; sleep 2; docker rm -f {n}",
        n = twin.name
    );
    let mut agent = Agent::start(&script, &dir, &[]);
    procfs::wait_until("the twin's container runs", TIMEOUT, || {
        super::exists_inspect(&twin.name, "{{.State.Running}}").as_deref() == Some("true")
    });
    // The cancel must find the step's `sleep` started (it dies of the
    // group's TERM, so `wait` returns): a TERM before it would run the trap
    // early and leave the script waiting on a sleep nobody signals.
    let waiting = dir.join("waiting");
    procfs::wait_until("the twin's step sleeps", TIMEOUT, || waiting.exists());
    let started = dir.join("started");
    agent.cancel(|_| {
        procfs::wait_until("the twin's teardown started", TIMEOUT, || started.exists());
        false
    });
    std::thread::sleep(Duration::from_secs(3));
    assert!(
        super::exists(&twin.name),
        "the twin's container is gone: the test proves nothing"
    );
    eprintln!(
        "slow-cleanup twin (teardown in the job's group) fails as expected: container {} left",
        twin.name
    );
}

/// A way to run `docker compose`: the CLI's own plugin, or Debian's
/// docker-compose behind a plugin shim in `config` (DOCKER_CONFIG).
fn compose_config(config: &Path) -> Result<Option<String>, String> {
    if docker(&["compose", "version"]).status.success() {
        return Ok(None);
    }
    if let Some(why) = crate::skip::needs_program("docker-compose", "docker-compose") {
        return Err(why);
    }
    // The Docker CLI runs a plugin as `PLUGIN compose ARGS...` (and asks
    // for its metadata first): hand ARGS to docker-compose.
    let plugins = config.join("cli-plugins");
    std::fs::create_dir_all(&plugins).unwrap();
    let shim = plugins.join("docker-compose");
    std::fs::write(
        &shim,
        "#!/bin/sh\n\
         if [ \"$1\" = docker-cli-plugin-metadata ]; then\n\
           echo '{\"SchemaVersion\":\"0.1.0\",\"Vendor\":\"pgwrap suite tests\",\
         \"Version\":\"v1\",\"ShortDescription\":\"Debian docker-compose\"}'\n\
           exit 0\n\
         fi\n\
         shift\n\
         exec docker-compose \"$@\"\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&shim, std::fs::Permissions::from_mode(0o755)).unwrap();
    Ok(Some(config.display().to_string()))
}

/// The project's containers (running or not).
fn project_containers(project: &str) -> Vec<String> {
    let filter = format!("label=com.docker.compose.project={project}");
    docker_ok(&["ps", "-aq", "--filter", &filter])
        .lines()
        .map(String::from)
        .collect()
}

/// Removes a compose project's containers on drop.
struct Project(String);

impl Drop for Project {
    fn drop(&mut self) {
        for id in project_containers(&self.0) {
            let _ = docker(&["rm", "-f", &id]);
        }
    }
}

#[test]
fn cancelled_compose_job_runs_docker_compose_down() {
    let test = "cancelled_compose_job_runs_docker_compose_down";
    let Some(_slot) = enter(test) else {
        return;
    };
    let config = temp_dir("compose-config");
    let docker_config = match compose_config(config.path()) {
        Ok(c) => c,
        Err(why) => return crate::skip::skip(test, &why),
    };
    let img = image(Image::Tools);
    // The seed's pipeline: `run: main`, which depends on a database. Both
    // PID 1s ignore TERM; a 1 s stop grace keeps `down` short.
    let compose = format!(
        "version: \"3.7\"\n\
         services:\n\
         \x20 main:\n\
         \x20   image: {img}\n\
         \x20   network_mode: none\n\
         \x20   stop_grace_period: 1s\n\
         \x20   labels: [\"{LABEL}\"]\n\
         \x20   depends_on:\n\
         \x20     - postgres\n\
         \x20 postgres:\n\
         \x20   image: {img}\n\
         \x20   network_mode: none\n\
         \x20   stop_grace_period: 1s\n\
         \x20   labels: [\"{LABEL}\"]\n\
         \x20   command: [\"sleep\", \"1000\"]\n"
    );
    let step = "docker compose run main sleep 1000; docker compose down";
    let mut outcomes = Vec::new();
    for tools in [false, true] {
        let dir = temp_dir("ci-compose");
        std::fs::write(dir.join("docker-compose.yml"), &compose).unwrap();
        let project = Project(super::unique("compose").replace('-', ""));
        let mut env = vec![("COMPOSE_PROJECT_NAME", project.0.as_str())];
        if let Some(c) = &docker_config {
            env.push(("DOCKER_CONFIG", c));
        }
        let cleanup = "docker compose down; echo \"$REAP_CAUSE\" > cause";
        let script = job(step, tools.then_some(cleanup));
        let mut agent = Agent::start(&script, &dir, &env);
        procfs::wait_until("the step's containers run", Duration::from_secs(60), || {
            project_containers(&project.0).len() == 2
        });
        agent.cancel(|agent| agent.wait_for(Duration::from_secs(30)));
        settle(&dir, tools);
        let left = project_containers(&project.0);
        let log = std::fs::read_to_string(dir.join("job.log")).unwrap_or_default();
        let cause = std::fs::read_to_string(dir.join("cause")).unwrap_or_default();
        outcomes.push((left, cause, log));
    }
    let (twin_left, _, twin_log) = &outcomes[0];
    assert!(
        !twin_left.is_empty(),
        "the twin left no container: the test proves nothing\n{twin_log}"
    );
    eprintln!(
        "compose twin (no tools) fails as expected: {} container(s) of the project left",
        twin_left.len()
    );
    let (left, cause, log) = &outcomes[1];
    assert!(left.is_empty(), "containers left: {left:?}\n{log}");
    assert_eq!(cause.trim(), "cancel", "{log}");
}
