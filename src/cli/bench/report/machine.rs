//! What the report says about the tool and the machine it ran on.

use crate::ccl::Backends;
use serde::{Deserialize, Serialize};

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

/// How busy the machine's processors were over a stretch of a run, in cores (CPU seconds per
/// second of wall time): this process, the other processes, the interrupts (which a GPU's work
/// raises too: they are no process's), and the time a hypervisor gave this machine's virtual
/// processors to other machines. A rate measured while other processes or machines were busy
/// is a rate of a shared machine.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct HostLoad {
    /// Processors the OS counts (the `cpuN` lines of /proc/stat).
    pub cpus: usize,
    pub this_process: f64,
    pub others: f64,
    pub interrupts: f64,
    pub stolen: f64,
}

impl HostLoad {
    /// Whether other processes or machines took enough of the machine to weigh on a measured
    /// rate: half a core, or 5 % of the processors, whichever is more.
    pub fn shared(&self) -> bool {
        self.others + self.stolen >= (0.05 * self.cpus as f64).max(0.5)
    }

    /// The load between two readings of /proc/stat's counters (`a`, then `b`), over `wall_s`
    /// seconds in which this process used `process_cpu_s` of CPU time.
    pub fn between(
        a: &CpuTicks,
        b: &CpuTicks,
        process_cpu_s: f64,
        wall_s: f64,
    ) -> Option<HostLoad> {
        if wall_s <= 0.0 || a.per_s <= 0.0 {
            return None;
        }
        let seconds = |x: u64, y: u64| y.saturating_sub(x) as f64 / a.per_s;
        let busy = seconds(a.busy, b.busy);
        Some(HostLoad {
            cpus: b.cpus,
            this_process: process_cpu_s / wall_s,
            // The counters tick at a coarse rate: this process's exact time can exceed them.
            others: ((busy - process_cpu_s) / wall_s).max(0.0),
            interrupts: seconds(a.interrupts, b.interrupts) / wall_s,
            stolen: seconds(a.steal, b.steal) / wall_s,
        })
    }
}

/// /proc/stat's counters of all processors together, in clock ticks (`per_s` a second).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct CpuTicks {
    /// user + nice + system: the processes' time (guest time is counted in user).
    pub busy: u64,
    /// irq + softirq.
    pub interrupts: u64,
    pub steal: u64,
    pub cpus: usize,
    pub per_s: f64,
}

impl CpuTicks {
    /// The counters in the text of /proc/stat; None if its first line is not the sum line.
    pub fn parse(stat: &str, per_s: f64) -> Option<CpuTicks> {
        let mut lines = stat.lines();
        let mut fields = lines.next()?.split_whitespace();
        if fields.next()? != "cpu" {
            return None;
        }
        let v: Vec<u64> = fields.map_while(|f| f.parse().ok()).collect();
        let at = |i: usize| v.get(i).copied().unwrap_or(0);
        if v.len() < 4 {
            return None;
        }
        let cpus = lines
            .take_while(|l| l.starts_with("cpu"))
            .filter(|l| l[3..].starts_with(|c: char| c.is_ascii_digit()))
            .count();
        Some(CpuTicks {
            busy: at(0) + at(1) + at(2),
            interrupts: at(5) + at(6),
            steal: at(7),
            cpus,
            per_s,
        })
    }

    /// The counters now (Linux), else None.
    pub fn now() -> Option<CpuTicks> {
        let stat = std::fs::read_to_string("/proc/stat").ok()?;
        CpuTicks::parse(&stat, clock_ticks_per_s()?)
    }
}

#[cfg(target_os = "linux")]
fn clock_ticks_per_s() -> Option<f64> {
    // SAFETY: sysconf reads a constant of the system.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    (t > 0).then_some(t as f64)
}

#[cfg(not(target_os = "linux"))]
fn clock_ticks_per_s() -> Option<f64> {
    None
}

/// CPU time of this process so far (s), every thread's; None where it cannot be read.
#[cfg(target_os = "linux")]
pub fn process_cpu_s() -> Option<f64> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec through a valid pointer.
    let ok = unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) } == 0;
    ok.then_some(ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9)
}

#[cfg(not(target_os = "linux"))]
pub fn process_cpu_s() -> Option<f64> {
    None
}

/// A stretch of a run whose host load is measured (`LoadClock::start`, then `stop`).
pub struct LoadClock {
    at: std::time::Instant,
    ticks: CpuTicks,
    process_s: f64,
}

impl LoadClock {
    /// Starts measuring; None where the counters cannot be read.
    pub fn start() -> Option<LoadClock> {
        Some(LoadClock {
            ticks: CpuTicks::now()?,
            process_s: process_cpu_s()?,
            at: std::time::Instant::now(),
        })
    }

    /// The load since `start`.
    pub fn stop(&self) -> Option<HostLoad> {
        let (ticks, process_s) = (CpuTicks::now()?, process_cpu_s()?);
        let wall_s = self.at.elapsed().as_secs_f64();
        HostLoad::between(&self.ticks, &ticks, process_s - self.process_s, wall_s)
    }
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

    const STAT: &str = "cpu  100 20 30 1000 5 7 3 40 11 0\n\
                        cpu0 50 10 15 500 2 3 1 20 5 0\n\
                        cpu1 50 10 15 500 3 4 2 20 6 0\n\
                        intr 12345\n\
                        cpufreq 1\n";

    #[test]
    fn the_counters_are_the_sum_line_and_the_processors_are_its_numbered_lines() {
        let t = CpuTicks::parse(STAT, 100.0).unwrap();
        // user + nice + system; guest (11) is part of user already.
        assert_eq!((t.busy, t.interrupts, t.steal, t.cpus), (150, 7 + 3, 40, 2));
        assert_eq!(CpuTicks::parse("intr 1\n", 100.0), None);
        assert_eq!(CpuTicks::parse("cpu 1 2\n", 100.0), None);
    }

    #[test]
    fn the_load_splits_the_busy_time_between_this_process_and_the_rest() {
        let a = CpuTicks {
            busy: 1_000,
            interrupts: 50,
            steal: 10,
            cpus: 16,
            per_s: 100.0,
        };
        // Two seconds: 2,600 ticks of the processes (26 s of CPU), 100 stolen, 150 of
        // interrupts; this process 24 s.
        let b = CpuTicks {
            busy: 3_600,
            interrupts: 200,
            steal: 110,
            ..a
        };
        let load = HostLoad::between(&a, &b, 24.0, 2.0).unwrap();
        assert_eq!(
            (
                load.cpus,
                load.this_process,
                load.others,
                load.interrupts,
                load.stolen
            ),
            (16, 12.0, 1.0, 0.75, 0.5)
        );
        assert!(load.shared());
        // Interrupts alone (a GPU's work raises them) do not make a machine shared.
        let interrupted = CpuTicks {
            busy: 3_400,
            interrupts: 1_050,
            ..a
        };
        let load = HostLoad::between(&a, &interrupted, 24.0, 2.0).unwrap();
        assert_eq!((load.others, load.interrupts), (0.0, 5.0));
        assert!(!load.shared());
        // Less than 5 % of 16 processors (0.8 cores) is not a shared machine.
        let quiet = HostLoad::between(&a, &CpuTicks { busy: 3_100, ..a }, 20.0, 2.0).unwrap();
        assert_eq!((quiet.others, quiet.stolen), (0.5, 0.0));
        assert!(!quiet.shared());
        // The coarse counters below this process's exact time: no negative load.
        let under = HostLoad::between(&a, &CpuTicks { busy: 1_500, ..a }, 6.0, 2.0).unwrap();
        assert_eq!(under.others, 0.0);
        assert_eq!(HostLoad::between(&a, &b, 1.0, 0.0), None);
        assert!(CpuTicks::now().is_some_and(|t| t.cpus >= 1) || !cfg!(target_os = "linux"));
    }
}
