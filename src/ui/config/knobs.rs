//! Every key of the settings file as data: its name, what it sets, and how its value is read
//! (`config/default.toml` documents each at length). `apply_toml` reads a file through the
//! table; a value that does not read is named and keeps what was there.

use super::{parse_backend, UiSettings, ViewMode};
use crate::ccl::{algorithm_info, Connectivity};
use crate::fiducial::Dictionary;
use crate::geometry::ReferencePoint;
use crate::output::stream::StreamSpec;
use crate::source::camera_controls::parse_resolution;
use crate::ui::tracks::{TAIL_FRAMES_MAX, TAIL_FRAMES_MIN};
use std::sync::Arc;
use toml::Value;

/// One key of the settings file.
pub struct Knob {
    /// `section.key`, as in the file.
    pub key: &'static str,
    /// What it sets, in a few words (the tests check that every key has one).
    #[cfg_attr(not(test), allow(dead_code))]
    pub doc: &'static str,
    /// Reads the value into the settings; an error says what was expected.
    pub apply: fn(&mut UiSettings, &Value) -> Result<(), String>,
}

const fn knob(
    key: &'static str,
    doc: &'static str,
    apply: fn(&mut UiSettings, &Value) -> Result<(), String>,
) -> Knob {
    Knob { key, doc, apply }
}

/// Every key the settings file may hold.
pub const KNOBS: &[Knob] = &[
    knob("source.spec", "what the window opens at start", |s, v| {
        let spec = text(v)?.trim();
        if spec.is_empty() {
            return Err("empty; use \"auto\" or a source spec".into());
        }
        s.source = spec.to_string();
        Ok(())
    }),
    knob("threshold.spec", "the threshold method", |s, v| {
        s.threshold = text(v)?.parse().map_err(|e: crate::Error| e.to_string())?;
        Ok(())
    }),
    knob(
        "threshold.invert",
        "dark markers on a light background",
        |s, v| {
            s.invert = flag(v)?;
            Ok(())
        },
    ),
    knob(
        "labeling.connectivity",
        "pixel neighbourhood, 4 or 8",
        |s, v| {
            s.connectivity = v
                .as_integer()
                .and_then(|n| u8::try_from(n).ok())
                .and_then(Connectivity::from_number)
                .ok_or_else(|| format!("expected 4 or 8, got {v}"))?;
            Ok(())
        },
    ),
    knob(
        "labeling.algorithm",
        "algorithm by registry name",
        |s, v| {
            let name = text(v)?.trim();
            s.algorithm = match name {
                "" => None,
                name => Some(algorithm_info(name).map_err(|e| e.to_string())?.name.into()),
            };
            Ok(())
        },
    ),
    knob("labeling.backend", "auto, cpu or cuda", |s, v| {
        s.backend = parse_backend(text(v)?)
            .ok_or_else(|| format!("expected auto, cpu or cuda, got {v}"))?;
        Ok(())
    }),
    knob("labeling.shapes", "shape descriptors", |s, v| {
        s.shapes = flag(v)?;
        Ok(())
    }),
    knob("filter.min_area", "smallest area kept", |s, v| {
        s.filter.min_area = count(v)?;
        Ok(())
    }),
    knob("filter.max_area", "largest area kept", |s, v| {
        s.filter.max_area = count(v)?;
        Ok(())
    }),
    knob(
        "filter.max_aspect",
        "longest over shortest box side",
        |s, v| {
            s.filter.max_aspect = match number(v)? {
                0.0 => None,
                a if a.is_finite() && a >= 1.0 => Some(a),
                a => return Err(format!("expected 0 (no limit) or a number >= 1, got {a}")),
            };
            Ok(())
        },
    ),
    knob(
        "filter.min_circularity",
        "smallest circularity kept",
        |s, v| {
            s.filter.min_circularity = shape_limit(v, None)?;
            Ok(())
        },
    ),
    knob(
        "filter.max_circularity",
        "largest circularity kept",
        |s, v| {
            s.filter.max_circularity = shape_limit(v, None)?;
            Ok(())
        },
    ),
    knob(
        "filter.min_inertia_ratio",
        "smallest inertia ratio kept",
        |s, v| {
            s.filter.min_inertia_ratio = shape_limit(v, Some(1.0))?;
            Ok(())
        },
    ),
    knob(
        "filter.max_inertia_ratio",
        "largest inertia ratio kept",
        |s, v| {
            s.filter.max_inertia_ratio = shape_limit(v, Some(1.0))?;
            Ok(())
        },
    ),
    knob("world.points", "reference points \"x,y=X,Y\"", |s, v| {
        s.world_points = reference_points(v)?;
        Ok(())
    }),
    knob("world.calibration", "lens calibration file", |s, v| {
        s.calibration = text(v)?.trim().to_string();
        Ok(())
    }),
    knob("world.units", "the world unit's name", |s, v| {
        s.world_units = text(v)?.trim().to_string();
        Ok(())
    }),
    knob("view.mode", "grey, binary or labels", |s, v| {
        s.view = ViewMode::parse(text(v)?)
            .ok_or_else(|| format!("expected grey, binary or labels, got {v}"))?;
        Ok(())
    }),
    knob(
        "view.overlays",
        "boxes and crosses over the frame",
        |s, v| {
            s.overlays = flag(v)?;
            Ok(())
        },
    ),
    knob("view.ids", "component ids by the boxes", |s, v| {
        s.ids = flag(v)?;
        Ok(())
    }),
    knob("view.tails", "trajectory tails", |s, v| {
        s.show_tails = flag(v)?;
        Ok(())
    }),
    knob("view.tail_frames", "frames a tail spans", |s, v| {
        s.tail_frames = v
            .as_integer()
            .and_then(|n| u32::try_from(n).ok())
            .filter(|n| (TAIL_FRAMES_MIN..=TAIL_FRAMES_MAX).contains(n))
            .ok_or_else(|| {
                format!("expected a whole number in {TAIL_FRAMES_MIN}..={TAIL_FRAMES_MAX}, got {v}")
            })?;
        Ok(())
    }),
    knob("markers.enabled", "square fiducials looked for", |s, v| {
        s.markers.enabled = flag(v)?;
        Ok(())
    }),
    knob(
        "markers.dictionaries",
        "OpenCV's dictionary names",
        |s, v| {
            s.markers.dictionaries = dictionaries(v)?;
            Ok(())
        },
    ),
    knob("markers.length", "marker side, 0 = no poses", |s, v| {
        s.markers.length = match number(v)? {
            0.0 => None,
            l if l.is_finite() && l > 0.0 => Some(l),
            l => {
                return Err(format!(
                    "expected 0 (no poses) or a positive length, got {l}"
                ))
            }
        };
        Ok(())
    }),
    knob("mask.file", "mask file loaded at start", |s, v| {
        s.mask_file = text(v)?.trim().to_string();
        Ok(())
    }),
    knob("stream.urls", "live result streams", |s, v| {
        s.streams = stream_urls(v)?;
        Ok(())
    }),
    knob(
        "camera.exposure",
        "\"\", \"auto\" or 100 µs units",
        |s, v| {
            s.camera.exposure = match v {
                Value::String(e) if e.trim().is_empty() => None,
                Value::String(e) => Some(e.parse().map_err(|e: crate::Error| e.to_string())?),
                Value::Integer(n) => Some(
                    n.to_string()
                        .parse()
                        .map_err(|e: crate::Error| e.to_string())?,
                ),
                _ => {
                    return Err(format!(
                        "expected \"\" (the camera's own), \"auto\" or a number, got {v}"
                    ))
                }
            };
            Ok(())
        },
    ),
    knob("camera.gain", "gain, -1 = the camera's own", |s, v| {
        s.camera.gain = camera_number(v, -1, "-1 (the camera's own) or a whole number >= 0")?;
        Ok(())
    }),
    knob(
        "camera.resolution",
        "\"WxH\", \"\" = the camera's own",
        |s, v| {
            s.camera.resolution =
                optional_text(v, |r| parse_resolution(r).map_err(|e| e.to_string()))?;
            Ok(())
        },
    ),
    knob(
        "camera.fps",
        "frame rate, 0 = the highest offered",
        |s, v| {
            s.camera.fps =
                camera_number(v, 0, "0 (the camera's own) or a whole number of frames/s")?;
            Ok(())
        },
    ),
    knob(
        "camera.format",
        "pixel format, \"\" = the best for grey",
        |s, v| {
            s.camera.format =
                optional_text(v, |f| f.parse().map_err(|e: crate::Error| e.to_string()))?;
            Ok(())
        },
    ),
];

impl UiSettings {
    /// Applies the keys found in `text` (TOML, the layout of `config/default.toml`). Returns one
    /// message per problem, naming `origin` and the key; the affected keys are left unchanged.
    pub fn apply_toml(&mut self, text: &str, origin: &str) -> Vec<String> {
        let table: toml::Table = match text.parse() {
            Ok(t) => t,
            Err(e) => {
                let why = e.to_string().lines().next().unwrap_or_default().to_string();
                return vec![format!(
                    "{origin}: not valid TOML ({why}); using the defaults"
                )];
            }
        };
        let mut problems = self.apply_table(&table, origin, |_| true);
        // The sections of the sources start from the defaults just read.
        if let Some(sections) = table.get(super::sources::SOURCES_KEY) {
            problems.extend(self.read_sources(sections, origin));
        }
        problems
    }

    /// Applies the `[section]` tables of `table` whose names `allowed` accepts (the others are
    /// reported), then checks the filter and fits the world mapping. The `[[sources]]` array is
    /// left to `read_sources`.
    pub(super) fn apply_table(
        &mut self,
        table: &toml::Table,
        origin: &str,
        allowed: impl Fn(&str) -> bool,
    ) -> Vec<String> {
        let mut problems = Vec::new();
        let filter_before = self.filter;
        let mut bad = |key: &str, why: String| {
            problems.push(format!(
                "{origin}: {key}: {why}; keeping the previous value"
            ))
        };
        for (section, value) in table {
            if section == super::sources::SOURCES_KEY {
                continue;
            }
            let Some(keys) = value.as_table() else {
                bad(section, "expected a [section] table".into());
                continue;
            };
            if !allowed(section) {
                bad(section, super::sources::not_per_source(section));
                continue;
            }
            for (key, value) in keys {
                let full = format!("{section}.{key}");
                if let Err(why) = self.apply_key(&full, value) {
                    bad(&full, why);
                }
            }
        }
        if let Err(e) = self.filter.validate() {
            problems.push(format!("{origin}: {e}; keeping the previous filter"));
            self.filter = filter_before;
        }
        if table.contains_key("world") {
            if let Err(why) = self.refit_world() {
                problems.push(format!("{origin}: {why}; positions stay in pixels"));
            }
        }
        problems
    }

    fn apply_key(&mut self, key: &str, value: &Value) -> Result<(), String> {
        let knob = KNOBS.iter().find(|k| k.key == key).ok_or("unknown key")?;
        (knob.apply)(self, value)
    }
}

fn text(v: &Value) -> Result<&str, String> {
    v.as_str()
        .ok_or_else(|| format!("expected a string, got {v}"))
}

fn flag(v: &Value) -> Result<bool, String> {
    v.as_bool()
        .ok_or_else(|| format!("expected true or false, got {v}"))
}

/// A number, written with or without a decimal point.
fn number(v: &Value) -> Result<f64, String> {
    v.as_float()
        .or_else(|| v.as_integer().map(|n| n as f64))
        .ok_or_else(|| format!("expected a number, got {v}"))
}

/// An area limit: 0 = none, else a whole number.
fn count(v: &Value) -> Result<Option<u64>, String> {
    match v.as_integer() {
        Some(n) if n >= 0 => Ok((n > 0).then_some(n as u64)),
        _ => Err(format!("expected a whole number >= 0, got {v}")),
    }
}

/// A shape limit: 0 = none; else a number >= 0 (at most `top`).
fn shape_limit(v: &Value, top: Option<f64>) -> Result<Option<f64>, String> {
    match number(v)? {
        0.0 => Ok(None),
        x if x.is_finite() && x > 0.0 && top.is_none_or(|t| x <= t) => Ok(Some(x)),
        x => Err(format!(
            "expected 0 (no limit) or a number in {}, got {x}",
            if top.is_some() { "0..=1" } else { "0.." }
        )),
    }
}

/// A camera control's whole number, or `own`: the camera's own value (None).
fn camera_number(v: &Value, own: i64, expected: &str) -> Result<Option<u32>, String> {
    let wrong = || format!("expected {expected}, got {v}");
    match v.as_integer() {
        Some(n) if n == own => Ok(None),
        Some(n) => u32::try_from(n).map(Some).map_err(|_| wrong()),
        None => Err(wrong()),
    }
}

/// A string read by `parse`, or "" for none.
fn optional_text<T>(
    v: &Value,
    parse: impl Fn(&str) -> Result<T, String>,
) -> Result<Option<T>, String> {
    match text(v)?.trim() {
        "" => Ok(None),
        t => parse(t).map(Some),
    }
}

fn reference_points(v: &Value) -> Result<Vec<ReferencePoint>, String> {
    let items = v
        .as_array()
        .ok_or_else(|| format!("expected a list of \"x,y=X,Y\" strings, got {v}"))?;
    items
        .iter()
        .map(|item| {
            item.as_str()
                .ok_or_else(|| format!("expected a \"x,y=X,Y\" string, got {item}"))?
                .parse::<ReferencePoint>()
                .map_err(|e| e.to_string())
        })
        .collect()
}

/// Predefined marker dictionaries by name (at least one).
fn dictionaries(v: &Value) -> Result<Vec<Arc<Dictionary>>, String> {
    let list = v
        .as_array()
        .filter(|l| !l.is_empty())
        .ok_or_else(|| format!("expected a list of dictionary names, got {v}"))?;
    list.iter()
        .map(|item| {
            let name = item
                .as_str()
                .ok_or_else(|| format!("expected a dictionary name, got {item}"))?;
            Dictionary::predefined(name)
                .map(Arc::new)
                .map_err(|e| e.to_string())
        })
        .collect()
}

/// Stream addresses, each checked.
fn stream_urls(v: &Value) -> Result<Vec<String>, String> {
    let list = v
        .as_array()
        .ok_or_else(|| format!("expected a list of addresses, got {v}"))?;
    list.iter()
        .map(|item| {
            let url = item
                .as_str()
                .ok_or_else(|| format!("expected an address string, got {item}"))?;
            StreamSpec::parse(url).map_err(|e| e.to_string())?;
            Ok(url.trim().to_string())
        })
        .collect()
}
