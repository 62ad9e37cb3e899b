//! System calls refused (strace's fault injection, as a container's seccomp
//! profile refuses them with EPERM or ENOSYS, or a filter with EINVAL): the
//! tool takes its fallback, or exits 125 with one line naming the call;
//! never a spin, never a hang, never COMMAND left running in silence. The
//! whole matrix is `scripts/refusal-matrix`; here, the cells that were
//! defects.

use super::faults::bounded_output;
use crate::kit::bin;
use crate::skip;
use std::process::Command;
use std::time::Duration;

const ERRORS: [&str; 3] = ["ENOSYS", "EPERM", "EINVAL"];

/// reap with `waitid` refused. In the front alone (strace without `-f`
/// traces the process it starts only): the front learns the back's end
/// from `/proc` and how it ended from the board, and ends as COMMAND
/// ended. Everywhere: COMMAND's status is lost, reap ends with 125 and one
/// line naming the call. Before, both hung: the front took the back for
/// lost and then waited for ever on its zombie, and the back's sweep
/// waited for ever on zombies it could not reap.
#[test]
fn reap_with_waitid_refused_ends_and_does_not_hang() {
    let test = "refusals::reap_with_waitid_refused_ends_and_does_not_hang";
    if let Some(why) = skip::needs_program("strace", "strace") {
        return skip::skip(test, &why);
    }
    for err in ERRORS {
        for (place, follow) in [("the front", false), ("every process", true)] {
            let mut cmd = Command::new("strace");
            cmd.args(["-qq", "-o", "/dev/null", "-e", "trace=waitid", "-e"])
                .arg(format!("inject=waitid:error={err}"));
            if follow {
                cmd.arg("-f");
            }
            cmd.arg(bin("reap")).args(["--", "sleep", "0.2"]);
            let out = bounded_output(cmd, Duration::from_secs(30));
            let stderr = String::from_utf8_lossy(&out.stderr);
            let case = format!("waitid refused with {err} in {place}");
            if follow {
                assert_eq!(
                    out.status.code(),
                    Some(125),
                    "{case}: {:?}, {stderr:?}",
                    out.status
                );
                assert_eq!(
                    stderr.lines().count(),
                    1,
                    "{case}: not one line: {stderr:?}"
                );
                assert!(
                    stderr.contains("waitid"),
                    "{case}: the call not named: {stderr:?}"
                );
            } else {
                assert_eq!(
                    out.status.code(),
                    Some(0),
                    "{case}: {:?}, {stderr:?}",
                    out.status
                );
                assert_eq!(stderr, "", "{case}: stderr");
            }
        }
    }
}
