//! A real terminal for tests: a private tmux server (its own socket), a
//! window running an interactive shell, keys typed with `send-keys`. The
//! server is killed by its PID when the value is dropped.

use crate::kit::TIMEOUT;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

pub struct Tmux {
    socket: String,
    server_pid: i32,
}

impl Tmux {
    /// A server with one 120x40 window running `bash --norc -i`.
    pub fn start(tag: &str) -> Tmux {
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
            .args([
                "env",
                "PS1=$ ",
                "HISTFILE=/dev/null",
                "bash",
                "--norc",
                "--noprofile",
                "-i",
            ])
            .status()
            .expect("tmux must be installed (apt-get install tmux)");
        assert!(ok.success(), "tmux new-session failed");
        let out = Command::new("tmux")
            .args(["-L", &socket, "display-message", "-p", "#{pid}"])
            .output()
            .unwrap();
        let server_pid = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
        let tmux = Tmux { socket, server_pid };
        tmux.wait_for_screen("prompt", |s| s.lines().any(|l| l.trim_end() == "$"));
        tmux
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
        let ok = Command::new("tmux")
            .args(["-L", &self.socket, "send-keys", "-l", text])
            .status()
            .unwrap();
        assert!(ok.success());
        self.send(&["Enter"]);
    }

    /// The visible screen.
    pub fn screen(&self) -> String {
        let out = Command::new("tmux")
            .args(["-L", &self.socket, "capture-pane", "-p"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
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
        let mut pids = crate::procfs::descendants(self.server_pid);
        pids.push(self.server_pid);
        for pid in pids {
            // SAFETY: plain kill(2) of processes this test started.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
        // SAFETY: getuid has no preconditions.
        let uid = unsafe { libc::getuid() };
        let _ = std::fs::remove_file(format!("/tmp/tmux-{uid}/{}", self.socket));
    }
}
