//! The packages, as a user and a distribution see them. `scripts/package
//! --lint` runs once per test run (two release builds, the four packages,
//! lintian) and every test here shares its result: lintian's verdict on
//! both `.deb`s, each linkage (the binaries of `pgwrap-suite` use the
//! system's glibc and the package depends on it; those of
//! `pgwrap-suite-static` need nothing), an install of the `.deb`s into this
//! machine (the static one replacing the other) and their removal, the
//! `.rpm`s' file lists, metadata and installs into a temporary root, the
//! completions against each tool's `--help`, the static `reap` as PID 1 of
//! an empty root, and the packaged `reap` as the entrypoint of the
//! container examples.

use crate::kit::{bin, static_bin, temp_dir, TIMEOUT};
use crate::procfs;
use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Read};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

const PKG: &str = "pgwrap-suite";
const TOOLS: [&str; 3] = ["pgwrap", "graceful", "reap"];
/// The one version, from Cargo.toml.
const VERSION: &str = env!("CARGO_PKG_VERSION");
/// The rpm's Summary and the first line of the .deb's Description.
const SUMMARY: &str = "Process-group wrappers that make process shutdown correct";

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The project's URL: `repository` of `[workspace.package]` in Cargo.toml.
fn homepage() -> String {
    let manifest = std::fs::read_to_string(repo().join("Cargo.toml")).unwrap();
    let value = manifest
        .lines()
        .find_map(|l| l.strip_prefix("repository = "))
        .expect("a repository in Cargo.toml");
    value.trim_matches('"').to_string()
}

// ---------------------------------------------------------------------------------------------
// Running commands

/// Run `cmd` (stdin /dev/null, in a process group of its own) to its end and
/// return what it printed; after `limit`, SIGKILL its group and panic.
fn run_limited(cmd: &mut Command, limit: Duration) -> Output {
    let what = format!("{cmd:?}");
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {what}: {e}"));
    let stdout = collect(child.stdout.take().unwrap());
    let stderr = collect(child.stderr.take().unwrap());
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() >= deadline {
            // SAFETY: plain syscall; the group is the one created for the
            // child, which is not reaped yet, so its id is still ours.
            unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
            let _ = child.wait();
            panic!("{what} did not finish within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let patience = Duration::from_secs(30);
    Output {
        status,
        stdout: stdout.recv_timeout(patience).unwrap_or_default(),
        stderr: stderr.recv_timeout(patience).unwrap_or_default(),
    }
}

/// Read `pipe` to its end in a thread; the bytes arrive on the receiver.
fn collect(mut pipe: impl Read + Send + 'static) -> Receiver<Vec<u8>> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = pipe.read_to_end(&mut buf);
        let _ = tx.send(buf);
    });
    rx
}

/// `program args...`, which must succeed within two minutes; its stdout.
fn ok(program: impl AsRef<std::ffi::OsStr>, args: &[&dyn AsRef<std::ffi::OsStr>]) -> String {
    let mut cmd = Command::new(program);
    for arg in args {
        cmd.arg(arg);
    }
    let out = run_limited(&mut cmd, Duration::from_secs(120));
    assert!(
        out.status.success(),
        "{cmd:?} failed ({}):\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Whether `test` cannot run here (it installs packages or makes
/// namespaces, which needs root): then it says so and is counted as skipped.
fn cannot_run(test: &str) -> bool {
    let why =
        crate::skip::needs_root().or_else(|| crate::skip::needs_program("unshare", "util-linux"));
    if let Some(why) = why {
        crate::skip::skip(test, &why);
        return true;
    }
    false
}

// ---------------------------------------------------------------------------------------------
// The packages, built once

/// The two linkages, one package each.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Variant {
    /// `pgwrap-suite`: linked against the system's glibc.
    Dynamic,
    /// `pgwrap-suite-static`: statically linked, for images.
    Static,
}

const VARIANTS: [Variant; 2] = [Variant::Dynamic, Variant::Static];

impl Variant {
    /// The package's name.
    fn name(self) -> &'static str {
        match self {
            Variant::Dynamic => PKG,
            Variant::Static => "pgwrap-suite-static",
        }
    }

    /// The rpm's Summary (the .deb's synopsis, lower-cased at the start).
    fn summary(self) -> String {
        match self {
            Variant::Dynamic => SUMMARY.to_string(),
            Variant::Static => format!("{SUMMARY} - statically linked"),
        }
    }
}

pub(crate) struct Packages {
    /// (variant, .deb, .rpm), as scripts/package printed them.
    built: Vec<(Variant, Option<PathBuf>, Option<PathBuf>)>,
    status: ExitStatus,
    /// What scripts/package printed on stderr (lintian's report included).
    log: String,
}

impl Packages {
    fn find(&self, variant: Variant, rpm: bool) -> &Path {
        let found = self.built.iter().find(|b| b.0 == variant).and_then(|b| {
            if rpm {
                b.2.as_deref()
            } else {
                b.1.as_deref()
            }
        });
        found.unwrap_or_else(|| {
            panic!(
                "scripts/package made no {} of {} ({}):\n{}",
                if rpm { ".rpm" } else { ".deb" },
                variant.name(),
                self.status,
                self.log
            )
        })
    }

    /// The .deb of pgwrap-suite (the distribution's linkage).
    pub(crate) fn deb(&self) -> &Path {
        self.find(Variant::Dynamic, false)
    }

    pub(crate) fn deb_of(&self, variant: Variant) -> &Path {
        self.find(variant, false)
    }

    fn rpm_of(&self, variant: Variant) -> &Path {
        self.find(variant, true)
    }
}

/// The target directory (target/debug/sigprobe -> target).
fn target_dir() -> PathBuf {
    let sigprobe = bin("sigprobe");
    let profile = sigprobe.parent().expect("a profile directory");
    profile.parent().expect("a target directory").to_path_buf()
}

/// `scripts/package --lint` into target/package-test, once per test run.
///
/// With `PGWRAP_PACKAGES_RUN=DIR` the run was made before the tests, into
/// DIR (scripts/check makes it in the background while the other tests
/// run): its stdout, stderr and exit status are in DIR.out, DIR.err and
/// DIR.status, and are read instead of running it again.
pub(crate) fn packages() -> &'static Packages {
    static BUILT: OnceLock<Packages> = OnceLock::new();
    BUILT.get_or_init(|| {
        let run = match std::env::var_os("PGWRAP_PACKAGES_RUN") {
            Some(dir) => earlier_run(Path::new(&dir)),
            None => {
                let out = target_dir().join("package-test");
                let _ = std::fs::remove_dir_all(&out);
                // Installing rpm and lintian on a fresh machine, then two
                // release builds: minutes, not hours.
                run_limited(
                    Command::new(repo().join("scripts/package"))
                        .arg("--lint")
                        .arg(&out),
                    Duration::from_secs(30 * 60),
                )
            }
        };
        let printed = String::from_utf8_lossy(&run.stdout).into_owned();
        let find = |name: &str, ext: &str| {
            printed.lines().map(PathBuf::from).find(|path| {
                path.file_name().and_then(|f| f.to_str()).is_some_and(|f| {
                    f.ends_with(ext)
                        && (f.starts_with(&format!("{name}_"))
                            || f.starts_with(&format!("{name}-{VERSION}-")))
                }) && path.is_file()
            })
        };
        Packages {
            built: VARIANTS
                .iter()
                .map(|&v| (v, find(v.name(), ".deb"), find(v.name(), ".rpm")))
                .collect(),
            status: run.status,
            log: String::from_utf8_lossy(&run.stderr).into_owned(),
        }
    })
}

/// The output of a `scripts/package --lint DIR` made before the tests
/// (`PGWRAP_PACKAGES_RUN=DIR`): DIR.out, DIR.err and DIR.status (its exit
/// code, as the shell's `$?` gives it).
fn earlier_run(dir: &Path) -> Output {
    let read = |ext: &str| {
        let path = dir.with_extension(ext);
        std::fs::read(&path).unwrap_or_else(|e| {
            panic!(
                "PGWRAP_PACKAGES_RUN: cannot read {} ({e}): run scripts/package --lint {} first, or unset it",
                path.display(),
                dir.display()
            )
        })
    };
    let code = String::from_utf8_lossy(&read("status")).trim().to_string();
    let code: i32 = code
        .parse()
        .unwrap_or_else(|_| panic!("PGWRAP_PACKAGES_RUN: {code:?} is not an exit code"));
    Output {
        status: ExitStatus::from_raw((code & 0xff) << 8),
        stdout: read("out"),
        stderr: read("err"),
    }
}

/// The ELF facts of a binary that tell its linkage: its program
/// interpreter and its DT_NEEDED libraries (none for a static binary).
fn linkage(binary: &Path) -> (Option<String>, Vec<String>) {
    let headers = ok("readelf", &[&"--program-headers", &"--dynamic", &binary]);
    let interp = headers.lines().find_map(|l| {
        let rest = l.split("Requesting program interpreter: ").nth(1)?;
        Some(rest.trim_end_matches(']').to_string())
    });
    let needed = headers
        .lines()
        .filter(|l| l.contains("(NEEDED)"))
        .filter_map(|l| Some(l.split('[').nth(1)?.trim_end_matches(']').to_string()))
        .collect();
    (interp, needed)
}

/// Every file (not directory) the .deb holds, as absolute paths.
fn deb_files(deb: &Path) -> BTreeSet<String> {
    ok("dpkg-deb", &[&"--contents", &deb])
        .lines()
        .filter(|l| l.starts_with('-'))
        .filter_map(|l| l.split_whitespace().nth(5))
        .map(|p| p.trim_start_matches('.').to_string())
        .collect()
}

/// Each tool's binary, man page and completions, as both package formats
/// install them; `zsh`: the zsh directory under /usr/share/zsh (Debian's
/// vendor-completions, Fedora's site-functions).
fn tool_files(zsh: &str) -> BTreeSet<String> {
    let mut files = BTreeSet::new();
    for tool in TOOLS {
        files.insert(format!("/usr/bin/{tool}"));
        files.insert(format!("/usr/share/man/man1/{tool}.1.gz"));
        files.insert(format!("/usr/share/bash-completion/completions/{tool}"));
        files.insert(format!("/usr/share/zsh/{zsh}/_{tool}"));
        files.insert(format!("/usr/share/fish/vendor_completions.d/{tool}.fish"));
    }
    files
}

/// The example files both packages ship under /usr/share/doc/PKG/examples.
fn examples() -> Vec<String> {
    let mut names = Vec::new();
    for (dir, only) in [
        ("packaging/systemd", Some(".service")),
        ("packaging/examples", None),
    ] {
        for entry in std::fs::read_dir(repo().join(dir)).unwrap() {
            let name = entry.unwrap().file_name().to_string_lossy().into_owned();
            if only.is_none() || only.is_some_and(|ext| name.ends_with(ext)) {
                names.push(name);
            }
        }
    }
    names.sort();
    names
}

#[test]
fn deb_holds_the_tools_pages_completions_and_docs_at_the_cargo_version() {
    for variant in VARIANTS {
        deb_holds_its_files(variant);
    }
}

fn deb_holds_its_files(variant: Variant) {
    let name = variant.name();
    let deb = packages().deb_of(variant);
    let arch = ok("dpkg", &[&"--print-architecture"]);
    assert_eq!(
        deb.file_name().unwrap().to_string_lossy(),
        format!("{name}_{VERSION}-1_{}.deb", arch.trim())
    );
    let fields = ok(
        "dpkg-deb",
        &[&"--field", &deb, &"Package", &"Version", &"Homepage"],
    );
    assert_eq!(
        fields,
        format!(
            "Package: {name}\nVersion: {VERSION}-1\nHomepage: {}\n",
            homepage()
        )
    );
    // The synopsis is the rpm's Summary, lower-cased as Debian writes it.
    let description = ok("dpkg-deb", &[&"--field", &deb, &"Description"]);
    let summary = variant.summary();
    let synopsis = format!("{}{}", summary[..1].to_lowercase(), &summary[1..]);
    assert_eq!(description.lines().next(), Some(synopsis.as_str()));

    let doc = format!("/usr/share/doc/{name}");
    let mut want = tool_files("vendor-completions");
    want.insert(format!("{doc}/copyright"));
    want.insert(format!("{doc}/changelog.Debian.gz"));
    // debhelper's rule: documentation over 4 KiB is gzipped.
    let readme = std::fs::metadata(repo().join("README.md")).unwrap().len();
    want.insert(format!(
        "{doc}/README.md{}",
        if readme > 4096 { ".gz" } else { "" }
    ));
    for example in examples() {
        want.insert(format!("{doc}/examples/{example}"));
    }
    want.insert(format!("/usr/share/lintian/overrides/{name}"));
    assert_eq!(deb_files(deb), want, "{name}");

    // The copyright file is the LICENSE, in the machine-readable format.
    let tree = temp_dir("deb-tree");
    ok("dpkg-deb", &[&"--extract", &deb, &tree.path()]);
    let copyright = std::fs::read_to_string(tree.join(&doc[1..]).join("copyright")).unwrap();
    assert!(copyright.starts_with(
        "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\n"
    ));
    let license = std::fs::read_to_string(repo().join("LICENSE")).unwrap();
    for line in license.lines().skip(4).filter(|l| !l.is_empty()) {
        assert!(
            copyright.contains(line),
            "copyright lacks the LICENSE line {line:?}"
        );
    }

    // Each man page names paths this package installs (the static one
    // keeps its documentation under its own name).
    let files = deb_files(deb);
    for tool in TOOLS {
        let page = tree.join(format!("usr/share/man/man1/{tool}.1.gz"));
        let text = ok("gzip", &[&"-dc", &page]).replace("\\-", "-");
        for (at, _) in text.match_indices("/usr/share/doc/") {
            let path: String = text[at..]
                .chars()
                .take_while(|c| !c.is_whitespace() && !matches!(c, ',' | ')' | '"'))
                .collect();
            let path = path.trim_end_matches('.');
            assert!(
                files.contains(path) || files.iter().any(|f| f.starts_with(&format!("{path}/"))),
                "{name}: {tool}(1) names {path}, which {name} does not install"
            );
        }
    }
}

#[test]
fn the_deb_links_against_glibc_and_depends_on_it_and_the_static_deb_needs_nothing() {
    let fields = |deb: &Path| {
        let control = ok("dpkg-deb", &[&"--field", &deb]);
        let get = |key: &str| {
            control
                .lines()
                .find_map(|l| l.strip_prefix(&format!("{key}: ")))
                .map(String::from)
        };
        (
            get("Depends"),
            get("Built-Using"),
            get("Conflicts"),
            get("Replaces"),
            get("Provides"),
        )
    };
    // pgwrap-suite: each binary asks for the system's loader and libc, and
    // the package depends on the libc6 that provides them, versioned.
    let deb = packages().deb_of(Variant::Dynamic);
    let tree = temp_dir("deb-linkage");
    ok("dpkg-deb", &[&"--extract", &deb, &tree.path()]);
    for tool in TOOLS {
        let (interp, needed) = linkage(&tree.join("usr/bin").join(tool));
        assert!(
            interp.is_some(),
            "{tool} of {PKG} has no program interpreter"
        );
        assert!(
            needed.iter().any(|n| n == "libc.so.6"),
            "{tool} of {PKG} does not link libc.so.6: {needed:?}"
        );
    }
    let (depends, built_using, conflicts, ..) = fields(deb);
    let depends = depends.unwrap_or_default();
    assert!(
        depends.split(", ").any(|d| d.starts_with("libc6 (>= ")),
        "Depends of {PKG}: {depends:?}"
    );
    assert_eq!((built_using, conflicts), (None, None));

    // pgwrap-suite-static: no interpreter, no library; it names the musl
    // it contains (Built-Using) and takes pgwrap-suite's place.
    let deb = packages().deb_of(Variant::Static);
    let tree = temp_dir("deb-static-linkage");
    ok("dpkg-deb", &[&"--extract", &deb, &tree.path()]);
    for tool in TOOLS {
        let (interp, needed) = linkage(&tree.join("usr/bin").join(tool));
        assert_eq!(
            (interp, needed),
            (None, vec![]),
            "{tool} of the static package"
        );
    }
    let (depends, built_using, conflicts, replaces, provides) = fields(deb);
    assert_eq!(depends, None);
    assert!(
        built_using
            .as_deref()
            .is_some_and(|b| b.starts_with("musl (= ")),
        "Built-Using: {built_using:?}"
    );
    assert_eq!(conflicts.as_deref(), Some(PKG));
    assert_eq!(replaces.as_deref(), Some(PKG));
    assert_eq!(provides, Some(format!("{PKG} (= {VERSION}-1)")));
}

#[test]
fn lintian_finds_no_error_and_no_unexplained_warning() {
    let built = packages();
    for variant in VARIANTS {
        let deb = built.deb_of(variant);
        assert!(
            built
                .log
                .contains(&format!("package: lintian {}", deb.display())),
            "scripts/package did not run lintian on {}:\n{}",
            deb.display(),
            built.log
        );
    }
    assert!(
        built.status.success(),
        "scripts/package --lint failed ({}):\n{}",
        built.status,
        built.log
    );
    for line in built.log.lines() {
        assert!(
            !line.starts_with("E: ") && !line.starts_with("W: "),
            "lintian: {line}"
        );
        assert!(!line.contains("unused-override"), "lintian: {line}");
    }
    // Every override follows a comment giving its reason.
    let overrides =
        std::fs::read_to_string(repo().join("packaging/deb/lintian-overrides")).unwrap();
    let mut reason = false;
    for line in overrides.lines() {
        if line.starts_with('#') {
            reason = true;
        } else if line.trim().is_empty() {
            reason = false;
        } else {
            assert!(reason, "lintian override without a reason above it: {line}");
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The .deb on this machine

/// Whether dpkg has `name` installed (in any version).
fn deb_installed(name: &str) -> bool {
    let out = run_limited(
        Command::new("dpkg-query").args(["--show", "--showformat=${Status}", name]),
        TIMEOUT,
    );
    String::from_utf8_lossy(&out.stdout).contains(" installed")
}

/// Removes both packages on drop: the machine is left as it was, pass or
/// fail.
struct Installed;

impl Drop for Installed {
    fn drop(&mut self) {
        for variant in VARIANTS {
            if deb_installed(variant.name()) {
                let _ = run_limited(
                    Command::new("dpkg").args(["--remove", variant.name()]),
                    Duration::from_secs(120),
                );
            }
        }
    }
}

/// The installed tools answer --version and have their man pages.
fn installed_tools_run() {
    for tool in TOOLS {
        let version = ok(format!("/usr/bin/{tool}"), &[&"--version"]);
        assert_eq!(version, format!("{tool} {VERSION}\n"));
        let page = ok("man", &[&"-w", &tool]);
        assert_eq!(page.trim(), format!("/usr/share/man/man1/{tool}.1.gz"));
    }
}

#[test]
fn deb_installs_runs_its_tools_and_removes_cleanly() {
    if cannot_run("deb_installs_runs_its_tools_and_removes_cleanly") {
        return;
    }
    let deb = packages().deb_of(Variant::Dynamic);
    let static_deb = packages().deb_of(Variant::Static);
    // This test installs into the machine's /usr and removes again: it must
    // not remove a copy the machine already had.
    for variant in VARIANTS {
        let name = variant.name();
        assert!(
            !deb_installed(name),
            "{name} is installed on this machine; this test installs and removes it, which \
             would remove yours: `dpkg --remove {name}` first"
        );
    }
    for tool in TOOLS {
        let path = Path::new("/usr/bin").join(tool);
        assert!(
            !path.exists(),
            "{} exists and no package owns it; this test would overwrite, then delete it: \
             move it away first",
            path.display()
        );
    }
    let mut files = deb_files(deb);
    files.extend(deb_files(static_deb));

    let installed = Installed;
    ok("dpkg", &[&"--install", &deb]);
    installed_tools_run();
    // The example units are valid units once the tools are in /usr/bin.
    let installed_examples = format!("/usr/share/doc/{PKG}/examples");
    let mut verify = Command::new("systemd-analyze");
    verify.arg("verify");
    for name in examples().iter().filter(|n| n.ends_with(".service")) {
        verify.arg(format!("{installed_examples}/{name}"));
    }
    let out = run_limited(&mut verify, Duration::from_secs(60));
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && said.trim().is_empty(),
        "systemd-analyze verify: {}\n{said}",
        out.status
    );

    // The static package takes the other's place (Conflicts + Replaces):
    // dpkg removes pgwrap-suite, and the same paths now hold static tools.
    let static_name = Variant::Static.name();
    ok("dpkg", &[&"--install", &static_deb]);
    assert!(
        deb_installed(static_name),
        "dpkg does not list {static_name}"
    );
    assert!(
        !deb_installed(PKG),
        "{PKG} is still installed beside {static_name}"
    );
    installed_tools_run();
    for tool in TOOLS {
        let (interp, needed) = linkage(&Path::new("/usr/bin").join(tool));
        assert_eq!((interp, needed), (None, vec![]), "/usr/bin/{tool}");
    }

    ok("dpkg", &[&"--remove", &static_name]);
    drop(installed);
    for variant in VARIANTS {
        assert!(
            !deb_installed(variant.name()),
            "dpkg still lists {} after --remove",
            variant.name()
        );
    }
    for file in files {
        assert!(
            !Path::new(&file).exists(),
            "{file} is left after dpkg --remove"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// The .rpm

#[test]
fn rpm_lists_exactly_the_expected_files() {
    let arch = ok("uname", &[&"-m"]);
    for variant in VARIANTS {
        let name = variant.name();
        let rpm = packages().rpm_of(variant);
        assert_eq!(
            rpm.file_name().unwrap().to_string_lossy(),
            format!("{name}-{VERSION}-1.{}.rpm", arch.trim())
        );
        let doc = format!("/usr/share/doc/{name}");
        let mut want = tool_files("site-functions");
        want.insert(doc.clone());
        want.insert(format!("{doc}/README.md"));
        want.insert(format!("{doc}/examples"));
        for example in examples() {
            want.insert(format!("{doc}/examples/{example}"));
        }
        want.insert(format!("/usr/share/licenses/{name}"));
        want.insert(format!("/usr/share/licenses/{name}/LICENSE"));
        let listed: BTreeSet<String> = ok("rpm", &[&"-qpl", &rpm])
            .lines()
            .map(String::from)
            .collect();
        assert_eq!(listed, want, "{name}");
    }
}

#[test]
fn rpm_metadata_names_the_version_license_summary_and_linkage() {
    for variant in VARIANTS {
        let rpm = packages().rpm_of(variant);
        let info = ok("rpm", &[&"-qpi", &rpm]);
        let field = |name: &str| {
            info.lines()
                .find_map(|l| {
                    let (key, value) = l.split_once(':')?;
                    (key.trim() == name).then(|| value.trim().to_string())
                })
                .unwrap_or_else(|| panic!("rpm -qpi shows no {name}:\n{info}"))
        };
        assert_eq!(field("Name"), variant.name());
        assert_eq!(field("Version"), VERSION);
        assert_eq!(field("Release"), "1");
        assert_eq!(field("License"), env!("CARGO_PKG_LICENSE"));
        assert_eq!(field("Summary"), variant.summary());
        assert_eq!(field("URL"), homepage());
        let requires = ok("rpm", &[&"-qpR", &rpm]);
        let libs: Vec<&str> = requires
            .lines()
            .filter(|r| !r.starts_with("rpmlib(") && !r.starts_with("rtld("))
            .collect();
        match variant {
            // rpm's generator found the glibc the binaries were linked to.
            Variant::Dynamic => assert!(
                libs.iter().any(|r| r.starts_with("libc.so.6(GLIBC_")),
                "{PKG} requires {libs:?}"
            ),
            // Static binaries: nothing but rpm's own features is required,
            // and the package stands in for pgwrap-suite.
            Variant::Static => {
                assert_eq!(libs, Vec::<&str>::new(), "the static rpm requires");
                let provides = ok("rpm", &[&"-qp", &"--provides", &rpm]);
                assert!(
                    provides
                        .lines()
                        .any(|p| p == format!("{PKG} = {VERSION}-1")),
                    "{provides}"
                );
                let conflicts = ok("rpm", &[&"-qp", &"--conflicts", &rpm]);
                assert_eq!(conflicts.trim(), PKG);
            }
        }
    }
}

#[test]
fn rpm_installs_into_a_temporary_root_and_its_binaries_run() {
    if cannot_run("rpm_installs_into_a_temporary_root_and_its_binaries_run") {
        return;
    }
    for variant in VARIANTS {
        rpm_installs(variant);
    }
}

fn rpm_installs(variant: Variant) {
    let name = variant.name();
    let rpm = packages().rpm_of(variant);
    let root = temp_dir("rpm-root");
    // --dbpath is inside --root: the machine's own rpm database is
    // untouched. --nodeps: the root has no glibc package; the dynamic
    // binaries use the machine's libc as they run from there.
    ok(
        "rpm",
        &[
            &"--install",
            &"--root",
            &root.path(),
            &"--dbpath",
            &"/var/lib/rpm",
            &"--nodeps",
            &rpm,
        ],
    );
    let listed = ok(
        "rpm",
        &[
            &"--query",
            &"--root",
            &root.path(),
            &"--dbpath",
            &"/var/lib/rpm",
            &name,
        ],
    );
    assert!(
        listed.starts_with(&format!("{name}-{VERSION}-1.")),
        "{listed}"
    );
    let usr_bin = root.join("usr/bin");
    for tool in TOOLS {
        let version = ok(usr_bin.join(tool), &[&"--version"]);
        assert_eq!(version, format!("{tool} {VERSION}\n"));
    }
    // The chain, from the installed copies.
    let out = run_limited(
        Command::new(usr_bin.join("reap"))
            .arg("--")
            .arg(usr_bin.join("graceful"))
            .args(["--grace", "2s", "--"])
            .arg(usr_bin.join("pgwrap"))
            .args(["--", "sh", "-c", "exit 3"]),
        Duration::from_secs(30),
    );
    assert_eq!(
        out.status.code(),
        Some(3),
        "{name}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let license = std::fs::read(root.join(format!("usr/share/licenses/{name}/LICENSE"))).unwrap();
    assert_eq!(license, std::fs::read(repo().join("LICENSE")).unwrap());
}

// ---------------------------------------------------------------------------------------------
// Completions against --help

/// A tool's options as its `--help` lists them: (option, takes a value).
/// An option line is `  -f, --forward LIST  ...` or `      --setsid  ...`.
fn help_options(tool: &str) -> Options {
    let help = ok(bin(tool), &[&"--help"]);
    let mut out = BTreeSet::new();
    for line in help.lines() {
        let trimmed = line.trim_start();
        if !line.starts_with("  ") || !trimmed.starts_with('-') {
            continue;
        }
        let mut words = trimmed.split_whitespace().peekable();
        let mut names = Vec::new();
        while let Some(word) = words.next_if(|w| w.starts_with('-')) {
            names.push(word.trim_end_matches(',').to_string());
        }
        // A value placeholder: LIST, FROM:TO, group|child, SIG|none, DUR...
        let value = words.next().is_some_and(|w| {
            w.chars()
                .any(|c| c.is_ascii_uppercase() || c == '|' || c == ':')
        });
        for name in names {
            out.insert((name, value));
        }
    }
    assert!(
        out.len() >= 8,
        "{tool} --help lists too few options: {out:?}"
    );
    out
}

/// Every `--long-option` named anywhere in `text`.
fn long_options_in(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut rest = text;
    while let Some(pos) = rest.find("--") {
        let name: String = rest[pos + 2..]
            .chars()
            .take_while(|c| c.is_ascii_lowercase() || *c == '-')
            .collect();
        if name.starts_with(|c: char| c.is_ascii_lowercase()) {
            out.insert(format!("--{name}"));
        }
        rest = &rest[pos + 2 + name.len()..];
    }
    out
}

/// The words of the shell assignment `NAME='...'` in `text`.
fn assigned_words(text: &str, name: &str) -> Vec<String> {
    let start = text
        .find(&format!("{name}='"))
        .unwrap_or_else(|| panic!("no {name}='...' in the completion"));
    let rest = &text[start + name.len() + 2..];
    rest[..rest.find('\'').unwrap()]
        .split_whitespace()
        .map(String::from)
        .collect()
}

/// Options as (name, takes a value).
type Options = BTreeSet<(String, bool)>;

/// For each shell: its name, the options its completion of `tool` offers,
/// and the completion's text.
fn completion_options(tool: &str) -> Vec<(&'static str, Options, String)> {
    let dir = repo().join("packaging/completions");
    let read = |path: PathBuf| {
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    };
    let mut shells = Vec::new();

    // bash: `with_value='...'` and `flags='...'`.
    let text = read(dir.join("bash").join(tool));
    let mut set = BTreeSet::new();
    set.extend(
        assigned_words(&text, "with_value")
            .into_iter()
            .map(|o| (o, true)),
    );
    set.extend(
        assigned_words(&text, "flags")
            .into_iter()
            .map(|o| (o, false)),
    );
    shells.push(("bash", set, text));

    // zsh: the _arguments specs, `{-f+,--forward=}'[...' or '--to=[...'; a
    // `+` or `=` after the name means a value follows.
    let text = read(dir.join("zsh").join(format!("_{tool}")));
    let mut set = BTreeSet::new();
    for line in text.lines().map(str::trim) {
        if !line.starts_with('\'') || !line.contains('[') {
            continue;
        }
        let head = &line[..line.find('[').unwrap()];
        let head = head.rsplit(')').next().unwrap_or(head);
        for spec in head.split(['{', '}', ',', '\'', '*']) {
            let spec = spec.trim();
            if let Some(name) = spec.strip_suffix(['=', '+']) {
                set.insert((name.to_string(), true));
            } else if spec.starts_with('-') {
                set.insert((spec.to_string(), false));
            }
        }
    }
    shells.push(("zsh", set, text));

    // fish: `complete -c TOOL ... -s X -l NAME ... [-x|-r]`.
    let text = read(dir.join("fish").join(format!("{tool}.fish")));
    let mut set = BTreeSet::new();
    for line in text.lines().filter(|l| l.starts_with("complete -c ")) {
        let words: Vec<&str> = line.split_whitespace().collect();
        let value = words.contains(&"-x") || words.contains(&"-r");
        for pair in words.windows(2) {
            match pair[0] {
                "-s" => set.insert((format!("-{}", pair[1]), value)),
                "-l" => set.insert((format!("--{}", pair[1]), value)),
                _ => false,
            };
        }
    }
    let with_value = text
        .lines()
        .find_map(|l| l.strip_prefix("set -l with_value "))
        .expect("set -l with_value ... in the fish completion");
    let listed: Options = with_value
        .split_whitespace()
        .map(|o| (o.to_string(), true))
        .collect();
    let valued: Options = set.iter().filter(|o| o.1).cloned().collect();
    assert_eq!(
        listed, valued,
        "fish {tool}: with_value and the -x options differ"
    );
    shells.push(("fish", set, text));
    shells
}

#[test]
fn completions_offer_exactly_each_tools_options() {
    for tool in TOOLS {
        let help = help_options(tool);
        let help_longs: BTreeSet<String> = help.iter().map(|o| o.0.clone()).collect();
        for (shell, offered, text) in completion_options(tool) {
            assert_eq!(
                offered, help,
                "{shell} completion of {tool}: (option, takes a value) differ from --help"
            );
            let named = long_options_in(&text);
            let unknown: Vec<_> = named.difference(&help_longs).collect();
            assert!(
                unknown.is_empty(),
                "{shell} completion of {tool} names {unknown:?}"
            );
        }
    }
}

/// zsh completes as bash does, in a real interactive zsh (tmux): the
/// options of a tool after `TOOL -- TOOL2` (`--` right after the first
/// tool), and reap's options after `--cleanup-exec PROG ARG... ;`.
#[test]
fn zsh_completes_through_chains_and_cleanup_exec() {
    use crate::kit::tmux::{Shell, Tmux};
    if let Some(why) = Shell::Zsh.missing() {
        crate::kit::skip::skip("zsh_completes_through_chains_and_cleanup_exec", &why);
        return;
    }
    let bin_dir = bin("reap").parent().unwrap().to_path_buf();
    let fpath = repo().join("packaging/completions/zsh");
    for (typed, want) in [
        ("reap -- graceful --gr", "--grace"),
        ("pgwrap -- reap --keep-or", "--keep-orphans"),
        ("reap -g 5 -- graceful --preserve-st", "--preserve-status"),
        (
            "reap --cleanup-exec rm -f x \\; --keep-or",
            "--keep-orphans",
        ),
        (
            "reap --cleanup-exec rm -f x \\; -- graceful --gr",
            "--grace",
        ),
    ] {
        let tmux = Tmux::start_shell("zsh-completion", Shell::Zsh);
        tmux.type_line(&format!(
            "PATH={}:$PATH; fpath=({} $fpath); autoload -Uz compinit; compinit -u -D; clear",
            bin_dir.display(),
            fpath.display()
        ));
        tmux.wait_for_screen("the prompt", |s| s.trim() == "$" || s.trim() == "%");
        tmux.send(&["-l", typed]);
        tmux.send(&["Tab"]);
        let screen = tmux.wait_for_joined(&format!("{want} completed after {typed:?}"), |s| {
            s.lines().any(|l| l.starts_with("$ ") && l.contains(want))
        });
        assert!(screen.contains(want), "{typed}: {screen}");
    }
}

#[test]
fn bash_completions_parse() {
    for tool in TOOLS {
        let file = repo().join("packaging/completions/bash").join(tool);
        ok("bash", &[&"-O", &"extglob", &"-n", &file]);
    }
}

// ---------------------------------------------------------------------------------------------
// reap as PID 1

/// A command run as PID 1 of a new PID and mount namespace under `unshare`,
/// chrooted into `root`; its stdout read line by line. Dropping it SIGKILLs
/// unshare, whose `--kill-child` then SIGKILLs PID 1, and so the whole
/// namespace.
struct Jail {
    child: Child,
    lines: Receiver<String>,
    seen: Vec<String>,
    stderr: Arc<Mutex<Vec<u8>>>,
    reaped: bool,
}

impl Jail {
    fn start(root: &Path, mount_proc: bool, argv: &[String]) -> Jail {
        let mut cmd = Command::new("unshare");
        cmd.args(["--pid", "--fork", "--mount", "--kill-child"]);
        if mount_proc {
            cmd.arg("--mount-proc");
        }
        cmd.arg(format!("--root={}", root.display()))
            .args(argv)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        let mut child = cmd.spawn().expect("start unshare");
        let (tx, lines) = mpsc::channel();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        std::thread::spawn(move || {
            for line in stdout.lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let stderr = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&stderr);
        let mut pipe = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = pipe.read(&mut buf) {
                if n == 0 {
                    break;
                }
                sink.lock().unwrap().extend_from_slice(&buf[..n]);
            }
        });
        Jail {
            child,
            lines,
            seen: Vec::new(),
            stderr,
            reaped: false,
        }
    }

    fn report(&self) -> String {
        format!(
            "stdout:\n{}\nstderr:\n{}",
            self.seen.join("\n"),
            String::from_utf8_lossy(&self.stderr.lock().unwrap())
        )
    }

    /// The next stdout line containing `needle`.
    fn expect(&mut self, needle: &str) -> String {
        let deadline = Instant::now() + TIMEOUT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    self.seen.push(line.clone());
                    if line.contains(needle) {
                        return line;
                    }
                }
                Err(_) => panic!("no line with {needle:?}\n{}", self.report()),
            }
        }
    }

    /// PID 1 of the namespace, as this namespace numbers it: unshare's child.
    fn init(&self) -> i32 {
        let unshare = self.child.id() as i32;
        let mut pid = 0;
        procfs::wait_until("unshare's child exists", TIMEOUT, || {
            pid = procfs::children_of(unshare).first().copied().unwrap_or(0);
            pid > 0
        });
        let nspid = procfs::status_field(pid, "NSpid").unwrap_or_default();
        assert!(
            nspid.ends_with("\t1") || nspid.ends_with(" 1"),
            "NSpid of {pid}: {nspid:?}"
        );
        pid
    }

    fn wait(&mut self) -> ExitStatus {
        let deadline = Instant::now() + TIMEOUT;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                self.reaped = true;
                // Whatever is still in the pipe belongs to the report.
                while let Ok(line) = self.lines.recv_timeout(Duration::from_millis(200)) {
                    self.seen.push(line);
                }
                return status;
            }
            if Instant::now() >= deadline {
                panic!("the namespace did not end\n{}", self.report());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Jail {
    fn drop(&mut self) {
        if !self.reaped {
            // SAFETY: plain syscall; unshare is our unreaped child.
            unsafe { libc::kill(self.child.id() as i32, libc::SIGKILL) };
            let _ = self.child.wait();
        }
    }
}

/// A .deb's files unpacked into a fresh directory.
fn unpacked_deb(variant: Variant, tag: &str) -> crate::kit::TempDir {
    let tree = temp_dir(tag);
    ok(
        "dpkg-deb",
        &[&"--extract", &packages().deb_of(variant), &tree.path()],
    );
    tree
}

fn copy_executable(from: &Path, to: &Path) {
    std::fs::create_dir_all(to.parent().unwrap()).unwrap();
    std::fs::copy(from, to).unwrap_or_else(|e| panic!("copy {}: {e}", from.display()));
}

#[test]
fn static_reap_is_pid1_of_an_empty_root() {
    if cannot_run("static_reap_is_pid1_of_an_empty_root") {
        return;
    }
    // The root holds reap and pgwrap of pgwrap-suite-static and a static
    // sigprobe, nothing else: no /proc, no libraries, no shell.
    let tree = unpacked_deb(Variant::Static, "pid1-deb");
    let root = temp_dir("pid1-root");
    copy_executable(&tree.join("usr/bin/reap"), &root.join("reap"));
    copy_executable(&tree.join("usr/bin/pgwrap"), &root.join("pgwrap"));
    copy_executable(&static_bin("sigprobe"), &root.join("sigprobe"));
    let argv = |args: &[&str]| args.iter().map(|s| s.to_string()).collect::<Vec<_>>();

    // It starts, runs COMMAND (pid 2, its child) and exits with its status.
    let mut jail = Jail::start(
        root.path(),
        false,
        &argv(&[
            "/reap",
            "--",
            "/sigprobe",
            "--sleep-ms",
            "50",
            "--exit-code",
            "7",
        ]),
    );
    let ready = jail.expect("ready pid=");
    assert!(
        ready.contains("ready pid=2 ") && ready.contains(" ppid=1 "),
        "{ready}"
    );
    assert_eq!(jail.wait().code(), Some(7), "{}", jail.report());

    // The chain: reap -> pgwrap -> sigprobe.
    let mut jail = Jail::start(
        root.path(),
        false,
        &argv(&[
            "/reap",
            "--",
            "/pgwrap",
            "--",
            "/sigprobe",
            "--sleep-ms",
            "50",
            "--exit-code",
            "5",
        ]),
    );
    let ready = jail.expect("ready pid=");
    assert!(ready.contains(" ppid=2 "), "{ready}");
    assert_eq!(jail.wait().code(), Some(5), "{}", jail.report());

    // COMMAND killed by a signal: as PID 1, reap exits with 128+S.
    let mut jail = Jail::start(root.path(), false, &argv(&["/reap", "--", "/sigprobe"]));
    jail.expect("ready pid=2 ");
    let reap = jail.init();
    let mut probe = 0;
    procfs::wait_until("sigprobe is reap's child", TIMEOUT, || {
        probe = procfs::children_of(reap).first().copied().unwrap_or(0);
        probe > 0
    });
    // SAFETY: plain syscall; sigprobe is reap's unreaped child (reap only
    // reaps it after it died).
    unsafe { libc::kill(probe, libc::SIGKILL) };
    let status = jail.wait();
    assert_eq!(
        status.code(),
        Some(128 + libc::SIGKILL),
        "{status:?}\n{}",
        jail.report()
    );
    assert_eq!(status.signal(), None);
}

// ---------------------------------------------------------------------------------------------
// The container examples

/// The strings of a JSON-style array `["a", "b"]` (Dockerfile exec form, YAML
/// flow sequence).
fn string_array(text: &str) -> Vec<String> {
    let inner = text.trim();
    let inner = inner
        .strip_prefix('[')
        .and_then(|s| s.strip_suffix(']'))
        .unwrap_or_else(|| panic!("not an array: {text}"));
    let mut out = Vec::new();
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        if c != '"' {
            continue;
        }
        let mut s = String::new();
        while let Some(c) = chars.next() {
            match c {
                '"' => break,
                '\\' => s.extend(chars.next()),
                c => s.push(c),
            }
        }
        out.push(s);
    }
    out
}

/// The value after `key` on the first line (trimmed) that starts with it.
fn line_value<'a>(text: &'a str, key: &str) -> &'a str {
    text.lines()
        .map(str::trim)
        .find_map(|l| l.strip_prefix(key))
        .unwrap_or_else(|| panic!("no line starting with {key:?}"))
}

/// Seconds of a duration option's value such as `20s` (the examples use s).
fn option_secs(argv: &[String], option: &str) -> u64 {
    let pos = argv
        .iter()
        .position(|a| a == option)
        .unwrap_or_else(|| panic!("{option} not in {argv:?}"));
    argv[pos + 1]
        .strip_suffix('s')
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{option} {}: not N s", argv[pos + 1]))
}

/// A root like a small image with pgwrap-suite installed: the .deb's files,
/// /bin/sh, the libraries these need (the C library among them), /proc to
/// mount, and the examples' /app/run-job (sigprobe) and /app/deregister (a
/// script printing what reap tells the cleanup).
fn image_root() -> crate::kit::TempDir {
    let root = unpacked_deb(Variant::Dynamic, "image-root");
    let sh = std::fs::canonicalize("/bin/sh").unwrap();
    copy_executable(&sh, &root.join("bin/sh"));
    copy_executable(&bin("sigprobe"), &root.join("app/run-job"));
    let mut programs = vec![sh, root.join("app/run-job")];
    programs.extend(TOOLS.iter().map(|t| root.join("usr/bin").join(t)));
    for program in programs {
        for line in ok("ldd", &[&program]).lines() {
            let path = line
                .split_whitespace()
                .find(|w| w.starts_with('/'))
                .map(PathBuf::from);
            if let Some(path) = path {
                let to = root.join(path.strip_prefix("/").unwrap());
                if !to.exists() {
                    copy_executable(&path, &to);
                }
            }
        }
    }
    std::fs::create_dir_all(root.join("proc")).unwrap();
    let deregister = root.join("app/deregister");
    std::fs::write(
        &deregister,
        "#!/bin/sh\necho \"deregister: cause=$REAP_CAUSE status=$REAP_STATUS\"\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&deregister, std::fs::Permissions::from_mode(0o755)).unwrap();
    root
}

/// Run `argv` as the container's PID 1, stop it as the runtime does (TERM
/// to PID 1), and check that the job got it and the cleanup ran.
fn stop_like_a_runtime(argv: &[String], job_ppid: i32) {
    let root = image_root();
    let mut jail = Jail::start(root.path(), true, argv);
    let ready = jail.expect("ready pid=");
    assert!(ready.contains(&format!(" ppid={job_ppid} ")), "{ready}");
    let init = jail.init();
    // SAFETY: plain syscall; init is unshare's unreaped child.
    unsafe { libc::kill(init, libc::SIGTERM) };
    jail.expect("got TERM");
    jail.expect("deregister: cause=cancel status=0");
    assert_eq!(jail.wait().code(), Some(0), "{}", jail.report());
}

#[test]
fn dockerfile_entrypoint_runs_as_pid1_and_cleans_up_on_stop() {
    let text = std::fs::read_to_string(repo().join("packaging/examples/Dockerfile")).unwrap();
    let entrypoint = string_array(line_value(&text, "ENTRYPOINT "));
    let cmd = string_array(line_value(&text, "CMD "));
    assert_eq!(entrypoint[0], "/usr/bin/reap");
    assert_eq!(entrypoint.last().map(String::as_str), Some("--"));
    assert!(entrypoint.iter().any(|a| a == "--cleanup"));
    // reap's grace fits in docker stop's default 10 s.
    assert!(option_secs(&entrypoint, "--grace") < 10);
    if cannot_run("dockerfile_entrypoint_runs_as_pid1_and_cleans_up_on_stop") {
        return;
    }
    let argv: Vec<String> = entrypoint.into_iter().chain(cmd).collect();
    stop_like_a_runtime(&argv, 1);
}

#[test]
fn kubernetes_pod_runs_as_pid1_and_its_grace_period_covers_the_tools() {
    let text =
        std::fs::read_to_string(repo().join("packaging/examples/kubernetes-pod.yaml")).unwrap();
    let command = string_array(line_value(&text, "command:"));
    let args = string_array(line_value(&text, "args:"));
    let period: u64 = line_value(&text, "terminationGracePeriodSeconds:")
        .trim()
        .parse()
        .unwrap();
    assert_eq!(command[0], "/usr/bin/reap");
    assert_eq!(args[0], "/usr/bin/graceful");
    let reap_grace = option_secs(&command, "--grace");
    let cleanup = option_secs(&command, "--cleanup-timeout");
    let inner_grace = option_secs(&args, "--grace");
    // graceful finishes its ladder inside reap's grace, and the kubelet
    // waits for reap's grace, the cleanup and the cleanup's own grace.
    assert!(
        inner_grace < reap_grace,
        "graceful --grace {inner_grace} >= reap --grace {reap_grace}"
    );
    assert!(
        period > reap_grace + cleanup + reap_grace,
        "terminationGracePeriodSeconds {period} <= {reap_grace} + {cleanup} + {reap_grace}"
    );
    if cannot_run("kubernetes_pod_runs_as_pid1_and_its_grace_period_covers_the_tools") {
        return;
    }
    let argv: Vec<String> = command.into_iter().chain(args).collect();
    // The job is graceful's child; graceful (pid 2) is reap's.
    stop_like_a_runtime(&argv, 2);
}

/// Seconds of a systemd time span such as `45s`, `2min`, `2h`.
fn systemd_secs(span: &str) -> u64 {
    let digits: String = span.chars().take_while(char::is_ascii_digit).collect();
    let n: u64 = digits
        .parse()
        .unwrap_or_else(|_| panic!("time span {span:?}"));
    match &span[digits.len()..] {
        "" | "s" => n,
        "min" | "m" => n * 60,
        "h" => n * 3600,
        unit => panic!("time span unit {unit:?} in {span:?}"),
    }
}

#[test]
fn example_units_give_systemd_more_time_than_the_tools_need() {
    for tool in TOOLS {
        let path = repo().join(format!("packaging/systemd/{tool}-example.service"));
        let text = std::fs::read_to_string(&path).unwrap();
        let exec = line_value(&text, "ExecStart=");
        assert!(exec.starts_with(&format!("/usr/bin/{tool} ")), "{exec}");
        assert_eq!(line_value(&text, "KillMode="), "mixed");
        let timeout = systemd_secs(line_value(&text, "TimeoutStopSec="));
        // The tool's options, up to COMMAND.
        let options: Vec<String> = exec
            .split(" -- ")
            .next()
            .unwrap()
            .split_whitespace()
            .map(String::from)
            .collect();
        let has = |option: &str| options.iter().any(|o| o == option);
        let needed = match tool {
            "graceful" => option_secs(&options, "--grace"),
            // The tree's grace, then the cleanup and its own grace.
            "reap" => {
                let grace = option_secs(&options, "--grace");
                grace + option_secs(&options, "--cleanup-timeout") + grace
            }
            _ => 0,
        };
        assert!(
            timeout > needed,
            "{tool}: TimeoutStopSec= {timeout} s, the tool may need {needed} s"
        );
        if tool == "reap" {
            assert!(has("--cleanup"), "{exec}");
            assert!(
                text.lines().any(|l| l.starts_with("ExecStopPost=")),
                "the reap example pairs its cleanup with ExecStopPost="
            );
        }
        // The comments a user needs.
        for topic in ["KillMode=mixed", "TimeoutStopSec=", "ExecStopPost="] {
            assert!(
                text.lines()
                    .any(|l| l.starts_with('#') && l.contains(topic)),
                "{tool}-example.service does not explain {topic}"
            );
        }
    }
}
