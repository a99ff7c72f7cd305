//! Frames at and past the block table's widest (35,791,394 pixels: wider ones take the kernels
//! without a table) labeled by flsl_cdb, ha4w and ha8, their statistics against lsl's.
//! Built as an example: add `[[example]] name = "wide_frame"` with this path to Cargo.toml, then
//! `cargo build --profile ci --no-default-features --features cuda --example wide_frame`.
use markerscope::ccl::{Backends, Connectivity, Want};
use markerscope::frame::image::BinaryImage;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let backends = Backends::detect();
    for (w, h) in [(35_791_394u32, 20u32), (35_791_395, 20), (36_000_000, 40)] {
        // Blobs spanning rows, some touching across the 16-row block border, long horizontal runs.
        let img = BinaryImage::from_fn(w, h, |x, y| {
            let c = x / 1000;
            (c * 7 + y / 3) % 5 < 3 && (x % 1000) < 700 + (y * 13) % 200
        })?;
        for c in [Connectivity::Four, Connectivity::Eight] {
            let mut oracle = backends.create("lsl", c)?;
            let want = oracle.label(&img, c, Want::Stats)?;
            for name in ["flsl_cdb", "ha4w", "ha8"] {
                let info = markerscope::ccl::algorithm_info(name)?;
                if !info.supports(c) {
                    continue;
                }
                let mut l = backends.create(name, c)?;
                let got = l.label(&img, c, Want::Stats)?;
                let same = got.count == want.count && got.stats == want.stats;
                println!("{w}x{h} {c} {name}: {} components, same stats as lsl: {same}", got.count);
                let packed = img.pack();
                let got = l.label_packed(&packed, c, Want::Stats)?;
                let same = got.count == want.count && got.stats == want.stats;
                println!("{w}x{h} {c} {name} packed: same stats as lsl: {same}");
            }
        }
    }
    Ok(())
}
