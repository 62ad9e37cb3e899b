//! A real terminal for tests: a private tmux server (its own socket), a
//! window running an interactive shell (bash, dash or zsh), keys typed with
//! `send-keys`. The server is killed by its PID when the value is dropped.

#![allow(dead_code)]

use crate::kit::TIMEOUT;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

/// An interactive shell to run in the window, each with the plain prompt
/// `$ ` and no start-up files.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shell {
    Bash,
    Dash,
    Zsh,
}

impl Shell {
    pub const ALL: [Shell; 3] = [Shell::Bash, Shell::Dash, Shell::Zsh];

    pub fn name(self) -> &'static str {
        match self {
            Shell::Bash => "bash",
            Shell::Dash => "dash",
            Shell::Zsh => "zsh",
        }
    }

    pub fn from_name(name: &str) -> Option<Shell> {
        Shell::ALL.into_iter().find(|s| s.name() == name)
    }

    /// The command line that starts it interactive, without start-up files.
    fn argv(self) -> &'static [&'static str] {
        match self {
            Shell::Bash => &["bash", "--norc", "--noprofile", "-i"],
            Shell::Dash => &["dash", "-i"],
            Shell::Zsh => &["zsh", "-f", "-i"],
        }
    }

    /// Why this shell cannot be used here, if it cannot.
    pub fn missing(self) -> Option<String> {
        crate::skip::needs_program(self.name(), self.name())
    }

    /// Whether `screen` shows this shell's report of a stopped job: bash
    /// and dash print `Stopped`, zsh `suspended`.
    pub fn shows_stopped(self, screen: &str) -> bool {
        match self {
            Shell::Bash | Shell::Dash => screen.contains("Stopped"),
            Shell::Zsh => screen.contains("suspended"),
        }
    }

    /// Whether a line of `jobs` output says the job is running (bash and
    /// dash `Running`, zsh `running`).
    pub fn says_running(self, line: &str) -> bool {
        line.to_ascii_lowercase().contains("running")
    }
}

pub struct Tmux {
    socket: String,
    server_pid: i32,
    server_start: Option<u64>,
    shell: Shell,
}

impl Tmux {
    /// A server with one 120x40 window running `bash --norc -i`.
    pub fn start(tag: &str) -> Tmux {
        Tmux::start_shell(tag, Shell::Bash)
    }

    /// A server with one 120x40 window running `shell`, interactive, with
    /// the prompt `$ `. The caller checks [`Shell::missing`] first.
    pub fn start_shell(tag: &str, shell: Shell) -> Tmux {
        static N: AtomicU32 = AtomicU32::new(0);
        let socket = format!(
            "pgw-{tag}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        );
        let ok = Command::new("tmux")
            .args([
                "-L",
                &socket,
                "-f",
                "/dev/null",
                "new-session",
                "-d",
                "-x",
                "120",
                "-y",
                "40",
            ])
            .args(["env", "PS1=$ ", "HISTFILE=/dev/null", "ENV=/dev/null"])
            .args(shell.argv())
            .status()
            .expect("tmux must be installed (apt-get install tmux)");
        assert!(ok.success(), "tmux new-session failed");
        let out = Command::new("tmux")
            .args(["-L", &socket, "display-message", "-p", "#{pid}"])
            .output()
            .unwrap();
        let server_pid = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
        let tmux = Tmux {
            socket,
            server_pid,
            server_start: crate::procfs::start_time(server_pid),
            shell,
        };
        tmux.wait_for_screen("prompt", |s| s.lines().any(|l| l.trim_end() == "$"));
        tmux
    }

    pub fn shell(&self) -> Shell {
        self.shell
    }

    /// The tmux server's PID.
    pub fn server_pid(&self) -> i32 {
        self.server_pid
    }

    /// The PID of the shell in the window.
    pub fn shell_pid(&self) -> i32 {
        let out = Command::new("tmux")
            .args(["-L", &self.socket, "display-message", "-p", "#{pane_pid}"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
    }

    /// Close the terminal: kill the session, so the shell (the session
    /// leader of the pane's terminal) gets SIGHUP. The server then exits.
    pub fn kill_session(&self) {
        let ok = Command::new("tmux")
            .args(["-L", &self.socket, "kill-session"])
            .status()
            .unwrap();
        assert!(ok.success(), "tmux kill-session failed");
    }

    /// Type `keys` (tmux key names: "Enter", "C-z", "C-c", or literal text).
    pub fn send(&self, keys: &[&str]) {
        let ok = Command::new("tmux")
            .args(["-L", &self.socket, "send-keys"])
            .args(keys)
            .status()
            .unwrap();
        assert!(ok.success());
    }

    /// Type a line of literal text and Enter.
    pub fn type_line(&self, text: &str) {
        assert!(self.try_type_line(text), "tmux send-keys failed");
    }

    /// Type a line of literal text and Enter; false if tmux could not (the
    /// window is gone: the shell exited).
    pub fn try_type_line(&self, text: &str) -> bool {
        let send = |args: &[&str]| {
            Command::new("tmux")
                .args(["-L", &self.socket, "send-keys"])
                .args(args)
                .status()
                .is_ok_and(|s| s.success())
        };
        send(&["-l", text]) && send(&["Enter"])
    }

    /// The visible screen.
    pub fn screen(&self) -> String {
        self.capture(&["-p"])
    }

    /// The screen and its history, lines that wrapped joined back into one.
    pub fn screen_joined(&self) -> String {
        self.capture(&["-p", "-J", "-S", "-"])
    }

    fn capture(&self, args: &[&str]) -> String {
        let out = Command::new("tmux")
            .args(["-L", &self.socket, "capture-pane"])
            .args(args)
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Wait until the joined screen (see [`Tmux::screen_joined`]) satisfies
    /// `pred`; panic with it if not.
    pub fn wait_for_joined(&self, what: &str, pred: impl Fn(&str) -> bool) -> String {
        let deadline = std::time::Instant::now() + TIMEOUT;
        loop {
            let screen = self.screen_joined();
            if pred(&screen) {
                return screen;
            }
            if std::time::Instant::now() > deadline {
                panic!("timed out waiting for {what}; screen:\n{screen}");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Wait until the screen satisfies `pred`; panic with the screen if not.
    pub fn wait_for_screen(&self, what: &str, pred: impl Fn(&str) -> bool) -> String {
        let deadline = std::time::Instant::now() + TIMEOUT;
        loop {
            let screen = self.screen();
            if pred(&screen) {
                return screen;
            }
            if std::time::Instant::now() > deadline {
                panic!("timed out waiting for {what}; screen:\n{screen}");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        // Everything started in the pane, then the server: by PID.
        // The server may be gone already (kill_session): its PID is killed
        // only while it still names the same process.
        let mut pids = Vec::new();
        if crate::procfs::start_time(self.server_pid) == self.server_start {
            pids = crate::procfs::descendants(self.server_pid);
            pids.push(self.server_pid);
        }
        for pid in pids {
            // SAFETY: plain kill(2) of processes this test started.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
        // SAFETY: getuid has no preconditions.
        let uid = unsafe { libc::getuid() };
        let _ = std::fs::remove_file(format!("/tmp/tmux-{uid}/{}", self.socket));
    }
}
