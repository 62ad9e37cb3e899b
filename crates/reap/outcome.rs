//! How a run of reap ended, as the cleanup and the caller see it: the
//! cause (`REAP_CAUSE`), the cleanup's environment, and the final status.
//! Pure rules, unit-tested here.

use pgkit::Status;

/// Why COMMAND ended, in the contract's order of precedence.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cause {
    /// reap received a stop signal (TERM, INT, HUP, QUIT) and passed it on.
    Cancel,
    /// The process the supervisor started (reap's front) died.
    Lost,
    /// COMMAND was killed by a signal.
    Signal,
    /// COMMAND exited (126 and 127 included).
    Exit,
}

impl Cause {
    pub fn of(cancel: bool, lost: bool, status: Status) -> Cause {
        match status {
            _ if cancel => Cause::Cancel,
            _ if lost => Cause::Lost,
            Status::Signaled(_) => Cause::Signal,
            Status::Exited(_) => Cause::Exit,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Cause::Cancel => "cancel",
            Cause::Lost => "lost",
            Cause::Signal => "signal",
            Cause::Exit => "exit",
        }
    }
}

/// `REAP_STATUS`, `REAP_SIGNAL`, `REAP_CAUSE` for the cleanup.
pub fn cleanup_env(status: Status, cause: Cause) -> [(&'static str, String); 3] {
    let signal = match status {
        Status::Signaled(s) => s.to_string(),
        Status::Exited(_) => String::new(),
    };
    [
        ("REAP_STATUS", status.shell_code().to_string()),
        ("REAP_SIGNAL", signal),
        ("REAP_CAUSE", cause.name().to_string()),
    ]
}

/// reap's own status: COMMAND's (0 if it is one of `successes`, statuses as
/// a shell reports them: N, or 128+S; `--success-status`, tini's `-e`); if
/// that is 0 and the cleanup failed, the cleanup's.
pub fn final_status(command: Status, cleanup: Option<Status>, successes: &[i32]) -> Status {
    let success = successes.contains(&command.shell_code());
    let command = if success { Status::Exited(0) } else { command };
    match cleanup {
        Some(c) if command == Status::Exited(0) && c != Status::Exited(0) => c,
        _ => command,
    }
}

/// The status a cleanup stopped by `--cleanup-timeout` counts as.
pub const CLEANUP_TIMED_OUT: Status = Status::Exited(124);

#[cfg(test)]
mod tests {
    use super::*;
    use pgkit::Signal;

    const TERM: Status = Status::Signaled(Signal::TERM);

    #[test]
    fn cause_precedence() {
        assert_eq!(Cause::of(true, true, TERM), Cause::Cancel);
        assert_eq!(Cause::of(true, false, Status::Exited(0)), Cause::Cancel);
        assert_eq!(Cause::of(false, true, TERM), Cause::Lost);
        assert_eq!(Cause::of(false, true, Status::Exited(3)), Cause::Lost);
        assert_eq!(Cause::of(false, false, TERM), Cause::Signal);
        assert_eq!(Cause::of(false, false, Status::Exited(127)), Cause::Exit);
    }

    #[test]
    fn environment() {
        let env = cleanup_env(Status::Exited(3), Cause::Exit);
        assert_eq!(
            env.map(|(k, v)| format!("{k}={v}")),
            ["REAP_STATUS=3", "REAP_SIGNAL=", "REAP_CAUSE=exit"]
        );
        let env = cleanup_env(TERM, Cause::Cancel);
        assert_eq!(
            env.map(|(k, v)| format!("{k}={v}")),
            ["REAP_STATUS=143", "REAP_SIGNAL=TERM", "REAP_CAUSE=cancel"]
        );
    }

    #[test]
    fn success_statuses_count_as_0() {
        let s = &[143, 3, 255, 0];
        assert_eq!(final_status(TERM, None, s), Status::Exited(0));
        assert_eq!(
            final_status(Status::Exited(255), None, s),
            Status::Exited(0)
        );
        assert_eq!(
            final_status(Status::Exited(3), Some(Status::Exited(5)), s),
            Status::Exited(5)
        );
        assert_eq!(final_status(Status::Exited(4), None, s), Status::Exited(4));
    }

    #[test]
    fn status_rule() {
        let final_status = |c, k| final_status(c, k, &[]);
        let ok = Status::Exited(0);
        assert_eq!(final_status(ok, None), ok);
        assert_eq!(final_status(ok, Some(ok)), ok);
        assert_eq!(final_status(ok, Some(Status::Exited(5))), Status::Exited(5));
        assert_eq!(final_status(ok, Some(TERM)), TERM);
        assert_eq!(
            final_status(ok, Some(CLEANUP_TIMED_OUT)),
            Status::Exited(124)
        );
        assert_eq!(
            final_status(Status::Exited(3), Some(Status::Exited(5))),
            Status::Exited(3)
        );
        assert_eq!(final_status(TERM, Some(Status::Exited(5))), TERM);
        assert_eq!(final_status(Status::Exited(3), Some(ok)), Status::Exited(3));
    }
}
