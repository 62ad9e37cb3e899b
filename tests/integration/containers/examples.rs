//! The container examples as the .deb ships them
//! (/usr/share/doc/pgwrap-suite/examples), built and run: the Dockerfile
//! with the .deb, a job (sigprobe as /app/run-job) and its cleanup
//! (/app/deregister); the Kubernetes pod's command and args as the
//! container's argv, stopped with its terminationGracePeriodSeconds as the
//! stop timeout, the way the kubelet stops it.
//!
//! The Dockerfile's base, debian:bookworm-slim, comes from a registry; when
//! the daemon does not have it, a stand-in of that name is built FROM
//! scratch: a static busybox, whose sh, rm and dpkg are what the
//! Dockerfile's RUN line uses, and this machine's C library (the loader,
//! libc.so.6, libgcc_s), listed as installed in dpkg's status as the base
//! image lists libc6 and libgcc-s1, which pgwrap-suite depends on.

use super::{docker, docker_ok, enter, Container};
use crate::kit::{static_bin, TIMEOUT};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

const BASE: &str = "debian:bookworm-slim";
const EXAMPLES: &str = "usr/share/doc/pgwrap-suite/examples";
const TAG: &str = "pgwrap-test/example";
/// The label that marks the stand-in for [`BASE`].
const STAND_IN: &str = "pgwrap-test.stand-in";

/// The examples unpacked from the .deb (kept for the run).
fn unpacked() -> &'static PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let deb = crate::packaging::packages().deb();
        let dir = super::target_dir().join("docker/examples-deb");
        let _ = std::fs::remove_dir_all(&dir);
        let out = super::run_bounded(
            std::process::Command::new("dpkg-deb")
                .arg("-x")
                .arg(deb)
                .arg(&dir),
            TIMEOUT,
        );
        assert!(out.status.success(), "dpkg-deb -x: {out:?}");
        dir
    })
}

fn packaged(name: &str) -> String {
    let path = unpacked().join(EXAMPLES).join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The packaged Dockerfile's image, built once per run.
fn example_image() -> &'static str {
    static BUILT: OnceLock<()> = OnceLock::new();
    BUILT.get_or_init(|| {
        // The real base is used where the daemon has it; a stand-in (a
        // daemon's data root is kept between runs) is built again, so it
        // follows this run's packages (layers are cached).
        let label = format!("{{{{index .Config.Labels \"{STAND_IN}\"}}}}");
        let inspect = docker(&["image", "inspect", "--format", &label, BASE]);
        if !inspect.status.success() || String::from_utf8_lossy(&inspect.stdout).trim() == "1" {
            stand_in_base();
        }
        let ctx = super::target_dir().join("docker/images/example");
        let _ = std::fs::remove_dir_all(&ctx);
        std::fs::create_dir_all(&ctx).unwrap();
        let deb = crate::packaging::packages().deb();
        super::copy(deb, &ctx.join(deb.file_name().unwrap()));
        super::copy(&static_bin("sigprobe"), &ctx.join("run-job"));
        write_executable(
            &ctx.join("deregister"),
            "#!/bin/sh\necho \"deregister: cause=$REAP_CAUSE status=$REAP_STATUS\"\n",
        );
        std::fs::write(ctx.join("Dockerfile"), packaged("Dockerfile")).unwrap();
        let ctx = ctx.display().to_string();
        docker_ok(&[
            "build",
            "-q",
            "-t",
            TAG,
            "-f",
            &format!("{ctx}/Dockerfile"),
            &ctx,
        ]);
    });
    TAG
}

/// A FROM scratch stand-in for the base image (no registry here).
fn stand_in_base() {
    let ctx = super::target_dir().join("docker/images/stand-in-base");
    let _ = std::fs::remove_dir_all(&ctx);
    std::fs::create_dir_all(&ctx).unwrap();
    super::copy(Path::new("/bin/busybox"), &ctx.join("busybox"));
    // The shared libraries the packaged tools load, at the paths ldd shows.
    let reap = unpacked().join("usr/bin/reap");
    let ldd = super::run_bounded(std::process::Command::new("ldd").arg(&reap), TIMEOUT);
    assert!(ldd.status.success(), "ldd {}: {ldd:?}", reap.display());
    let libs = ctx.join("libs");
    for line in String::from_utf8_lossy(&ldd.stdout).lines() {
        let Some(path) = line.split_whitespace().find(|w| w.starts_with('/')) else {
            continue;
        };
        let to = libs.join(path.trim_start_matches('/'));
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        super::copy(&std::fs::canonicalize(path).unwrap(), &to);
    }
    // dpkg's status, as the base lists the packages that hold them.
    let mut status = String::new();
    for pkg in ["libc6", "libgcc-s1"] {
        let fields = super::run_bounded(
            std::process::Command::new("dpkg-query").args([
                "-W",
                "-f=Architecture: ${Architecture}\nVersion: ${Version}\n",
                pkg,
            ]),
            TIMEOUT,
        );
        assert!(fields.status.success(), "dpkg-query {pkg}: {fields:?}");
        status.push_str(&format!(
            "Package: {pkg}\nStatus: install ok installed\n{}\n",
            String::from_utf8_lossy(&fields.stdout)
        ));
    }
    std::fs::write(ctx.join("status"), status).unwrap();
    std::fs::write(
        ctx.join("Dockerfile"),
        format!(
            "FROM scratch\n\
         LABEL {STAND_IN}=1\n\
         COPY busybox /bin/busybox\n\
         RUN [\"/bin/busybox\", \"--install\", \"-s\", \"/bin\"]\n\
         COPY libs/ /\n\
         RUN mkdir -p /tmp /var/lib/dpkg/info /var/lib/dpkg/updates\n\
         COPY status /var/lib/dpkg/status\n"
        ),
    )
    .unwrap();
    let ctx = ctx.display().to_string();
    docker_ok(&["build", "-q", "-t", BASE, &ctx]);
}

fn write_executable(path: &Path, text: &str) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// Whether the test cannot run (skip recorded): the daemon, and root for
/// the packages (as the packaging tests).
fn cannot_run(test: &str) -> Option<super::Slot> {
    if let Some(why) = crate::skip::needs_root() {
        crate::skip::skip(test, &why);
        return None;
    }
    enter(test)
}

#[test]
fn packaged_dockerfile_builds_and_its_container_cleans_up_on_docker_stop() {
    let test = "packaged_dockerfile_builds_and_its_container_cleans_up_on_docker_stop";
    let Some(_slot) = cannot_run(test) else {
        return;
    };
    let img = example_image();
    let with = Container::start("dockerfile", &[img]);
    // Twin: the job as the entrypoint, no reap.
    let without = Container::start("dockerfile-twin", &["--entrypoint", "/app/run-job", img]);
    let ready = with.expect_log("ready pid=", TIMEOUT);
    assert!(
        ready.contains(" ppid=1 "),
        "the job is reap's child: {ready}"
    );
    without.expect_log("ready pid=", TIMEOUT);
    with.stop(10);
    without.stop(10);
    let logs = with.logs();
    assert!(logs.contains("got TERM"), "{logs}");
    assert!(logs.contains("deregister: cause=cancel status=0"), "{logs}");
    assert_eq!(with.exit_code(), 0, "{logs}");
    let twin = without.logs();
    assert!(
        !twin.contains("deregister:"),
        "the twin deregistered: the test proves nothing"
    );
    eprintln!("Dockerfile twin (job as entrypoint) fails as expected: no deregister line");
}

/// The strings of a flow sequence `["a", "b"]`.
fn string_array(text: &str) -> Vec<String> {
    let inner = text.trim().trim_start_matches('[').trim_end_matches(']');
    inner
        .split(',')
        .map(|s| s.trim().trim_matches('"').to_string())
        .collect()
}

fn yaml_value<'a>(text: &'a str, key: &str) -> &'a str {
    text.lines()
        .map(str::trim)
        .find_map(|l| l.strip_prefix(key))
        .unwrap_or_else(|| panic!("no {key:?} line"))
        .trim()
}

#[test]
fn kubernetes_pod_argv_stops_within_its_termination_grace_period() {
    let test = "kubernetes_pod_argv_stops_within_its_termination_grace_period";
    let Some(_slot) = cannot_run(test) else {
        return;
    };
    let pod = packaged("kubernetes-pod.yaml");
    let command = string_array(yaml_value(&pod, "command:"));
    let args = string_array(yaml_value(&pod, "args:"));
    let period: u64 = yaml_value(&pod, "terminationGracePeriodSeconds:")
        .parse()
        .unwrap();
    let pod_image = yaml_value(&pod, "image:");
    // The pod's image is the Dockerfile's.
    docker_ok(&["tag", example_image(), pod_image]);
    // `command` replaces the ENTRYPOINT, `args` the CMD.
    let run = |tag: &str, argv: &[String]| {
        let mut all = vec!["--entrypoint", argv[0].as_str(), pod_image];
        all.extend(argv[1..].iter().map(String::as_str));
        Container::start(tag, &all)
    };
    let with = run("pod", &[command.clone(), args.clone()].concat());
    // Twin: the pod without `command`, so args run without reap:
    // graceful as PID 1.
    let without = run("pod-twin", &args);
    with.expect_log("ready pid=", TIMEOUT);
    without.expect_log("ready pid=", TIMEOUT);
    let took = with.stop(period);
    without.stop(period);
    let logs = with.logs();
    assert!(logs.contains("got TERM"), "{logs}");
    assert!(logs.contains("deregister: cause=cancel status=0"), "{logs}");
    assert_eq!(with.exit_code(), 0, "{logs}");
    eprintln!("pod stopped in {took:?} (terminationGracePeriodSeconds {period})");
    let twin = without.logs();
    assert!(
        !twin.contains("deregister:"),
        "the twin deregistered: the test proves nothing"
    );
    eprintln!("pod twin (args without reap) fails as expected: no deregister line");
}
