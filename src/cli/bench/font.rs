//! The TrueType font for text in PNG plots.

use ab_glyph::FontVec;
use std::sync::OnceLock;

// ---------------------------------------------------------------------------------------------
// PNG: a bitmap backend whose text is rasterized with ab_glyph.

/// Whether `--plot x.png` can work here (a TrueType font was found).
pub fn png_font_available() -> bool {
    png_font().is_ok()
}

/// The TrueType font for PNG text: `MARKERSCOPE_FONT`, else the first common system font found.
pub fn png_font() -> std::result::Result<&'static FontVec, String> {
    static FONT_DATA: OnceLock<std::result::Result<FontVec, String>> = OnceLock::new();
    FONT_DATA
        .get_or_init(|| {
            let mut candidates: Vec<std::path::PathBuf> = Vec::new();
            if let Some(p) = std::env::var_os("MARKERSCOPE_FONT") {
                candidates.push(p.into());
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
        })
        .as_ref()
        .map_err(Clone::clone)
}
