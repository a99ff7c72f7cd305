//! The `markerscope` binary: command-line front end over the library.

use anyhow::Result;
use clap::{Parser, Subcommand};
use markerscope::ccl::Backends;
use markerscope::selftest::{self, SelftestOptions};
use std::io::{IsTerminal, Write};
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "markerscope",
    version,
    about = "Real-time GPU marker detection: connected components with live statistics"
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Check every available algorithm against the oracle; exits non-zero on any mismatch.
    Selftest {
        /// A small matrix that runs in seconds (for compute-sanitizer and CI).
        #[arg(long)]
        quick: bool,
        /// Only these algorithms (comma-separated); default: all available.
        #[arg(long, value_delimiter = ',')]
        algorithms: Vec<String>,
        /// Skip the GPU even if one is present.
        #[arg(long)]
        cpu_only: bool,
    },
    /// List the cameras and GPUs found on this machine.
    Devices,
    /// Benchmark every algorithm (and, with --peers, CuPy and OpenCV) on the papers' random images.
    Bench(markerscope::bench::BenchArgs),
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() {
                ExitCode::from(2)
            } else {
                ExitCode::SUCCESS
            };
        }
    };
    match run(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn run(cli: Cli) -> Result<ExitCode> {
    match cli.command {
        None => {
            use clap::CommandFactory;
            Cli::command().print_help()?;
            Ok(ExitCode::SUCCESS)
        }
        Some(Command::Selftest {
            quick,
            algorithms,
            cpu_only,
        }) => run_selftest(quick, algorithms, cpu_only),
        Some(Command::Bench(args)) => {
            markerscope::bench::run_cli(&args)?;
            Ok(ExitCode::SUCCESS)
        }
        Some(Command::Devices) => {
            let backends = Backends::detect();
            match backends.gpu_name() {
                Some(name) => println!("GPU 0: {name}"),
                None => println!(
                    "GPU: none usable ({})",
                    backends.cuda_unavailable_reason().unwrap_or_default()
                ),
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn run_selftest(quick: bool, algorithms: Vec<String>, cpu_only: bool) -> Result<ExitCode> {
    let backends = if cpu_only {
        Backends::cpu_only()
    } else {
        Backends::detect()
    };
    match backends.gpu_name() {
        Some(name) => eprintln!("GPU: {name}"),
        None => eprintln!(
            "CPU backend only: {}",
            backends.cuda_unavailable_reason().unwrap_or_default()
        ),
    }
    let opts = SelftestOptions { quick, algorithms };
    let start = std::time::Instant::now();
    // Progress overwrites one line on a terminal; logs (CI, the GPU machine) get none of it.
    let interactive = std::io::stderr().is_terminal();
    let report = selftest::run(&backends, &opts, |msg| {
        if interactive {
            eprint!("\r\x1b[K{msg}");
            let _ = std::io::stderr().flush();
        }
    });
    if interactive {
        eprintln!("\r\x1b[K");
    }
    for f in report.failures.iter().take(50) {
        println!("FAIL {f}");
    }
    if report.failures.len() > 50 {
        println!("... and {} more failures", report.failures.len() - 50);
    }
    println!(
        "selftest: {} algorithm(s) [{}], {} checks, {} failures, {:.1} s",
        report.algorithms.len(),
        report.algorithms.join(", "),
        report.checks,
        report.failures.len(),
        start.elapsed().as_secs_f64()
    );
    Ok(if report.failures.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
