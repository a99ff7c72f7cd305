//! The TrueType font for text in PNG plots.

use ab_glyph::FontVec;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

// ---------------------------------------------------------------------------------------------
// PNG: a bitmap backend whose text is rasterized with ab_glyph.

/// The TrueType font for PNG text: `font` (`BenchTuning::font`), else the first common system
/// font found. Loaded once per process for each `font` asked for.
pub fn png_font(font: Option<&Path>) -> std::result::Result<&'static FontVec, String> {
    type Loaded = std::result::Result<FontVec, String>;
    static LOADED: Mutex<Vec<(Option<PathBuf>, &'static Loaded)>> = Mutex::new(Vec::new());
    let mut loaded = LOADED.lock().unwrap_or_else(|p| p.into_inner());
    let found = match loaded.iter().find(|(asked, _)| asked.as_deref() == font) {
        Some((_, found)) => *found,
        None => {
            // A process asks for one or two fonts: leaking them keeps `&'static` simple.
            let found: &'static Loaded = Box::leak(Box::new(load_png_font(font)));
            loaded.push((font.map(Path::to_path_buf), found));
            found
        }
    };
    found.as_ref().map_err(Clone::clone)
}

fn load_png_font(font: Option<&Path>) -> std::result::Result<FontVec, String> {
    let mut candidates: Vec<PathBuf> = Vec::new();
    if let Some(p) = font {
        candidates.push(p.to_path_buf());
    }
    for p in [
        "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
        "/usr/share/fonts/dejavu/DejaVuSans.ttf",
        "/usr/share/fonts/TTF/DejaVuSans.ttf",
        "/usr/share/fonts/dejavu-sans-fonts/DejaVuSans.ttf",
        "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
        "/usr/share/fonts/liberation-sans/LiberationSans-Regular.ttf",
        "/usr/share/fonts/truetype/noto/NotoSans-Regular.ttf",
        "/usr/share/fonts/noto/NotoSans-Regular.ttf",
        "/usr/share/fonts/truetype/freefont/FreeSans.ttf",
        "/System/Library/Fonts/Supplemental/Arial.ttf",
        "/Library/Fonts/Arial.ttf",
        "C:\\Windows\\Fonts\\arial.ttf",
    ] {
        candidates.push(p.into());
    }
    for c in &candidates {
        if let Ok(bytes) = std::fs::read(c) {
            if let Ok(font) = FontVec::try_from_vec(bytes) {
                return Ok(font);
            }
        }
    }
    Err(format!(
                "PNG text needs a TrueType font and none was found (tried {}); set MARKERSCOPE_FONT=/path/to/font.ttf \
                 or write an .svg plot, which needs no font",
                candidates.first().map(|p| p.display().to_string()).unwrap_or_default()
                    + if candidates.len() > 1 { " and other common paths" } else { "" }
            ))
}
