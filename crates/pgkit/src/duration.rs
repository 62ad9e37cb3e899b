//! Durations as the suite writes them: `10` (seconds), `1.5s`, `.5`, `5.`,
//! `1e3` (the numbers `timeout(1)` takes), `250ms`, `2m`,
//! `1h`, `1d`, `0`, `inf`/`infinity` for never, and systemd.time(7) spans
//! as unit files write them (`5min`, `1min30s`, `1min 30s`, `2 min`).
//!
//! Parsed by hand with integer arithmetic (no floating point): the fraction
//! keeps nanosecond precision and every overflow is an error, not a wrap.

use std::time::Duration;

/// The grace a tool gives COMMAND, exported so that nested tools and hooks
/// can budget their own shutdown (an inner graceful caps its grace to it).
pub const GRACE_VAR: &str = "GRACEFUL_GRACE_MS";

/// `grace` as [`GRACE_VAR`] in COMMAND's environment: whole milliseconds,
/// rounded down so the budget is never overstated; removed for `inf`.
pub fn export_grace(spawn: &mut crate::spawn::Spawn, grace: Option<Duration>) {
    match grace {
        Some(g) => spawn.env(
            GRACE_VAR,
            u64::try_from(g.as_millis()).unwrap_or(u64::MAX).to_string(),
        ),
        None => spawn.env_remove(GRACE_VAR),
    };
}

/// How long to wait before acting.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Timeout {
    After(Duration),
    Never,
}

/// The hint appended to every "invalid duration" message.
pub const DURATION_HINT: &str = "try 10, 10s, 1.5s, 250ms, 2m, 1min30s, 1h, 1d or inf";

/// The longest wait the tools arm (about 3000 years): a larger value, however
/// many digits it has, means this, as `timeout(1)` takes an unrepresentable
/// duration for the longest it can wait.
pub const MAX_SECS: u64 = 100_000_000_000;

/// The smallest wait: what a positive value below a nanosecond becomes
/// (only a literal zero is zero).
const MIN_NANOS: u128 = 1;
/// [`MAX_SECS`] in nanoseconds.
const MAX_NANOS: u128 = MAX_SECS as u128 * 1_000_000_000;

impl Timeout {
    /// Parse a duration; the error is the message's middle
    /// (`invalid duration '10x'`), the caller names the option. A span
    /// (`1min 30s`, `1h30min`) is the sum of its parts, each rounded as a
    /// whole value is.
    pub fn parse(text: &str) -> Result<Timeout, String> {
        let bad = || format!("invalid duration '{text}'");
        if text.eq_ignore_ascii_case("inf") || text.eq_ignore_ascii_case("infinity") {
            return Ok(Timeout::Never);
        }
        if text.is_empty() || text.trim() != text {
            return Err(bad());
        }
        let (mut nanos, mut rest) = (0u128, text);
        while !rest.is_empty() {
            let (part, tail) = part(rest).ok_or_else(bad)?;
            nanos = (nanos + part).min(MAX_NANOS);
            rest = tail.trim_start();
        }
        let secs = (nanos / 1_000_000_000) as u64;
        let sub = (nanos % 1_000_000_000) as u32;
        Ok(Timeout::After(Duration::new(secs, sub)))
    }

    /// The duration, or `None` for never.
    pub fn duration(self) -> Option<Duration> {
        match self {
            Timeout::After(d) => Some(d),
            Timeout::Never => None,
        }
    }
}

/// The units of a part, as systemd.time(7) names them (months and years
/// left out: `M` is too near `m`), with their nanoseconds; a number
/// without a unit is seconds (the first, empty, name).
const UNITS: [(&str, u128); 7] = [
    ("us usec", 1_000),
    ("ms msec", 1_000_000),
    (" s sec second seconds", 1_000_000_000),
    ("m min minute minutes", 60_000_000_000),
    ("h hr hour hours", 3_600_000_000_000),
    ("d day days", 86_400_000_000_000),
    ("w week weeks", 604_800_000_000_000),
];

/// The first part of a span, in nanoseconds, and the text after it: a
/// decimal number (`10`, `1.5`, `.5`, `5.`, `1e3`, `2.5E-1`: what
/// `timeout(1)`'s `strtod` takes in the C locale, less signs, hex and the
/// named values), blanks, and a unit. A positive value too small to count
/// in nanoseconds is the smallest wait, never zero; one too large, the
/// longest.
fn part(text: &str) -> Option<(u128, &str)> {
    let bytes = text.as_bytes();
    let digits_from = |i: usize| i + bytes[i..].iter().take_while(|b| b.is_ascii_digit()).count();
    let whole_end = digits_from(0);
    let (frac_start, frac_end) = if bytes.get(whole_end) == Some(&b'.') {
        (whole_end + 1, digits_from(whole_end + 1))
    } else {
        (whole_end, whole_end)
    };
    if whole_end == 0 && frac_end == frac_start {
        return None;
    }
    let mut end = frac_end;
    let mut exp10: i64 = 0;
    if matches!(bytes.get(end), Some(b'e' | b'E')) {
        let mut i = end + 1;
        let negative = bytes.get(i) == Some(&b'-');
        i += usize::from(matches!(bytes.get(i), Some(b'+' | b'-')));
        let exp_end = digits_from(i);
        if exp_end == i {
            return None;
        }
        // Saturated far beyond any unit's range: the result saturates too.
        let magnitude = text[i..exp_end]
            .bytes()
            .fold(0i64, |n, b| (n * 10 + i64::from(b - b'0')).min(1_000_000));
        exp10 = if negative { -magnitude } else { magnitude };
        end = exp_end;
    }
    let after = text[end..].trim_start();
    let unit_len = after.bytes().take_while(u8::is_ascii_alphabetic).count();
    let (unit, tail) = after.split_at(unit_len);
    let (_, nanos_per_unit) = UNITS
        .iter()
        .find(|(names, _)| names.split(' ').any(|n| n == unit))?;
    // The next part follows a blank, or a unit (`1min30s`), not a point.
    let tail = if unit.is_empty() { &text[end..] } else { tail };
    let next = tail.chars().next();
    if next.is_some_and(|c| !(c.is_whitespace() || c.is_ascii_digit() && !unit.is_empty())) {
        return None;
    }
    let digits = [&text[..whole_end], &text[frac_start..frac_end]].concat();
    let exp10 = exp10 - (frac_end - frac_start) as i64;
    // The value is `digits` x 10^exp10 units. Significant digits only
    // (a positive value has at least one), at most 23 of them: with a
    // unit's nanoseconds (below 10^15) the product fits in a u128.
    let significant = digits.trim_start_matches('0');
    let positive = !significant.trim_end_matches('0').is_empty();
    let kept = significant.len().min(23);
    let exp10 = exp10.saturating_add((significant.len() - kept) as i64);
    let mantissa: u128 = significant[..kept].parse().unwrap_or(0);
    let scaled = mantissa * nanos_per_unit;
    let power = (u32::try_from(exp10.unsigned_abs()).ok()).and_then(|e| 10u128.checked_pow(e));
    let grown = (power.and_then(|p| scaled.checked_mul(p))).unwrap_or(MAX_NANOS);
    let shrunk = power.map_or(0, |p| scaled / p);
    let nanos = if exp10 >= 0 { grown } else { shrunk }.min(MAX_NANOS);
    Some((nanos.max(MIN_NANOS * u128::from(positive)), tail))
}

/// The one form every line of the suite prints a duration in: seconds
/// (`30s`, `4.5s`) from a second up, milliseconds (`250ms`, `0.0001ms`)
/// below, exactly (no rounding: the digits it takes, trailing zeros
/// trimmed), and `inf`. So `--grace 30s` reads `30s` wherever it is said.
impl std::fmt::Display for Timeout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Timeout::Never => f.write_str("inf"),
            Timeout::After(d) => show(f, *d),
        }
    }
}

fn show(f: &mut std::fmt::Formatter<'_>, d: Duration) -> std::fmt::Result {
    // In u64 and u32, not as_nanos()'s u128, whose division and Display
    // the static binaries would carry for this alone.
    let (secs, nanos) = (d.as_secs(), d.subsec_nanos());
    let (whole, frac, digits, unit) = if secs > 0 || nanos == 0 {
        (secs, nanos, 9, "s")
    } else {
        (u64::from(nanos / 1_000_000), nanos % 1_000_000, 6, "ms")
    };
    if frac == 0 {
        return write!(f, "{whole}{unit}");
    }
    let text = format!("{frac:0digits$}");
    write!(f, "{whole}.{}{unit}", text.trim_end_matches('0'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Timeout {
        Timeout::After(Duration::from_millis(n))
    }

    #[test]
    fn accepted_forms() {
        assert_eq!(Timeout::parse("10"), Ok(ms(10_000)));
        assert_eq!(Timeout::parse("10s"), Ok(ms(10_000)));
        assert_eq!(Timeout::parse("1.5s"), Ok(ms(1_500)));
        assert_eq!(Timeout::parse("1.5"), Ok(ms(1_500)));
        assert_eq!(Timeout::parse(".5"), Ok(ms(500)));
        assert_eq!(Timeout::parse("250ms"), Ok(ms(250)));
        assert_eq!(Timeout::parse("2m"), Ok(ms(120_000)));
        assert_eq!(Timeout::parse("1h"), Ok(ms(3_600_000)));
        assert_eq!(Timeout::parse("1d"), Ok(ms(86_400_000)));
        assert_eq!(Timeout::parse("0"), Ok(ms(0)));
        assert_eq!(
            Timeout::parse("0.0001ms"),
            Ok(Timeout::After(Duration::from_nanos(100)))
        );
        assert_eq!(Timeout::parse("inf"), Ok(Timeout::Never));
        assert_eq!(Timeout::parse("Infinity"), Ok(Timeout::Never));
        assert_eq!(Timeout::parse("1.25m"), Ok(ms(75_000)));
    }

    #[test]
    fn systemd_spans() {
        // systemd.time(7), as unit files write them: the sum of the parts.
        for (text, want) in [
            ("5min", 300_000),
            ("1min30s", 90_000),
            ("1min 30s", 90_000),
            ("1h 30min", 5_400_000),
            ("2 min", 120_000),
            ("1 s", 1_000),
            ("1h30m", 5_400_000),
            ("2hours 1minute 1sec 1msec", 7_261_001),
            ("1w", 604_800_000),
            ("1.5min", 90_000),
            ("10 20", 30_000),
        ] {
            assert_eq!(Timeout::parse(text), Ok(ms(want)), "{text}");
        }
        assert_eq!(
            Timeout::parse("1us"),
            Ok(Timeout::After(Duration::from_nanos(1_000)))
        );
        // Each part is rounded as a value alone: only a literal zero is zero.
        assert_eq!(Timeout::parse("0min 0s"), Ok(ms(0)));
        assert_eq!(
            Timeout::parse("0min 1e-30s"),
            Ok(Timeout::After(Duration::from_nanos(1)))
        );
        let longest = Timeout::After(Duration::from_secs(MAX_SECS));
        assert_eq!(Timeout::parse("99999999999999999999999w 1s"), Ok(longest));
    }

    #[test]
    fn the_numbers_timeout_takes() {
        // timeout(1) reads its number with strtod: a trailing point and an
        // exponent are numbers too.
        assert_eq!(Timeout::parse("5."), Ok(ms(5_000)));
        assert_eq!(Timeout::parse("5.s"), Ok(ms(5_000)));
        assert_eq!(Timeout::parse("1e3"), Ok(ms(1_000_000)));
        assert_eq!(Timeout::parse("1E3ms"), Ok(ms(1_000)));
        assert_eq!(Timeout::parse("2.5e-1"), Ok(ms(250)));
        assert_eq!(Timeout::parse("1e+2"), Ok(ms(100_000)));
        assert_eq!(Timeout::parse("0e9"), Ok(ms(0)));
        assert_eq!(Timeout::parse("15e-1s"), Ok(ms(1_500)));
        assert_eq!(
            Timeout::parse("1e-30"),
            Ok(Timeout::After(Duration::from_nanos(1)))
        );
        assert_eq!(
            Timeout::parse("1e99999999999"),
            Ok(Timeout::After(Duration::from_secs(MAX_SECS)))
        );
    }

    #[test]
    fn printed_in_one_form() {
        let show = |text: &str| Timeout::parse(text).unwrap().to_string();
        // Whole seconds, and anything of a second or more, in seconds;
        // below a second in milliseconds: as a user writes them.
        assert_eq!(show("1s"), "1s");
        assert_eq!(show("30"), "30s");
        assert_eq!(show("0"), "0s");
        assert_eq!(show("4500ms"), "4.5s");
        assert_eq!(show("1.25s"), "1.25s");
        assert_eq!(show("250ms"), "250ms");
        assert_eq!(show("0.5"), "500ms");
        assert_eq!(show("2m"), "120s");
        assert_eq!(show("0.0001ms"), "0.0001ms");
        assert_eq!(show("0.0000000001"), "0.000001ms");
        assert_eq!(show("inf"), "inf");
        assert_eq!(
            Timeout::After(Duration::from_nanos(1_000_000_001)).to_string(),
            "1.000000001s"
        );
    }

    #[test]
    fn rejected_forms() {
        for text in [
            "", "10x", "-1", "+1", "1.2.3s", "s", "ms", ".", "1e", "1e+", "e3", ".e3", " 1", "1s ",
            "nan", "1sms", "0x10", "10S", "∞", "1min.5s", "1M", "1y", "1min -5s", "1min,30s",
        ] {
            assert!(Timeout::parse(text).is_err(), "{text:?} should be rejected");
        }
    }

    #[test]
    fn only_a_literal_zero_is_zero() {
        let smallest = Timeout::After(Duration::from_nanos(1));
        assert_eq!(Timeout::parse("0.0000000001"), Ok(smallest));
        assert_eq!(Timeout::parse("0.000000000000000000000001ms"), Ok(smallest));
        assert_eq!(Timeout::parse("0.000"), Ok(ms(0)));
        assert_eq!(Timeout::parse("0ms"), Ok(ms(0)));
    }

    #[test]
    fn too_large_means_the_longest_wait() {
        let longest = Timeout::After(Duration::from_secs(MAX_SECS));
        for text in [
            "200000000000",
            "9223372036854775808",
            "18446744073709551616",
            "99999999999999999999999d",
            "999999999999999999999999999999999999999999999999999",
            "9223372036854775808.5ms",
        ] {
            assert_eq!(Timeout::parse(text), Ok(longest), "{text}");
        }
    }
}
