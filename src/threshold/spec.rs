//! What a threshold is: the methods a user names (`fixed:T`, `otsu`, `triangle`,
//! `background:K`, `adaptive:W:C`; see the folder's docs) and their parsing.

use crate::error::{Error, Result};
use std::fmt;
use std::str::FromStr;

/// Largest adaptive window: window sums plus rounding stay within u32.
pub const MAX_ADAPTIVE_WINDOW: u32 = 4095;

/// K of the default threshold, `background:5` (see the module docs for why).
pub const DEFAULT_BACKGROUND_K: f64 = 5.0;

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ThresholdSpec {
    /// Foreground = grey > T.
    Fixed(u8),
    /// Foreground = grey > the Otsu threshold of the image.
    Otsu,
    /// Foreground = grey > the triangle threshold of the image (scikit-image's).
    Triangle,
    /// Foreground = grey > background level + `k` background deviations (see the module docs).
    Background { k: f64 },
    /// Foreground = grey > mean of the `window`×`window` neighbourhood − `c`.
    Adaptive { window: u32, c: f64 },
}

impl Default for ThresholdSpec {
    fn default() -> Self {
        ThresholdSpec::Background {
            k: DEFAULT_BACKGROUND_K,
        }
    }
}

impl fmt::Display for ThresholdSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ThresholdSpec::Fixed(t) => write!(f, "fixed:{t}"),
            ThresholdSpec::Otsu => f.write_str("otsu"),
            ThresholdSpec::Triangle => f.write_str("triangle"),
            ThresholdSpec::Background { k } => write!(f, "background:{k}"),
            ThresholdSpec::Adaptive { window, c } => write!(f, "adaptive:{window}:{c}"),
        }
    }
}

impl FromStr for ThresholdSpec {
    type Err = Error;

    fn from_str(spec: &str) -> Result<Self> {
        let bad = |why: String| Error::InvalidThreshold {
            spec: spec.to_string(),
            why,
        };
        let lower = spec.trim().to_ascii_lowercase();
        let parts: Vec<&str> = lower.split(':').map(str::trim).collect();
        match parts.as_slice() {
            ["otsu"] => Ok(ThresholdSpec::Otsu),
            ["triangle"] => Ok(ThresholdSpec::Triangle),
            ["background", k] => {
                let k: f64 = k
                    .parse()
                    .map_err(|_| bad(format!("K must be a number >= 0, got '{k}'")))?;
                if !(k.is_finite() && k >= 0.0) {
                    return Err(bad(format!("K must be a finite number >= 0, got {k}")));
                }
                Ok(ThresholdSpec::Background { k })
            }
            ["fixed", t] => {
                let t: u32 = t
                    .parse()
                    .map_err(|_| bad(format!("T must be an integer in 0..=255, got '{t}'")))?;
                let t =
                    u8::try_from(t).map_err(|_| bad(format!("T must be in 0..=255, got {t}")))?;
                Ok(ThresholdSpec::Fixed(t))
            }
            ["adaptive", w, c] => {
                let window: u32 = w
                    .parse()
                    .map_err(|_| bad(format!("W must be an odd integer >= 3, got '{w}'")))?;
                if window < 3 || window % 2 == 0 || window > MAX_ADAPTIVE_WINDOW {
                    return Err(bad(format!(
                        "W must be odd and in 3..={MAX_ADAPTIVE_WINDOW}, got {window}"
                    )));
                }
                let c: f64 = c
                    .parse()
                    .map_err(|_| bad(format!("C must be a number, got '{c}'")))?;
                if !c.is_finite() {
                    return Err(bad(format!("C must be a finite number, got {c}")));
                }
                Ok(ThresholdSpec::Adaptive { window, c })
            }
            ["fixed"] => Err(bad("fixed needs a value: fixed:T".into())),
            ["background"] => Err(bad(
                "background needs the number of deviations: background:K".into(),
            )),
            ["adaptive", ..] => Err(bad(
                "adaptive needs a window and a constant: adaptive:W:C".into()
            )),
            _ => Err(bad("unknown method".into())),
        }
    }
}

/// The adaptive window and constant every adaptive threshold accepts (host and device alike).
pub fn check_adaptive(window: u32, c: f64) -> Result<()> {
    if window < 3 || window % 2 == 0 || window > MAX_ADAPTIVE_WINDOW || !c.is_finite() {
        return Err(Error::InvalidThreshold {
            spec: ThresholdSpec::Adaptive { window, c }.to_string(),
            why: format!("W must be odd and in 3..={MAX_ADAPTIVE_WINDOW}, C finite"),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_specs() {
        assert_eq!(
            "fixed:127".parse::<ThresholdSpec>().unwrap(),
            ThresholdSpec::Fixed(127)
        );
        assert_eq!(
            " OTSU ".parse::<ThresholdSpec>().unwrap(),
            ThresholdSpec::Otsu
        );
        assert_eq!(
            "adaptive:11:2".parse::<ThresholdSpec>().unwrap(),
            ThresholdSpec::Adaptive { window: 11, c: 2.0 }
        );
        assert_eq!(
            "adaptive:3:-2.5".parse::<ThresholdSpec>().unwrap(),
            ThresholdSpec::Adaptive { window: 3, c: -2.5 }
        );
        assert_eq!(
            "Triangle".parse::<ThresholdSpec>().unwrap(),
            ThresholdSpec::Triangle
        );
        assert_eq!(
            "background:5".parse::<ThresholdSpec>().unwrap(),
            ThresholdSpec::Background { k: 5.0 }
        );
        assert_eq!(
            " background : 2.5 ".parse::<ThresholdSpec>().unwrap(),
            ThresholdSpec::Background { k: 2.5 }
        );
        assert_eq!(
            ThresholdSpec::Background { k: 5.0 }.to_string(),
            "background:5"
        );
        for s in [
            "fixed:127",
            "otsu",
            "triangle",
            "background:5",
            "background:0",
            "background:3.25",
            "adaptive:11:2",
            "adaptive:31:-4.5",
        ] {
            let spec: ThresholdSpec = s.parse().unwrap();
            assert_eq!(spec.to_string().parse::<ThresholdSpec>().unwrap(), spec);
        }
    }

    #[test]
    fn rejects_bad_specs_with_clear_messages() {
        for (s, needle) in [
            ("", "unknown method"),
            ("median", "unknown method"),
            ("fixed", "fixed:T"),
            ("fixed:256", "0..=255"),
            ("fixed:-1", "0..=255"),
            ("fixed:abc", "0..=255"),
            ("adaptive:4:2", "odd"),
            ("adaptive:1:2", "odd"),
            ("adaptive:11", "adaptive:W:C"),
            ("adaptive:11:x", "C must be a number"),
            ("adaptive:11:inf", "finite"),
            ("adaptive:99999:2", "odd"),
            ("otsu:3", "unknown method"),
            ("triangle:3", "unknown method"),
            ("background", "background:K"),
            ("background:", "K must be a number"),
            ("background:x", "K must be a number"),
            ("background:-1", ">= 0"),
            ("background:inf", "finite"),
            ("background:nan", "finite"),
            ("background:1:2", "unknown method"),
        ] {
            let err = s.parse::<ThresholdSpec>().unwrap_err();
            assert!(matches!(err, Error::InvalidThreshold { .. }), "{s}: {err}");
            let msg = err.to_string();
            assert!(msg.contains(needle), "'{s}' -> {msg}");
            assert!(
                msg.contains(&format!("'{s}'")),
                "message names the spec: {msg}"
            );
        }
    }
}
