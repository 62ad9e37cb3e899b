//! Durations as the suite writes them: `10` (seconds), `1.5s`, `250ms`, `2m`,
//! `1h`, `1d`, `0`, and `inf`/`infinity` for never.
//!
//! Parsed by hand with integer arithmetic (no floating point): the fraction
//! keeps nanosecond precision and every overflow is an error, not a wrap.

use std::time::Duration;

/// How long to wait before acting.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Timeout {
    After(Duration),
    Never,
}

/// The hint appended to every "invalid duration" message.
pub const DURATION_HINT: &str = "try 10, 10s, 1.5s, 250ms, 2m, 1h, 1d or inf";

/// The longest wait the tools arm (about 3000 years): a larger value, however
/// many digits it has, means this, as `timeout(1)` takes an unrepresentable
/// duration for the longest it can wait.
pub const MAX_SECS: u64 = 100_000_000_000;

/// The smallest wait: what a positive value below a nanosecond becomes
/// (only a literal zero is zero).
const MIN_NANOS: u128 = 1;

impl Timeout {
    /// Parse a duration; the error is the message's middle
    /// (`invalid duration '10x'`), the caller names the option.
    pub fn parse(text: &str) -> Result<Timeout, String> {
        let bad = || format!("invalid duration '{text}'");
        if text.eq_ignore_ascii_case("inf") || text.eq_ignore_ascii_case("infinity") {
            return Ok(Timeout::Never);
        }
        let split = text
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(text.len());
        let (number, unit) = text.split_at(split);
        let nanos_per_unit: u128 = match unit {
            "" | "s" => 1_000_000_000,
            "ms" => 1_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            "d" => 86_400_000_000_000,
            _ => return Err(bad()),
        };
        let (whole, frac) = match number.split_once('.') {
            Some((w, f)) => (w, f),
            None => (number, ""),
        };
        let digits_ok = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
        if whole.is_empty() && frac.is_empty() || !digits_ok(whole) || !digits_ok(frac) {
            return Err(bad());
        }
        if number.ends_with('.') {
            return Err(bad());
        }
        let max_nanos = u128::from(MAX_SECS) * 1_000_000_000;
        // More digits than a u128 holds: longer than the longest wait anyway.
        let Ok(whole) = (if whole.is_empty() {
            Ok(0)
        } else {
            whole.parse::<u128>()
        }) else {
            return Ok(Timeout::After(Duration::from_secs(MAX_SECS)));
        };
        // The fraction, scaled to units of 10^-18: more precision than any
        // unit needs, and 18 digits fit in a u128 product without overflow.
        let mut frac_e18: u128 = 0;
        for (i, b) in frac.bytes().enumerate() {
            if i < 18 {
                frac_e18 += u128::from(b - b'0') * 10u128.pow(17 - i as u32);
            }
        }
        let nanos = whole
            .checked_mul(nanos_per_unit)
            .and_then(|n| n.checked_add(frac_e18 * nanos_per_unit / 1_000_000_000_000_000_000))
            .unwrap_or(max_nanos)
            .min(max_nanos);
        // A positive value too small to count in nanoseconds is the smallest
        // wait, never zero.
        let positive = number.bytes().any(|b| (b'1'..=b'9').contains(&b));
        let nanos = if positive {
            nanos.max(MIN_NANOS)
        } else {
            nanos
        };
        let secs = (nanos / 1_000_000_000) as u64;
        Ok(Timeout::After(Duration::new(
            secs,
            (nanos % 1_000_000_000) as u32,
        )))
    }

    /// The duration, or `None` for never.
    pub fn duration(self) -> Option<Duration> {
        match self {
            Timeout::After(d) => Some(d),
            Timeout::Never => None,
        }
    }
}

impl std::fmt::Display for Timeout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Timeout::Never => f.write_str("inf"),
            Timeout::After(d) if d.subsec_nanos() == 0 => write!(f, "{}s", d.as_secs()),
            Timeout::After(d) => write!(f, "{}ms", d.as_secs_f64() * 1000.0),
        }
    }
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
    fn rejected_forms() {
        for text in [
            "", "10x", "-1", "+1", "1.2.3s", "s", "ms", ".", "1.", "1 s", " 1", "1e3", "nan",
            "1sms", "0x10", "10S", "∞",
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
