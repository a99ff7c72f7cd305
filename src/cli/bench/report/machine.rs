//! What the report says about the tool and the machine it ran on.

use crate::ccl::Backends;
use serde::Serialize;

#[derive(Clone, Debug, Serialize)]
pub struct Tool {
    pub name: &'static str,
    pub version: &'static str,
}

#[derive(Clone, Debug, Serialize)]
pub struct Machine {
    pub cpu: String,
    pub cpu_threads: usize,
    pub rayon_threads: usize,
    pub os: String,
    pub gpu: Option<String>,
    pub cuda_unavailable: Option<String>,
}

impl Tool {
    pub fn this() -> Tool {
        Tool {
            name: "markerscope",
            version: env!("CARGO_PKG_VERSION"),
        }
    }
}

impl Machine {
    pub fn detect(backends: &Backends) -> Machine {
        Machine {
            cpu: cpu_name(),
            cpu_threads: std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1),
            rayon_threads: rayon::current_num_threads(),
            os: format!("{} {}", std::env::consts::OS, std::env::consts::ARCH),
            gpu: backends.gpu_name(),
            cuda_unavailable: backends.cuda_unavailable_reason(),
        }
    }
}

fn cpu_name() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_else(|| format!("unknown {} CPU", std::env::consts::ARCH))
}

/// Now in UTC as RFC 3339 (civil-from-days, no time-zone crate needed).
pub fn utc_now_rfc3339() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + (month <= 2) as i64;
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn date_format() {
        let d = utc_now_rfc3339();
        assert_eq!(d.len(), 20, "{d}");
        assert!(d.starts_with("20") && d.ends_with('Z'));
    }
}
