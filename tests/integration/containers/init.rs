//! reap as the daemon's init: scripts/test-dockerd starts dockerd with
//! `--init-path` naming this build's reap as `docker-init`, so `docker run
//! --init` makes reap PID 1 (`docker-init -- CMD ARG...`) and `docker info`
//! shows its version. The twins run the same containers without `--init`.

use super::{docker_ok, enter, image, Container, Image};
use crate::kit::{static_bin, TIMEOUT};
use crate::procfs;

/// Why the daemon's init is not this reap, if it is not.
fn init_is_reap() -> Option<String> {
    let init = docker_ok(&["info", "--format", "{{.InitBinary}}"]);
    let same = std::fs::canonicalize(&init).ok() == std::fs::canonicalize(static_bin("reap")).ok();
    (!same).then(|| {
        format!(
            "the daemon's init is {init:?}, not this reap as docker-init (start the daemon \
             with scripts/test-dockerd)"
        )
    })
}

fn enter_init(test: &str) -> Option<super::Slot> {
    let slot = enter(test)?;
    if let Some(why) = init_is_reap() {
        crate::skip::skip(test, &why);
        return None;
    }
    Some(slot)
}

/// Docker's reading of `docker-init --version` (moby's parseInitVersion):
/// the commit after " - git.", which `docker info` shows as "init version".
fn docker_reads(line: &str) -> Option<String> {
    let parts: Vec<&str> = line.trim().split(" - ").collect();
    let git: Vec<&str> = parts.get(1)?.split('.').collect();
    match git[..] {
        ["git", commit] => Some(commit.to_string()),
        _ => None,
    }
}

#[test]
fn docker_info_shows_reaps_version_as_the_init_version() {
    let Some(_slot) = enter_init("docker_info_shows_reaps_version_as_the_init_version") else {
        return;
    };
    let shown = docker_ok(&["info", "--format", "{{.InitCommit.ID}}"]);
    let want = format!("reap-{}", env!("CARGO_PKG_VERSION").replace('.', "_"));
    assert_eq!(shown, want, "docker info: init version");
    let version = docker_ok(&["version", "--format", "{{json .Server.Components}}"]);
    assert!(
        version.contains(&format!("\"Version\":\"{}\"", env!("CARGO_PKG_VERSION"))),
        "{version}"
    );
    // Twin: the same binary under its own name, as `--init-path
    // /usr/bin/reap` would run it.
    let out = super::run_bounded(
        std::process::Command::new(static_bin("reap")).arg("--version"),
        TIMEOUT,
    );
    let own = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert_eq!(
        docker_reads(&own),
        None,
        "reap --version under its own name parses: the test proves nothing"
    );
    eprintln!("docker-info twin (init named reap) fails as expected: {own:?} reads as N/A");
}

/// Zombies among the descendants of `pid` (host view).
fn zombies_under(pid: i32) -> Vec<i32> {
    procfs::descendants(pid)
        .into_iter()
        .filter(|&p| procfs::is_zombie(p))
        .collect()
}

#[test]
fn init_reaps_the_orphans_of_a_job_that_never_waits() {
    let Some(_slot) = enter_init("init_reaps_the_orphans_of_a_job_that_never_waits") else {
        return;
    };
    let img = image(Image::Tools);
    // Three orphans that exit, then the job (sigprobe never waits for
    // children it did not start) takes over the shell's PID.
    let script = "for i in 1 2 3; do (sh -c 'sleep 0.3; echo orphan done' &); done; \
                  exec /usr/bin/sigprobe";
    let with = Container::start("zombies", &["--init", img, "sh", "-c", script]);
    let without = Container::start("zombies-twin", &[img, "sh", "-c", script]);
    for c in [&with, &without] {
        c.expect_log("ready pid=", TIMEOUT);
        super::wait_logs(c, "orphan done", 3, TIMEOUT);
    }
    let init = with.host_pid();
    procfs::wait_until("reap reaps every orphan", TIMEOUT, || {
        zombies_under(init).is_empty()
    });
    let twin = without.host_pid();
    procfs::wait_until("the twin's orphans stay zombies", TIMEOUT, || {
        procfs::children_of(twin)
            .into_iter()
            .filter(|&p| procfs::is_zombie(p))
            .count()
            == 3
    });
    eprintln!("zombie twin (no --init) fails as expected: 3 zombies under PID 1");
}

#[test]
fn init_passes_docker_stop_on_to_the_job() {
    let Some(_slot) = enter_init("init_passes_docker_stop_on_to_the_job") else {
        return;
    };
    let img = image(Image::Tools);
    // A shell script as the image's command: the job is the shell's child.
    let script = "/usr/bin/sigprobe; echo job ended";
    let with = Container::start("stop", &["--init", img, "sh", "-c", script]);
    let without = Container::start("stop-twin", &[img, "sh", "-c", script]);
    with.expect_log("ready pid=", TIMEOUT);
    without.expect_log("ready pid=", TIMEOUT);
    let twin = std::thread::spawn(move || {
        without.stop(3);
        without
    });
    with.stop(10);
    let without = twin.join().unwrap();
    let logs = with.logs();
    assert!(logs.contains("got TERM"), "the job never got TERM:\n{logs}");
    // The shell, in the job's group, dies of the TERM: 128+15 from PID 1.
    assert_eq!(with.exit_code(), 128 + libc::SIGTERM, "{logs}");
    let twin_logs = without.logs();
    assert!(
        !twin_logs.contains("got TERM"),
        "the twin's job got TERM: the test proves nothing"
    );
    eprintln!(
        "stop twin (sh as PID 1) fails as expected: the job never got TERM, exit code {}",
        without.exit_code()
    );
}
