//! `GRACEFUL_GRACE_MS`: the grace graceful gives COMMAND, exported so that
//! nested tools and hooks can budget their own shutdown, and read back by an
//! inner graceful, which never waits longer than the outer one allows.
//!
//! The inner grace is capped at the outer's minus [`MARGIN`]. The margin is
//! what the outer needs after the inner's deadline to see the inner end on
//! its own: the stop signal's way down the chain (the inner starts its grace
//! a little after the outer), the inner's kill signal, the killed processes
//! dying (unmapping gigabytes of memory can take a few hundred milliseconds)
//! and being reaped, and the inner exiting with their status, so the outer's
//! own kill signal finds nothing left to kill.

use pgkit::{verbose, Timeout};

use std::ffi::OsStr;
use std::time::Duration;

/// The variable's name.
pub const VAR: &str = pgkit::duration::GRACE_VAR;

/// Kept free below an outer grace; see the module's documentation.
pub const MARGIN: Duration = Duration::from_millis(500);

/// `own` capped by an outer grace of `outer_ms`: at most `outer_ms - MARGIN`,
/// and 0 when the outer grace is no larger than the margin.
pub fn cap(own: Timeout, outer_ms: u64) -> Timeout {
    let allowed = Duration::from_millis(outer_ms).saturating_sub(MARGIN);
    match own {
        Timeout::After(d) if d <= allowed => own,
        _ => Timeout::After(allowed),
    }
}

/// The grace graceful uses: `own` (`--grace`) under the outer budget in its
/// environment, if any; each decision logged with `-v`. A cap of a grace
/// the user `given` is announced even without `-v`: it changes what the
/// user asked for; a default takes the budget silently.
pub fn effective(own: Timeout, given: bool, env: Option<&OsStr>) -> Timeout {
    let Some(text) = env.map(OsStr::to_string_lossy) else {
        return own;
    };
    // Whole milliseconds only (`parse` alone would take "+5").
    let ms = text.parse::<u64>().ok();
    let Some(ms) = ms.filter(|_| text.bytes().all(|b| b.is_ascii_digit())) else {
        verbose!("ignoring {VAR}='{text}' from the environment: not a number of milliseconds");
        return own;
    };
    let capped = cap(own, ms);
    if capped == own {
        return own;
    }
    if !given {
        verbose!("default grace {own} takes the outer budget: {capped} ({VAR}={ms})");
        return capped;
    }
    // Said even without -v: it changes what the user asked for.
    pgkit::log::notice(&format!(
        "grace capped at {capped} by {VAR}={ms} (the outer grace less a {} margin; \
         --grace {own})",
        Timeout::After(MARGIN)
    ));
    capped
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsString;

    fn ms(n: u64) -> Timeout {
        Timeout::After(Duration::from_millis(n))
    }

    #[test]
    fn reads_whole_milliseconds_only() {
        let outer = |v: &str| effective(ms(10_000), true, Some(OsStr::new(v)));
        assert_eq!(outer("2500"), ms(2_000));
        assert_eq!(outer("0"), ms(0));
        for bad in [
            "",
            "abc",
            "-5",
            "+5",
            "1.5",
            " 10",
            "10 ",
            "10s",
            "99999999999999999999999",
        ] {
            assert_eq!(outer(bad), ms(10_000), "{bad:?}");
        }
        let not_utf8 = {
            use std::os::unix::ffi::OsStringExt;
            OsString::from_vec(vec![b'1', 0xff])
        };
        assert_eq!(effective(ms(10_000), true, Some(&not_utf8)), ms(10_000));
    }

    #[test]
    fn cap_keeps_the_margin() {
        assert_eq!(cap(ms(10_000), 2_000), ms(1_500));
        assert_eq!(cap(ms(1_000), 2_000), ms(1_000), "already within");
        assert_eq!(cap(ms(1_500), 2_000), ms(1_500), "exactly the allowance");
        assert_eq!(cap(Timeout::Never, 30_000), ms(29_500));
        assert_eq!(
            cap(ms(10_000), 500),
            ms(0),
            "outer no larger than the margin"
        );
        assert_eq!(cap(ms(10_000), 300), ms(0));
        assert_eq!(cap(ms(0), 0), ms(0));
        assert_eq!(cap(ms(1), u64::MAX), ms(1));
    }

    #[test]
    fn effective_grace() {
        for given in [true, false] {
            assert_eq!(effective(ms(10_000), given, None), ms(10_000));
            let junk = Some(OsStr::new("junk"));
            assert_eq!(effective(ms(10_000), given, junk), ms(10_000));
            let outer = Some(OsStr::new("4000"));
            assert_eq!(effective(ms(10_000), given, outer), ms(3_500));
            assert_eq!(effective(Timeout::Never, given, None), Timeout::Never);
        }
    }
}
