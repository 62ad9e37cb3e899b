//! Where a signal received goes: passed on unchanged (`--forward`), as
//! another signal (`--map FROM:TO`), or not at all; and to whom (`--to
//! group|child`). One set of rules for pgwrap and reap.

use crate::child::Target;
use crate::cli;
use crate::error::Error;
use crate::signal::{SigSet, Signal, SIGNAL_HINT};

/// The routing options. `Copy`: the map is a table by signal number.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Route {
    /// Signals passed on unchanged.
    pub forward: SigSet,
    /// Who gets them.
    pub to: Target,
    /// `as_[FROM]`: the TO of `--map FROM:TO`.
    as_: [Option<Signal>; 65],
}

impl Route {
    /// Pass on `forward`, unchanged, to `to`.
    pub fn new(forward: SigSet, to: Target) -> Route {
        Route {
            forward,
            to,
            as_: [None; 65],
        }
    }

    /// Add `--map FROM:TO` (FROM once: a second map of it is refused).
    pub fn map(&mut self, from: Signal, to: Signal, opt: &str) -> Result<(), Error> {
        if let Some(before) = self.as_[from.raw() as usize] {
            return Err(Error::usage(format!(
                "{opt} {from}:{to} contradicts {from}:{before} given before (map each signal once)"
            )));
        }
        cli::catchable(SigSet::of(&[from]), opt)?;
        self.as_[from.raw() as usize] = Some(to);
        Ok(())
    }

    /// What COMMAND gets when the tool receives `sig`, if anything.
    pub fn route(&self, sig: Signal) -> Option<Signal> {
        self.as_[sig.raw() as usize].or_else(|| self.forward.contains(sig).then_some(sig))
    }

    /// Every signal the tool must catch to route: the forwarded and the
    /// mapped ones.
    pub fn caught(&self) -> SigSet {
        self.forward
            .union(self.maps().map(|(from, _)| from).collect())
    }

    /// The signals no longer routed (the caller left them ignored).
    pub fn drop(&mut self, sigs: SigSet) {
        self.forward = self.forward.minus(sigs);
        for sig in sigs.iter() {
            self.as_[sig.raw() as usize] = None;
        }
    }

    /// `(FROM, TO)` of every map, in signal order.
    pub fn maps(&self) -> impl Iterator<Item = (Signal, Signal)> + '_ {
        Signal::all().filter_map(|from| Some((from, self.as_[from.raw() as usize]?)))
    }
}

/// `--map FROM:TO`.
pub fn parse_map(text: &str, opt: &str) -> Result<(Signal, Signal), Error> {
    let (from, to) = text.split_once(':').ok_or_else(|| {
        Error::usage(format!(
            "invalid value '{text}' for {opt}: expected FROM:TO, e.g. QUIT:TERM"
        ))
    })?;
    let one = |s: &str| {
        Signal::parse(s).map_err(|e| Error::usage(format!("{e} in {opt} '{text}' ({SIGNAL_HINT})")))
    };
    Ok((one(from)?, one(to)?))
}

/// `--to group|child`.
pub fn parse_to(text: &str, opt: &str) -> Result<Target, Error> {
    match text {
        "group" => Ok(Target::Group),
        "child" => Ok(Target::Child),
        other => Err(Error::usage(format!(
            "invalid value '{other}' for {opt} (use group or child)"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes() {
        let mut r = Route::new(SigSet::of(&[Signal::HUP, Signal::QUIT]), Target::Group);
        r.map(Signal::QUIT, Signal::TERM, "--map").unwrap();
        r.map(Signal::USR1, Signal::parse("RTMAX").unwrap(), "--map")
            .unwrap();
        assert_eq!(r.route(Signal::QUIT), Some(Signal::TERM));
        assert_eq!(r.route(Signal::HUP), Some(Signal::HUP));
        assert_eq!(r.route(Signal::USR1), Signal::parse("RTMAX").ok());
        assert_eq!(r.route(Signal::INT), None);
        assert!(r.caught().contains(Signal::USR1));
        assert!(r.map(Signal::QUIT, Signal::INT, "--map").is_err());
        assert!(r.map(Signal::KILL, Signal::INT, "--map").is_err());
        assert_eq!(r.maps().count(), 2);
        r.drop(SigSet::of(&[Signal::USR1, Signal::HUP]));
        assert_eq!(r.route(Signal::USR1), None);
        assert_eq!(r.route(Signal::HUP), None);
        assert!(parse_map("QUIT", "-m").is_err());
        assert_eq!(parse_to("child", "--to"), Ok(Target::Child));
        assert!(parse_to("x", "--to").is_err());
    }
}
