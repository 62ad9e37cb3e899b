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
    /// The FROM of every `--map`.
    mapped: SigSet,
    /// `as_[FROM]` = TO's number, for FROM in `mapped`.
    as_: [u8; 65],
}

impl Route {
    /// Pass on `forward`, unchanged, to `to`.
    pub fn new(forward: SigSet, to: Target) -> Route {
        Route {
            forward,
            to,
            mapped: SigSet::EMPTY,
            as_: [0; 65],
        }
    }

    /// Add `--map FROM:TO` (FROM once: a second map of it is refused).
    pub fn map(&mut self, from: Signal, to: Signal, opt: &str) -> Result<(), Error> {
        if let Some(before) = self.mapped(from) {
            return Err(Error::usage(format!(
                "{opt} {from}:{to} contradicts {from}:{before} given before (map each signal once)"
            )));
        }
        cli::catchable(SigSet::of(&[from]), opt)?;
        self.mapped.insert(from);
        self.as_[from.raw() as usize] = to.raw() as u8;
        Ok(())
    }

    /// What `from` is passed on as, if it is mapped.
    fn mapped(&self, from: Signal) -> Option<Signal> {
        self.mapped
            .contains(from)
            .then(|| Signal::from_raw(self.as_[from.raw() as usize].into()))
            .flatten()
    }

    /// What COMMAND gets when the tool receives `sig`, if anything.
    pub fn route(&self, sig: Signal) -> Option<Signal> {
        self.mapped(sig)
            .or_else(|| self.forward.contains(sig).then_some(sig))
    }

    /// Every signal the tool must catch to route: the forwarded and the
    /// mapped ones.
    pub fn caught(&self) -> SigSet {
        self.forward.union(self.mapped)
    }

    /// The signals no longer routed (the caller left them ignored).
    pub fn drop(&mut self, sigs: SigSet) {
        self.forward = self.forward.minus(sigs);
        self.mapped = self.mapped.minus(sigs);
    }

    /// `(FROM, TO)` of every map, in signal order.
    pub fn maps(&self) -> impl Iterator<Item = (Signal, Signal)> + '_ {
        self.mapped
            .iter()
            .filter_map(|from| Some((from, self.mapped(from)?)))
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
