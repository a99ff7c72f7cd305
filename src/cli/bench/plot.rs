//! `--plot`: one figure with, per (size, connectivity, mode) row, throughput vs density per
//! algorithm for each granularity and a stacked bar of the mean per-step times; or, in latency
//! mode, median and p99 frame times.
//!
//! Fonts: plotters is built without its font features, so SVG needs no font at all (text goes
//! into the file as `<text>` and the viewer renders it). PNG text is rasterized here with
//! ab_glyph from a TrueType font found on the system (or `BenchTuning::font`); without one, PNG
//! output is refused at flag validation and SVG still works.

use super::font::png_font;
use super::report::{BenchReport, ThroughputResult};
use super::spec::{Mode, PlotFormat};
use crate::error::{Error, Result};
use plotters::prelude::*;
use png::TextBitmap;
use std::path::Path;

type PlotResult = std::result::Result<(), Box<dyn std::error::Error>>;

const PANEL_W: u32 = 440;
const PANEL_H: u32 = 320;
const TITLE_H: u32 = 36;
const FONT: &str = "sans-serif";

/// Draws the report's figure into `path`; PNG text with `font` (`png_font`).
pub fn write_plot(
    report: &BenchReport,
    path: &Path,
    format: PlotFormat,
    font: Option<&Path>,
) -> Result<()> {
    let (w, h) = figure_size(report);
    let fail =
        |e: Box<dyn std::error::Error>| Error::Invalid(format!("drawing {}: {e}", path.display()));
    match format {
        PlotFormat::Svg => {
            let root = SVGBackend::new(path, (w, h)).into_drawing_area();
            draw(&root, report).map_err(fail)?;
            root.present().map_err(|e| fail(e.into()))?;
        }
        PlotFormat::Png => {
            let font = png_font(font).map_err(Error::Invalid)?;
            let mut buf = vec![0u8; w as usize * h as usize * 3];
            {
                let backend = TextBitmap {
                    inner: BitMapBackend::with_buffer(&mut buf, (w, h)),
                    font,
                };
                let root = backend.into_drawing_area();
                draw(&root, report).map_err(fail)?;
                root.present().map_err(|e| fail(e.into()))?;
            }
            let img = image::RgbImage::from_raw(w, h, buf)
                .ok_or_else(|| Error::Invalid("PNG buffer has the wrong size".into()))?;
            img.save_with_format(path, image::ImageFormat::Png)
                .map_err(|e| Error::image(path, format!("cannot write PNG: {e}")))?;
        }
    }
    Ok(())
}

/// (size, connectivity, mode) rows in table order.
fn row_keys(report: &BenchReport) -> Vec<(u32, u32, u8, Mode)> {
    let mut keys = Vec::new();
    for r in &report.throughput {
        let k = (r.width, r.height, r.connectivity, r.mode);
        if !keys.contains(&k) {
            keys.push(k);
        }
    }
    keys
}

fn figure_size(report: &BenchReport) -> (u32, u32) {
    if report.throughput.is_empty() {
        let n = report.inputs.sizes.len().max(1) as u32;
        return (PANEL_W * 2, TITLE_H + PANEL_H * n);
    }
    let cols = report.inputs.granularities.len() as u32 + 1;
    let rows = row_keys(report).len().max(1) as u32;
    (PANEL_W * cols, TITLE_H + PANEL_H * rows)
}

fn palette(i: usize) -> RGBColor {
    let (r, g, b) = Palette99::COLORS[i % Palette99::COLORS.len()];
    RGBColor(r, g, b)
}

fn series_name(r: &ThroughputResult) -> String {
    let star = if r.source == "markerscope" { "" } else { "*" };
    format!("{}{star} ({})", r.algorithm, r.backend)
}

type Area<DB> = DrawingArea<DB, plotters::coord::Shift>;
type Chart<'a, DB> = ChartContext<
    'a,
    DB,
    Cartesian2d<plotters::coord::types::RangedCoordf64, plotters::coord::types::RangedCoordf64>,
>;

fn draw<DB: DrawingBackend>(root: &Area<DB>, report: &BenchReport) -> PlotResult
where
    DB::ErrorType: 'static,
{
    root.fill(&WHITE)?;
    let (title, body) = root.split_vertically(TITLE_H);
    let mut heading = format!("markerscope bench {} — {}", report.date, report.machine.cpu);
    if let Some(gpu) = &report.machine.gpu {
        heading += &format!(" — {gpu}");
    }
    title.draw(&Text::new(heading, (10, 10), (FONT, 16).into_font()))?;
    if report.throughput.is_empty() {
        return draw_latency(&body, report);
    }
    let colours = Colours::of(report);
    let keys = row_keys(report);
    let grans = &report.inputs.granularities;
    let cols = grans.len() + 1;
    let panels = body.split_evenly((keys.len(), cols));
    let densities = density_range(&report.inputs.densities);
    for (ri, &(w, h, conn, mode)) in keys.iter().enumerate() {
        let in_row = |r: &&ThroughputResult| {
            r.width == w && r.height == h && r.connectivity == conn && r.mode == mode
        };
        let row = format!("{w}x{h} {conn}-conn {}", mode.as_str());
        for (gi, &g) in grans.iter().enumerate() {
            let rows: Vec<&ThroughputResult> = report
                .throughput
                .iter()
                .filter(in_row)
                .filter(|r| r.granularity == g)
                .collect();
            let caption = format!("{row} g={g}");
            draw_densities(&panels[ri * cols + gi], caption, &rows, densities, &colours)?;
        }
        // Stacked per-step bars: one bar per (series, g).
        let bars: Vec<&ThroughputResult> = grans
            .iter()
            .flat_map(|&g| {
                report
                    .throughput
                    .iter()
                    .filter(in_row)
                    .filter(move |r| r.granularity == g)
            })
            .collect();
        let caption = format!("{row}: mean step times");
        draw_step_bars(&panels[ri * cols + grans.len()], caption, &bars, &colours)?;
    }
    Ok(())
}

/// One colour per series, the same in every panel; one colour per step name.
struct Colours {
    series: Vec<String>,
    steps: Vec<String>,
}

impl Colours {
    fn of(report: &BenchReport) -> Colours {
        let mut series: Vec<String> = Vec::new();
        let mut steps: Vec<String> = Vec::new();
        for r in &report.throughput {
            let n = series_name(r);
            if !series.contains(&n) {
                series.push(n);
            }
            for s in &r.steps {
                if !steps.contains(&s.step) {
                    steps.push(s.step.clone());
                }
            }
        }
        Colours { series, steps }
    }

    fn series(&self, r: &ThroughputResult) -> RGBColor {
        let name = series_name(r);
        palette(self.series.iter().position(|s| *s == name).unwrap_or(0))
    }

    /// The step's index (its legend entry) and colour.
    fn step(&self, step: &str) -> (usize, RGBColor) {
        let si = self.steps.iter().position(|n| n == step).unwrap_or(0);
        (si, palette(si + 7))
    }
}

/// The x range of the density panels (a little around a single density).
fn density_range(densities: &[f64]) -> (f64, f64) {
    let (dmin, dmax) = densities
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &d| {
            (a.min(d), b.max(d))
        });
    if dmax > dmin {
        (dmin, dmax)
    } else {
        (dmin - 0.05, dmax + 0.05)
    }
}

/// Throughput vs density, a line per series.
fn draw_densities<DB: DrawingBackend>(
    area: &Area<DB>,
    caption: String,
    rows: &[&ThroughputResult],
    (x0, x1): (f64, f64),
    colours: &Colours,
) -> PlotResult
where
    DB::ErrorType: 'static,
{
    let ymax = rows
        .iter()
        .flat_map(|r| r.per_density.iter().map(|d| d.gpx_s))
        .fold(0.0f64, f64::max)
        .max(1e-6)
        * 1.1;
    let mut chart = ChartBuilder::on(area)
        .caption(caption, (FONT, 14))
        .margin(8)
        .x_label_area_size(30)
        .y_label_area_size(50)
        .build_cartesian_2d(x0..x1, 0f64..ymax)?;
    chart
        .configure_mesh()
        .max_light_lines(2)
        .x_desc("density")
        .y_desc("Gpx/s")
        .x_labels(6)
        .y_labels(6)
        .label_style((FONT, 11))
        .draw()?;
    for r in rows {
        let color = colours.series(r);
        let points: Vec<(f64, f64)> = r.per_density.iter().map(|d| (d.density, d.gpx_s)).collect();
        chart
            .draw_series(LineSeries::new(points.clone(), color.stroke_width(2)))?
            .label(series_name(r))
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 16, y)], color.stroke_width(2))
            });
        chart.draw_series(
            points
                .into_iter()
                .map(|p| Circle::new(p, 3, color.filled())),
        )?;
    }
    draw_legend(&mut chart)
}

/// The mean step times of each row stacked in a bar.
fn draw_step_bars<DB: DrawingBackend>(
    area: &Area<DB>,
    caption: String,
    bars: &[&ThroughputResult],
    colours: &Colours,
) -> PlotResult
where
    DB::ErrorType: 'static,
{
    let ymax = bars
        .iter()
        .map(|r| r.steps.iter().map(|s| s.ms).sum::<f64>().max(r.mean_ms))
        .fold(0.0f64, f64::max)
        .max(1e-6)
        * 1.15;
    let names: Vec<String> = bars
        .iter()
        .map(|r| {
            let star = if r.source == "markerscope" { "" } else { "*" };
            format!("{}{star} g{}", r.algorithm, r.granularity)
        })
        .collect();
    let mut chart = bar_chart(area, caption, &names, ymax)?;
    let mut labelled = vec![false; colours.steps.len()];
    for (i, r) in bars.iter().enumerate() {
        let mut y = 0.0;
        for s in &r.steps {
            let (si, color) = colours.step(&s.step);
            let rect = bar(i, y, y + s.ms, color.filled());
            let drawn = chart.draw_series(std::iter::once(rect))?;
            if !labelled[si] {
                labelled[si] = true;
                drawn.label(s.step.clone()).legend(move |(x, y)| {
                    Rectangle::new([(x, y - 5), (x + 12, y + 5)], color.filled())
                });
            }
            y += s.ms;
        }
    }
    draw_legend(&mut chart)
}

/// The series' legend in the upper right corner.
fn draw_legend<'a, DB: DrawingBackend + 'a>(chart: &mut Chart<'a, DB>) -> PlotResult
where
    DB::ErrorType: 'static,
{
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font((FONT, 11))
        .draw()?;
    Ok(())
}

/// Latency mode: per size, median (bar) and p99 (tick) per (algorithm, connectivity).
fn draw_latency<DB: DrawingBackend>(
    body: &DrawingArea<DB, plotters::coord::Shift>,
    report: &BenchReport,
) -> PlotResult
where
    DB::ErrorType: 'static,
{
    let sizes = &report.inputs.sizes;
    let panels = body.split_evenly((sizes.len().max(1), 1));
    for (si, size) in sizes.iter().enumerate() {
        let rows: Vec<_> = report
            .latency
            .iter()
            .filter(|r| r.width == size.width && r.height == size.height)
            .collect();
        let ymax = rows
            .iter()
            .map(|r| r.p99_ms)
            .fold(0.0f64, f64::max)
            .max(1e-6)
            * 1.15;
        let names: Vec<String> = rows
            .iter()
            .map(|r| {
                let star = if r.source == "markerscope" { "" } else { "*" };
                format!("{}{star} {}c", r.algorithm, r.connectivity)
            })
            .collect();
        let mut chart = bar_chart(
            &panels[si],
            format!("{size}: frame latency, median (bar) and p99 (line)"),
            &names,
            ymax,
        )?;
        for (i, r) in rows.iter().enumerate() {
            let color = palette(i);
            chart.draw_series(std::iter::once(bar(i, 0.0, r.median_ms, color.filled())))?;
            let x = i as f64;
            chart.draw_series(std::iter::once(PathElement::new(
                vec![(x - 0.4, r.p99_ms), (x + 0.4, r.p99_ms)],
                BLACK.stroke_width(2),
            )))?;
        }
    }
    Ok(())
}

/// The name of bar `x` at integer ticks, nothing elsewhere (plotters picks the tick positions).
/// A bar chart panel in ms with one bar per name (bar i centred on x = i), axes drawn.
fn bar_chart<'a, DB: DrawingBackend>(
    area: &'a Area<DB>,
    caption: String,
    names: &[String],
    ymax: f64,
) -> std::result::Result<Chart<'a, DB>, Box<dyn std::error::Error>>
where
    DB::ErrorType: 'static,
{
    let n = names.len().max(1);
    let mut chart = ChartBuilder::on(area)
        .caption(caption, (FONT, 14))
        .margin(8)
        .x_label_area_size(30)
        .y_label_area_size(50)
        .build_cartesian_2d(-0.5f64..n as f64 - 0.5, 0f64..ymax)?;
    let label = |x: &f64| bar_name(names, *x);
    chart
        .configure_mesh()
        .max_light_lines(2)
        .disable_x_mesh()
        .x_labels(n)
        .y_desc("ms")
        .x_label_formatter(&label)
        .label_style((FONT, 10))
        .draw()?;
    Ok(chart)
}

fn bar_name(names: &[String], x: f64) -> String {
    let i = x.round();
    if (x - i).abs() < 1e-6 && i >= 0.0 {
        names.get(i as usize).cloned().unwrap_or_default()
    } else {
        String::new()
    }
}

/// Bar `i` (centred on x = i, 0.7 wide) from y0 to y1.
fn bar(i: usize, y0: f64, y1: f64, style: ShapeStyle) -> Rectangle<(f64, f64)> {
    let x = i as f64;
    Rectangle::new([(x - 0.35, y0), (x + 0.35, y1)], style)
}

mod png {
    use ab_glyph::{Font, FontVec, GlyphId, PxScale, ScaleFont};
    use plotters::prelude::{BitMapBackend, DrawingBackend};
    use plotters_backend::text_anchor::{HPos, VPos};
    use plotters_backend::{
        BackendColor, BackendCoord, BackendStyle, BackendTextStyle, DrawingErrorKind,
    };

    pub(super) struct TextBitmap<'a> {
        pub(super) inner: BitMapBackend<'a>,
        pub(super) font: &'static FontVec,
    }

    impl TextBitmap<'_> {
        /// Glyphs laid out from (0, 0) at the top-left, and the text's (width, height).
        fn layout(&self, text: &str, size: f64) -> (Vec<ab_glyph::Glyph>, f32, f32) {
            // The same pixel size the SVG backend writes (plotters' size / 1.24).
            let scale = PxScale::from((size / 1.24) as f32);
            let sf = self.font.as_scaled(scale);
            let mut caret = 0.0f32;
            let mut prev: Option<GlyphId> = None;
            let mut glyphs = Vec::new();
            for ch in text.chars() {
                let id = sf.glyph_id(ch);
                if let Some(p) = prev {
                    caret += sf.kern(p, id);
                }
                glyphs.push(id.with_scale_and_position(scale, ab_glyph::point(caret, sf.ascent())));
                caret += sf.h_advance(id);
                prev = Some(id);
            }
            (glyphs, caret, sf.ascent() - sf.descent())
        }
    }

    type BitmapError = <BitMapBackend<'static> as DrawingBackend>::ErrorType;

    impl DrawingBackend for TextBitmap<'_> {
        type ErrorType = BitmapError;

        fn get_size(&self) -> (u32, u32) {
            self.inner.get_size()
        }
        fn ensure_prepared(
            &mut self,
        ) -> std::result::Result<(), DrawingErrorKind<Self::ErrorType>> {
            self.inner.ensure_prepared()
        }
        fn present(&mut self) -> std::result::Result<(), DrawingErrorKind<Self::ErrorType>> {
            self.inner.present()
        }
        fn draw_pixel(
            &mut self,
            point: BackendCoord,
            color: BackendColor,
        ) -> std::result::Result<(), DrawingErrorKind<Self::ErrorType>> {
            self.inner.draw_pixel(point, color)
        }
        fn draw_line<S: BackendStyle>(
            &mut self,
            from: BackendCoord,
            to: BackendCoord,
            style: &S,
        ) -> std::result::Result<(), DrawingErrorKind<Self::ErrorType>> {
            self.inner.draw_line(from, to, style)
        }
        fn draw_rect<S: BackendStyle>(
            &mut self,
            upper_left: BackendCoord,
            bottom_right: BackendCoord,
            style: &S,
            fill: bool,
        ) -> std::result::Result<(), DrawingErrorKind<Self::ErrorType>> {
            self.inner.draw_rect(upper_left, bottom_right, style, fill)
        }
        fn draw_path<S: BackendStyle, I: IntoIterator<Item = BackendCoord>>(
            &mut self,
            path: I,
            style: &S,
        ) -> std::result::Result<(), DrawingErrorKind<Self::ErrorType>> {
            self.inner.draw_path(path, style)
        }
        fn draw_circle<S: BackendStyle>(
            &mut self,
            center: BackendCoord,
            radius: u32,
            style: &S,
            fill: bool,
        ) -> std::result::Result<(), DrawingErrorKind<Self::ErrorType>> {
            self.inner.draw_circle(center, radius, style, fill)
        }
        fn fill_polygon<S: BackendStyle, I: IntoIterator<Item = BackendCoord>>(
            &mut self,
            vert: I,
            style: &S,
        ) -> std::result::Result<(), DrawingErrorKind<Self::ErrorType>> {
            self.inner.fill_polygon(vert, style)
        }
        fn blit_bitmap(
            &mut self,
            pos: BackendCoord,
            (iw, ih): (u32, u32),
            src: &[u8],
        ) -> std::result::Result<(), DrawingErrorKind<Self::ErrorType>> {
            self.inner.blit_bitmap(pos, (iw, ih), src)
        }

        fn estimate_text_size<TStyle: BackendTextStyle>(
            &self,
            text: &str,
            style: &TStyle,
        ) -> std::result::Result<(u32, u32), DrawingErrorKind<Self::ErrorType>> {
            let (_, w, h) = self.layout(text, style.size());
            Ok((w.ceil() as u32, h.ceil() as u32))
        }

        fn draw_text<TStyle: BackendTextStyle>(
            &mut self,
            text: &str,
            style: &TStyle,
            pos: BackendCoord,
        ) -> std::result::Result<(), DrawingErrorKind<Self::ErrorType>> {
            let color = style.color();
            if color.alpha == 0.0 {
                return Ok(());
            }
            let (glyphs, width, height) = self.layout(text, style.size());
            let dx = match style.anchor().h_pos {
                HPos::Left => 0.0,
                HPos::Right => -width,
                HPos::Center => -width / 2.0,
            };
            let dy = match style.anchor().v_pos {
                VPos::Top => 0.0,
                VPos::Center => -height / 2.0,
                VPos::Bottom => -height,
            };
            let trans = style.transform();
            let mut pixels = Vec::new();
            for g in glyphs {
                if let Some(outline) = self.font.outline_glyph(g) {
                    let b = outline.px_bounds();
                    outline.draw(|x, y, coverage| {
                        if coverage > 0.02 {
                            let lx = (b.min.x + x as f32 + dx).round() as i32;
                            let ly = (b.min.y + y as f32 + dy).round() as i32;
                            let (tx, ty) = trans.transform(lx, ly);
                            pixels.push(((pos.0 + tx, pos.1 + ty), coverage.min(1.0)));
                        }
                    });
                }
            }
            for (p, c) in pixels {
                self.inner.draw_pixel(
                    p,
                    BackendColor {
                        alpha: color.alpha * c as f64,
                        rgb: color.rgb,
                    },
                )?;
            }
            Ok(())
        }
    }
}
