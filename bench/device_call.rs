//! The Python package's call on a CUDA array (`component_stats`,
//! `connected_components_with_stats` on a CuPy mask already on the GPU) without Python: the
//! same `DeviceLabeler` calls in the same order as `label_device` (python/src/device.rs), the
//! result arrays allocated with cudarc where the Python layer has CuPy allocate them (the label
//! image before the labeling, the rows between the labeling and the row writing).
//!
//! Per frame size, input form and density it prints the wall time of the whole call (until its
//! last kernel is done) and of each host-visible step (median of --repeat calls after a
//! warm-up), the best whole call timed as
//! `python/bench/bench_gpu.py` times it (CUDA events on the null stream around the call), and
//! the labeling kernels alone (`Labeler::time_resident`, per kernel, best of --repeat). Then the
//! mean Gpx/s over the densities, to compare with bench_gpu.py's goals, and for each frame size
//! which input form was faster: that sets `PACK_FIRST_MIN_PIXELS` (src/ccl/cuda/mask_input.rs).
//! Both forms must give bit-identical results; the program checks that they do and fails if not.
//!
//! Input forms (`--input`): `bytes` (the strip kernel packs the byte mask itself), `pack-first`
//! (`pack_bytes16` packs it first, the strip kernel reads words), `default` (what
//! PACK_FIRST_MIN_PIXELS, or `--pack-first-from`, chooses), `both` (bytes and pack-first).
//!
//! cargo build --release --example device_call
//! ./target/release/examples/device_call                       # 8192², g = 4, d = 0.1 … 0.9, 8-conn, both forms
//! ./target/release/examples/device_call --sizes 1920x1080,2048x2048,4096x4096,8192x8192 --densities 0.5

use anyhow::{bail, Context};
use clap::Parser;
use cudarc::driver::{CudaSlice, DevicePtr};
use markerscope::ccl::cuda::device::{
    pointer_device, DeviceLabeler, DeviceMask, KeepCurrentContext,
};
use markerscope::ccl::cuda::flsl::{Flsl, Variant};
use markerscope::ccl::cuda::mask_input::{MaskInput, PACK_FIRST_MIN_PIXELS};
use markerscope::ccl::{Connectivity, LabelRequest, Labeler, Want};
use markerscope::frame::random_image::image_seed;
use markerscope::frame::random_image::{generate, RandomImageSpec};
use markerscope::gpu::Gpu;
use markerscope::tuning::Tuning;
use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::time::Instant;

#[derive(Parser)]
#[command(about = "Times the Python package's CUDA-array call from Rust, per host-visible step")]
struct Args {
    /// Frame sizes, WIDTHxHEIGHT, comma-separated.
    #[arg(long, default_value = "8192x8192", value_delimiter = ',', value_parser = parse_size)]
    sizes: Vec<(u32, u32)>,
    /// Foreground densities, comma-separated.
    #[arg(long, default_value = "0.1,0.3,0.5,0.7,0.9", value_delimiter = ',')]
    densities: Vec<f64>,
    #[arg(long, default_value_t = 4)]
    granularity: u32,
    /// 4 or 8.
    #[arg(long, default_value_t = 8)]
    connectivity: u8,
    /// Timed calls per configuration (after one warm-up call).
    #[arg(long, default_value_t = 20)]
    repeat: u32,
    /// bytes, pack-first, default or both.
    #[arg(long, default_value = "both")]
    input: String,
    /// The `default` form packs byte masks of at least this many pixels first (0: always);
    /// PACK_FIRST_MIN_PIXELS when not given.
    #[arg(long)]
    pack_first_from: Option<u64>,
    #[arg(long, default_value_t = 1)]
    seed: u32,
    /// CUDA device.
    #[arg(long, default_value_t = 0)]
    device: usize,
}

fn parse_size(text: &str) -> Result<(u32, u32), String> {
    let parsed = text
        .to_ascii_lowercase()
        .split_once('x')
        .and_then(|(w, h)| Some((w.parse().ok()?, h.parse().ok()?)));
    parsed.ok_or_else(|| format!("size: expected WIDTHxHEIGHT such as 8192x8192, got '{text}'"))
}

/// An input form and the pack-first threshold that selects it.
#[derive(Clone, Copy)]
struct Form {
    name: &'static str,
    pack_first_from: u64,
}

fn forms(input: &str, default_from: u64) -> anyhow::Result<Vec<Form>> {
    let bytes = Form {
        name: "bytes",
        pack_first_from: u64::MAX,
    };
    let pack_first = Form {
        name: "pack-first",
        pack_first_from: 0,
    };
    let default = Form {
        name: "default",
        pack_first_from: default_from,
    };
    Ok(match input {
        "bytes" => vec![bytes],
        "pack-first" => vec![pack_first],
        "default" => vec![default],
        "both" => vec![bytes, pack_first],
        other => bail!("--input: expected bytes, pack-first, default or both, got '{other}'"),
    })
}

/// The two calls of the Python package on a CUDA array.
#[derive(Clone, Copy, PartialEq)]
enum Call {
    /// `component_stats`: stats, centroids and sums; no label image.
    Stats,
    /// `connected_components_with_stats`: the label image, stats and centroids.
    Ccws,
}

impl Call {
    fn name(self) -> &'static str {
        match self {
            Call::Stats => "component_stats",
            Call::Ccws => "ccws",
        }
    }
}

/// Wall times of one call's host-visible steps, µs.
#[derive(Clone, Copy, Default)]
struct Steps {
    /// Keeping the caller's context, finding the mask's device (`pointer_device`).
    prepare: f64,
    /// The label image (ccws only), before the labeling as the Python layer allocates it.
    labels_alloc: f64,
    /// `DeviceLabeler::label`: the kernels up to the numbering and the read of the count (the
    /// statistics and label kernels go on meanwhile).
    label: f64,
    /// The result rows (stats, centroids, sums), while those kernels run.
    rows_alloc: f64,
    /// `write_opencv_rows`: queuing the row writing (the host does not wait for it, as the
    /// Python layer does not).
    rows: f64,
    total: f64,
    /// CUDA events on the null stream around the whole call.
    events: f64,
}

/// What one call returned, kept alive until the next call (as a discarded Python result is
/// freed after the call).
struct Outputs {
    labels: Option<CudaSlice<i32>>,
    stats: CudaSlice<i32>,
    centroids: CudaSlice<f64>,
    sums: Option<CudaSlice<i64>>,
    rows: usize,
}

fn us(start: Instant) -> f64 {
    start.elapsed().as_secs_f64() * 1e6
}

fn ptr<T>(slice: &CudaSlice<T>, gpu: &Gpu) -> u64 {
    let (p, _sync) = slice.device_ptr(&gpu.stream);
    p
}

/// One call as `label_device` makes it.
fn device_call(
    gpu: &Arc<Gpu>,
    labeler: &mut DeviceLabeler,
    mask: &DeviceMask,
    connectivity: Connectivity,
    call: Call,
) -> anyhow::Result<(Steps, Outputs)> {
    let s = &gpu.stream;
    let (begin, end) = (gpu.timing_event()?, gpu.timing_event()?);
    begin.record(s)?;
    let mut t = Steps::default();
    let start = Instant::now();

    let step = Instant::now();
    let keep = KeepCurrentContext::new();
    let ordinal = pointer_device(mask.ptr, "image")?;
    if ordinal != labeler.ordinal() {
        bail!(
            "the mask is on device {ordinal}, the labeler on {}",
            labeler.ordinal()
        );
    }
    t.prepare = us(step);

    let step = Instant::now();
    let pixels = mask.width as usize * mask.height as usize;
    // SAFETY: the labeling writes every value.
    let labels = match call {
        Call::Ccws => Some(unsafe { s.alloc::<i32>(pixels) }?),
        Call::Stats => None,
    };
    let labels_ptr = labels.as_ref().map(|l| ptr(l, gpu));
    t.labels_alloc = us(step);

    let step = Instant::now();
    labeler.bind()?;
    // SAFETY: the mask and the label image are device memory of this context, alive and sized
    // as `label` needs.
    let count = unsafe { labeler.label(mask, connectivity, labels_ptr)? };
    t.label = us(step);

    let step = Instant::now();
    let rows = count as usize + 1;
    // SAFETY (three allocations): write_opencv_rows writes every row.
    let stats = unsafe { s.alloc::<i32>(rows * 5) }?;
    let centroids = unsafe { s.alloc::<f64>(rows * 2) }?;
    let sums = match call {
        Call::Stats => Some(unsafe { s.alloc::<i64>(rows * 2) }?),
        Call::Ccws => None,
    };
    t.rows_alloc = us(step);

    let step = Instant::now();
    labeler.bind()?;
    // SAFETY: each buffer holds `rows` rows of its layout and lives in `Outputs`.
    unsafe {
        labeler.write_opencv_rows(
            ptr(&stats, gpu),
            ptr(&centroids, gpu),
            sums.as_ref().map(|x| ptr(x, gpu)),
        )?
    };
    t.rows = us(step);
    drop(keep);
    end.record(s)?;
    end.synchronize()?;
    t.total = us(start);
    t.events = f64::from(begin.elapsed_ms(&end)?) * 1e3;
    Ok((
        t,
        Outputs {
            labels,
            stats,
            centroids,
            sums,
            rows,
        },
    ))
}

/// A digest of everything a call returns, to compare the input forms.
fn digest(gpu: &Gpu, out: &Outputs) -> anyhow::Result<u64> {
    let s = &gpu.stream;
    let mut h = DefaultHasher::new();
    out.rows.hash(&mut h);
    s.clone_dtoh(&out.stats)?.hash(&mut h);
    for c in s.clone_dtoh(&out.centroids)? {
        c.to_bits().hash(&mut h);
    }
    if let Some(sums) = &out.sums {
        s.clone_dtoh(sums)?.hash(&mut h);
    }
    if let Some(labels) = &out.labels {
        s.clone_dtoh(labels)?.hash(&mut h);
    }
    Ok(h.finish())
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// The step-wise median and the best whole call (events) of `calls`.
fn summarise(calls: &[Steps]) -> (Steps, f64) {
    let m = |f: fn(&Steps) -> f64| median(calls.iter().map(f).collect());
    let best = calls.iter().map(|c| c.events).fold(f64::INFINITY, f64::min);
    (
        Steps {
            prepare: m(|c| c.prepare),
            labels_alloc: m(|c| c.labels_alloc),
            label: m(|c| c.label),
            rows_alloc: m(|c| c.rows_alloc),
            rows: m(|c| c.rows),
            total: m(|c| c.total),
            events: m(|c| c.events),
        },
        best,
    )
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let connectivity = match args.connectivity {
        4 => Connectivity::Four,
        8 => Connectivity::Eight,
        c => bail!("--connectivity: expected 4 or 8, got {c}"),
    };
    let default_from = args.pack_first_from.unwrap_or(PACK_FIRST_MIN_PIXELS);
    let forms = forms(&args.input, default_from)?;
    let tuning = Tuning::from_env()?;
    let gpu = Arc::new(Gpu::open(args.device, &tuning.gpu).context("opening the GPU")?);
    println!("{} ({})", gpu.name, gpu.kernels);
    println!(
        "packed first from {} pixels (default form; PACK_FIRST_MIN_PIXELS = {}); times in µs; \
         steps: median of {} calls; best: best whole call by CUDA events (bench_gpu.py's measure)",
        default_from, PACK_FIRST_MIN_PIXELS, args.repeat
    );
    let repeat = args.repeat.max(1);
    // (size, form, call) → Gpx/s per density (best by events).
    let mut means: Vec<((u32, u32), &'static str, Call, Vec<f64>)> = Vec::new();
    for &(width, height) in &args.sizes {
        let pixels = width as f64 * height as f64;
        println!(
            "\n{width}x{height}, g = {}, {}-connectivity",
            args.granularity, args.connectivity
        );
        println!(
            "{:>5} {:<10} {:<15} {:>8} {:>8} {:>8} | {:>7} {:>7} {:>8} {:>7} {:>7} | kernels alone (best)",
            "d", "input", "call", "best", "events", "wall", "prepare", "lbl-alloc", "label", "row-alloc", "rows"
        );
        for &density in &args.densities {
            let image = generate(&RandomImageSpec {
                width,
                height,
                density,
                granularity: args.granularity,
                seed: image_seed(args.seed, density, args.granularity),
            })?;
            let on_device = gpu.stream.clone_htod(&image.data)?;
            let mask = DeviceMask {
                ptr: ptr(&on_device, &gpu),
                width,
                height,
                row_pitch: width as usize,
            };
            let mut digests: Vec<(Call, &'static str, u64)> = Vec::new();
            for form in &forms {
                MaskInput::set_pack_first_min_pixels(form.pack_first_from);
                let used = match MaskInput::for_bytes(width, height) {
                    MaskInput::Bytes => "bytes",
                    _ => "pack-first",
                };
                let mut kernels = Flsl::new(gpu.clone(), Variant::CdBlock)?;
                let mut labeler = DeviceLabeler::new(gpu.clone(), Variant::CdBlock)?;
                for call in [Call::Stats, Call::Ccws] {
                    let (_, warm) = device_call(&gpu, &mut labeler, &mask, connectivity, call)?;
                    let d = digest(&gpu, &warm)?;
                    match digests.iter().find(|(c, _, _)| *c == call) {
                        Some((_, first, expected)) if *expected != d => bail!(
                            "{} at d = {density}: the {used} input gives other results than the {first} input",
                            call.name()
                        ),
                        Some(_) => {}
                        None => digests.push((call, used, d)),
                    }
                    drop(warm);
                    let mut times = Vec::with_capacity(repeat as usize);
                    let mut last = None;
                    for _ in 0..repeat {
                        // The previous call's results are freed before the next, not inside it.
                        drop(last.take());
                        let (t, out) = device_call(&gpu, &mut labeler, &mask, connectivity, call)?;
                        times.push(t);
                        last = Some(out);
                    }
                    drop(last);
                    let want = match call {
                        Call::Stats => Want::Stats,
                        Call::Ccws => Want::Both,
                    };
                    let request = LabelRequest::new(&image, connectivity, want);
                    let alone = kernels.time_resident(request, repeat)?;
                    let (m, best) = summarise(&times);
                    let steps: Vec<String> = alone
                        .steps
                        .iter()
                        .map(|s| format!("{} {:.0}", s.step, s.ms * 1e3))
                        .collect();
                    println!(
                        "{density:>5.2} {used:<10} {:<15} {best:>8.0} {:>8.0} {:>8.0} | {:>7.1} {:>9.1} {:>8.0} {:>9.1} {:>7.0} | {:.0}: {}",
                        call.name(),
                        m.events,
                        m.total,
                        m.prepare,
                        m.labels_alloc,
                        m.label,
                        m.rows_alloc,
                        m.rows,
                        alone.total_ms * 1e3,
                        steps.join(", ")
                    );
                    let gpx = pixels / best / 1e3;
                    match means
                        .iter_mut()
                        .find(|(s, f, c, _)| *s == (width, height) && *f == form.name && *c == call)
                    {
                        Some((_, _, _, v)) => v.push(gpx),
                        None => means.push(((width, height), form.name, call, vec![gpx])),
                    }
                }
            }
        }
    }
    println!("\nmean Gpx/s over the densities (best whole call by events; goals at 8192², g = 4, 8-conn: component_stats ≥ 300, ccws ≥ 150):");
    for ((w, h), form, call, v) in &means {
        let mean = v.iter().sum::<f64>() / v.len() as f64;
        println!("  {w}x{h} {form:<10} {:<15} {mean:7.1}", call.name());
    }
    if forms.len() == 2 {
        println!("\nfaster input form per size (component_stats mean):");
        for &(w, h) in &args.sizes {
            let mean = |form: &str| {
                means
                    .iter()
                    .find(|(s, f, c, _)| *s == (w, h) && *f == form && *c == Call::Stats)
                    .map(|(_, _, _, v)| v.iter().sum::<f64>() / v.len() as f64)
                    .unwrap_or(0.0)
            };
            let (b, p) = (mean("bytes"), mean("pack-first"));
            let faster = if w % 16 != 0 {
                "pack-first (width not a multiple of 16)"
            } else if p > b {
                "pack-first"
            } else {
                "bytes"
            };
            println!(
                "  {w}x{h} ({} px): bytes {b:.1}, pack-first {p:.1} Gpx/s → {faster}",
                w as u64 * h as u64
            );
        }
    }
    Ok(())
}
