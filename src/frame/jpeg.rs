//! A structural check of JPEG files, so that a damaged photo is refused instead of analysed.
//!
//! The `image` crate's decoder (zune-jpeg) decodes past many kinds of damage: a file cut short
//! comes out with its missing rows grey, and a block whose coefficients run past the 64 of an
//! 8×8 block is clamped without a word. `check` walks the file's markers up to the end-of-image
//! marker and, for sequential Huffman-coded scans (baseline and extended: the JPEGs cameras,
//! phones and FFmpeg write), decodes every block's Huffman codes, as libjpeg and FFmpeg do
//! before they report "corrupt JPEG data". It finds:
//!
//! - a file without its end-of-image marker (cut short anywhere),
//! - entropy-coded data that ends before the last block,
//! - a code that is in no Huffman table, a coefficient past the 64th of a block, a DC or AC
//!   size larger than the precision allows,
//! - data left over after the last block of a scan or of a restart interval (libjpeg's
//!   "extraneous bytes before marker": the codes went out of step),
//! - restart markers missing or out of order.
//!
//! Progressive and arithmetic-coded scans are only walked over (their damage is left to the
//! decoder). The check reads each entropy-coded bit once, with a table lookup per code, so it
//! costs a fraction of decoding the image.

/// Checks `bytes` as a JPEG file; the error says what is damaged.
pub fn check(bytes: &[u8]) -> Result<(), String> {
    if bytes.len() < 4 || bytes[0] != 0xFF || bytes[1] != 0xD8 {
        return Err("not a JPEG file (no start-of-image marker)".into());
    }
    let mut state = State::default();
    let mut at = 2;
    loop {
        // Fill bytes (FF) may come before a marker.
        while at < bytes.len() && bytes[at] == 0xFF && bytes.get(at + 1) == Some(&0xFF) {
            at += 1;
        }
        if at + 2 > bytes.len() {
            return Err(cut_short());
        }
        if bytes[at] != 0xFF {
            return Err(format!("no marker where one must be (byte {at})"));
        }
        let marker = bytes[at + 1];
        at += 2;
        match marker {
            0xD9 => {
                return if state.scans > 0 {
                    Ok(())
                } else {
                    Err("the file ends before any image data".into())
                };
            }
            0xD8 | 0x01 | 0xD0..=0xD7 => continue,
            _ => {}
        }
        if at + 2 > bytes.len() {
            return Err(cut_short());
        }
        let len = u16::from_be_bytes([bytes[at], bytes[at + 1]]) as usize;
        if len < 2 || at + len > bytes.len() {
            return Err(cut_short());
        }
        let segment = &bytes[at + 2..at + len];
        at += len;
        match marker {
            0xC4 => state.define_huffman(segment)?,
            0xDD => {
                let ri = segment.get(..2).ok_or("a bad restart interval segment")?;
                state.restart_interval = u16::from_be_bytes([ri[0], ri[1]]) as u32;
            }
            0xC0 | 0xC1 => state.frame = Some(Frame::parse(segment)?),
            // Progressive, lossless, arithmetic-coded, hierarchical: walked over only.
            0xC2 | 0xC3 | 0xC5..=0xC7 | 0xC9..=0xCB | 0xCD..=0xCF => state.frame = None,
            0xDA => {
                state.scans += 1;
                at = state.scan(bytes, at, segment)?;
            }
            _ => {}
        }
    }
}

fn cut_short() -> String {
    "the file is cut short (it ends before its end-of-image marker)".into()
}

#[derive(Default)]
struct State {
    /// DC tables 0..4, then AC tables 0..4.
    tables: [Option<Huffman>; 8],
    restart_interval: u32,
    /// The frame header of a sequential Huffman-coded image (None: not checked).
    frame: Option<Frame>,
    scans: u32,
}

struct Frame {
    precision: u8,
    width: u32,
    height: u32,
    /// (id, horizontal, vertical sampling)
    components: Vec<(u8, u32, u32)>,
}

impl Frame {
    fn parse(s: &[u8]) -> Result<Frame, String> {
        let bad = || "a bad frame header".to_string();
        if s.len() < 6 {
            return Err(bad());
        }
        let n = s[5] as usize;
        if s.len() < 6 + 3 * n || n == 0 {
            return Err(bad());
        }
        let components = (0..n)
            .map(|i| {
                let c = &s[6 + 3 * i..9 + 3 * i];
                (c[0], (c[1] >> 4) as u32, (c[1] & 15) as u32)
            })
            .collect::<Vec<_>>();
        if components
            .iter()
            .any(|&(_, h, v)| !(1..=4).contains(&h) || !(1..=4).contains(&v))
        {
            return Err(bad());
        }
        Ok(Frame {
            precision: s[0],
            height: u16::from_be_bytes([s[1], s[2]]) as u32,
            width: u16::from_be_bytes([s[3], s[4]]) as u32,
            components,
        })
    }
}

impl State {
    fn define_huffman(&mut self, mut s: &[u8]) -> Result<(), String> {
        let bad = || "a bad Huffman table".to_string();
        while !s.is_empty() {
            let (class, id) = ((s[0] >> 4) as usize, (s[0] & 15) as usize);
            if class > 1 || id > 3 || s.len() < 17 {
                return Err(bad());
            }
            let counts: [u8; 16] = s[1..17].try_into().map_err(|_| bad())?;
            let n: usize = counts.iter().map(|&c| c as usize).sum();
            let symbols = s.get(17..17 + n).ok_or_else(bad)?;
            self.tables[class * 4 + id] = Some(Huffman::new(&counts, symbols).ok_or_else(bad)?);
            s = &s[17 + n..];
        }
        Ok(())
    }

    /// Checks one scan whose entropy-coded data starts at `at`; returns where the next marker is.
    fn scan(&self, bytes: &[u8], at: usize, header: &[u8]) -> Result<usize, String> {
        let Some(frame) = self.frame.as_ref().filter(|f| f.height > 0 && f.width > 0) else {
            return Ok(next_marker(bytes, at));
        };
        let bad = || "a bad scan header".to_string();
        let n = *header.first().ok_or_else(bad)? as usize;
        let spectral = header.get(1 + 2 * n..4 + 2 * n).ok_or_else(bad)?;
        if n == 0 || spectral != [0, 63, 0] {
            return Ok(next_marker(bytes, at));
        }
        let hmax = frame.components.iter().map(|c| c.1).max().unwrap_or(1);
        let vmax = frame.components.iter().map(|c| c.2).max().unwrap_or(1);
        // (blocks across, blocks down, DC table, AC table) per component of the scan.
        let mut parts = Vec::with_capacity(n);
        for i in 0..n {
            let (id, tables) = (header[1 + 2 * i], header[2 + 2 * i]);
            let &(_, h, v) = frame
                .components
                .iter()
                .find(|c| c.0 == id)
                .ok_or_else(bad)?;
            let dc = self.tables[((tables >> 4) as usize) & 3]
                .as_ref()
                .ok_or("a scan uses a Huffman table that is not defined")?;
            let ac = self.tables[4 + ((tables & 15) as usize & 3)]
                .as_ref()
                .ok_or("a scan uses a Huffman table that is not defined")?;
            parts.push((h, v, dc, ac));
        }
        let (mcus, blocks): (u64, Vec<(u32, &Huffman, &Huffman)>) = if n == 1 {
            let (h, v, dc, ac) = parts[0];
            let w = (frame.width * h).div_ceil(hmax).div_ceil(8) as u64;
            let hgt = (frame.height * v).div_ceil(vmax).div_ceil(8) as u64;
            (w * hgt, vec![(1, dc, ac)])
        } else {
            let w = frame.width.div_ceil(8 * hmax) as u64;
            let hgt = frame.height.div_ceil(8 * vmax) as u64;
            (
                w * hgt,
                parts
                    .iter()
                    .map(|&(h, v, dc, ac)| (h * v, dc, ac))
                    .collect(),
            )
        };
        let (dc_max, ac_max) = if frame.precision > 8 {
            (15, 14)
        } else {
            (11, 10)
        };
        let mut reader = Reader::new(bytes, at);
        let mut restarts = 0u32;
        for mcu in 0..mcus {
            if self.restart_interval > 0 && mcu > 0 && mcu % self.restart_interval as u64 == 0 {
                reader.restart(restarts % 8)?;
                restarts += 1;
            }
            for &(count, dc, ac) in &blocks {
                for _ in 0..count {
                    block(&mut reader, dc, ac, dc_max, ac_max)?;
                }
            }
        }
        reader.end()
    }
}

/// One 8×8 block's codes.
fn block(r: &mut Reader, dc: &Huffman, ac: &Huffman, dc_max: u8, ac_max: u8) -> Result<(), String> {
    let size = r.decode(dc)?;
    if size > dc_max {
        return Err("a DC difference larger than the precision allows".into());
    }
    r.skip(size as u32)?;
    let mut k = 1u32;
    while k < 64 {
        let rs = r.decode(ac)?;
        let (run, size) = ((rs >> 4) as u32, rs & 15);
        if size == 0 {
            if run != 15 {
                break; // end of block
            }
            k += 16;
            continue;
        }
        k += run;
        if k > 63 || size > ac_max {
            return Err("a block with more than 64 coefficients".into());
        }
        r.skip(size as u32)?;
        k += 1;
    }
    if k > 64 {
        return Err("a block with more than 64 coefficients".into());
    }
    Ok(())
}

/// Where the next marker (not a stuffed FF 00, not a restart) is, from `at`.
fn next_marker(bytes: &[u8], mut at: usize) -> usize {
    while at + 1 < bytes.len() {
        if bytes[at] == 0xFF && !matches!(bytes[at + 1], 0x00 | 0xFF | 0xD0..=0xD7) {
            return at;
        }
        at += 1;
    }
    bytes.len()
}

/// A canonical Huffman table: a 9-bit lookup for the short codes, limits for the rest.
struct Huffman {
    /// (code length, symbol) for every 9-bit prefix; length 0: a longer code.
    fast: Vec<(u8, u8)>,
    /// The largest code of each length (-1: none), and the offset from a code to its symbol.
    max_code: [i32; 17],
    offset: [i32; 17],
    symbols: Vec<u8>,
}

const FAST_BITS: u32 = 9;

impl Huffman {
    fn new(counts: &[u8; 16], symbols: &[u8]) -> Option<Huffman> {
        let mut t = Huffman {
            fast: vec![(0, 0); 1 << FAST_BITS],
            max_code: [-1; 17],
            offset: [0; 17],
            symbols: symbols.to_vec(),
        };
        let (mut code, mut k) = (0u32, 0usize);
        for len in 1..=16u32 {
            let n = counts[len as usize - 1] as usize;
            t.offset[len as usize] = k as i32 - code as i32;
            for _ in 0..n {
                if len <= FAST_BITS {
                    let shift = FAST_BITS - len;
                    for low in 0..1u32 << shift {
                        t.fast[((code << shift) | low) as usize] = (len as u8, symbols[k]);
                    }
                }
                code += 1;
                k += 1;
            }
            if n > 0 {
                t.max_code[len as usize] = code as i32 - 1;
            }
            // More codes than the length can hold: not a prefix code.
            if code > 1 << len {
                return None;
            }
            code <<= 1;
        }
        Some(t)
    }
}

/// Entropy-coded bits: stuffed bytes (FF 00) undone; at a marker, zero bits are given but
/// counted, so that using them is an error.
struct Reader<'a> {
    bytes: &'a [u8],
    /// The next byte to load.
    at: usize,
    bits: u64,
    count: u32,
    /// Zero bits loaded past the data (a marker or the end of the file was reached).
    padding: u32,
}

impl<'a> Reader<'a> {
    fn new(bytes: &'a [u8], at: usize) -> Self {
        Self {
            bytes,
            at,
            bits: 0,
            count: 0,
            padding: 0,
        }
    }

    fn fill(&mut self) {
        while self.count <= 56 {
            let byte = if self.padding > 0 {
                None
            } else {
                match (self.bytes.get(self.at), self.bytes.get(self.at + 1)) {
                    (Some(0xFF), Some(0x00)) => {
                        self.at += 2;
                        Some(0xFF)
                    }
                    (Some(0xFF), _) | (None, _) => None,
                    (Some(&b), _) => {
                        self.at += 1;
                        Some(b)
                    }
                }
            };
            if byte.is_none() {
                self.padding += 8;
            }
            self.bits |= (byte.unwrap_or(0) as u64) << (56 - self.count);
            self.count += 8;
        }
    }

    fn consume(&mut self, n: u32) -> Result<(), String> {
        self.bits <<= n;
        self.count -= n;
        if self.count < self.padding {
            return Err("the image data ends before its last block (cut short or damaged)".into());
        }
        Ok(())
    }

    fn skip(&mut self, n: u32) -> Result<(), String> {
        if n == 0 {
            return Ok(());
        }
        self.fill();
        self.consume(n)
    }

    fn decode(&mut self, table: &Huffman) -> Result<u8, String> {
        self.fill();
        let peek = (self.bits >> 48) as u32;
        let (len, symbol) = table.fast[(peek >> (16 - FAST_BITS)) as usize];
        if len > 0 {
            self.consume(len as u32)?;
            return Ok(symbol);
        }
        for len in FAST_BITS + 1..=16 {
            let code = (peek >> (16 - len)) as i32;
            if code <= table.max_code[len as usize] {
                self.consume(len)?;
                let i = (code + table.offset[len as usize]) as usize;
                return table
                    .symbols
                    .get(i)
                    .copied()
                    .ok_or_else(|| "a bad Huffman table".to_string());
            }
        }
        Err("a code that is in no Huffman table (damaged data)".into())
    }

    /// At the end of a scan or a restart interval: the bits left in the current byte are
    /// padding; a whole byte of data more before the next marker means the codes went out of
    /// step. Returns where the marker is.
    fn finish(&self) -> Result<usize, String> {
        let held = (self.count - self.padding) / 8;
        // Fill bytes (FF) may come before the marker.
        let mut at = self.at;
        while self.bytes.get(at) == Some(&0xFF) && self.bytes.get(at + 1) == Some(&0xFF) {
            at += 1;
        }
        let marker = next_marker_or_restart(self.bytes, at);
        if held > 0 || marker > at {
            return Err("data left over after the last block (damaged data)".into());
        }
        Ok(marker)
    }

    /// Expects restart marker `n` (0..8) next, and starts over after it.
    fn restart(&mut self, n: u32) -> Result<(), String> {
        let at = self.finish()?;
        match self.bytes.get(at + 1) {
            Some(&m) if m == 0xD0 + n as u8 => {
                *self = Reader::new(self.bytes, at + 2);
                Ok(())
            }
            Some(0xD0..=0xD7) => Err("restart markers out of order (data is missing)".into()),
            _ => Err("the image data ends before its last block (cut short or damaged)".into()),
        }
    }

    /// After the last block: where the next marker is.
    fn end(&self) -> Result<usize, String> {
        self.finish()
    }
}

/// Like `next_marker`, restart markers included.
fn next_marker_or_restart(bytes: &[u8], mut at: usize) -> usize {
    while at + 1 < bytes.len() {
        if bytes[at] == 0xFF && !matches!(bytes[at + 1], 0x00 | 0xFF) {
            return at;
        }
        at += 1;
    }
    bytes.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encode(img: image::DynamicImage) -> Vec<u8> {
        let mut out = std::io::Cursor::new(Vec::new());
        img.write_to(&mut out, image::ImageFormat::Jpeg).unwrap();
        out.into_inner()
    }

    fn scene(w: u32, h: u32) -> image::RgbImage {
        image::RgbImage::from_fn(w, h, |x, y| {
            image::Rgb([
                (x * 7 + y * 3) as u8,
                ((x / 5) * 40) as u8 ^ (y as u8),
                if (x / 9 + y / 7) % 2 == 0 { 230 } else { 20 },
            ])
        })
    }

    #[test]
    fn whole_jpegs_pass_and_cut_or_damaged_ones_fail() {
        let colour = encode(image::DynamicImage::ImageRgb8(scene(83, 61)));
        let grey = encode(image::DynamicImage::ImageLuma8(
            image::DynamicImage::ImageRgb8(scene(64, 40)).to_luma8(),
        ));
        for bytes in [&colour, &grey] {
            check(bytes).unwrap();
            // Bytes after the end-of-image marker (camera trailers) are fine.
            let mut trailer = bytes.clone();
            trailer.extend_from_slice(b"\0\0trailer");
            check(&trailer).unwrap();
            // A thumbnail (a whole JPEG, its own end marker included) inside an APP1 segment.
            let mut app1 = b"Exif\0\0".to_vec();
            app1.extend_from_slice(&grey);
            let mut with_thumbnail = vec![0xFF, 0xD8, 0xFF, 0xE1];
            with_thumbnail.extend(((app1.len() + 2) as u16).to_be_bytes());
            with_thumbnail.extend(&app1);
            with_thumbnail.extend(&bytes[2..]);
            check(&with_thumbnail).unwrap();
            assert!(check(&with_thumbnail[..with_thumbnail.len() - 2]).is_err());
            for pct in [25, 50, 75, 90, 99] {
                let cut = &bytes[..bytes.len() * pct / 100];
                assert!(check(cut).is_err(), "cut at {pct} %");
            }
        }
        // Flipped bytes in the entropy-coded data: found (by position the flips are the same
        // on every run).
        let mut found = 0;
        for seed in 0..20u64 {
            let mut damaged = colour.clone();
            let mut x = seed * 2654435761 + 1;
            for _ in 0..16 {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let at = colour.len() / 2 + (x >> 33) as usize % (colour.len() / 2 - 2);
                damaged[at] ^= 0xFF;
            }
            found += check(&damaged).is_err() as u32;
        }
        assert_eq!(found, 20, "damaged copies found");
    }
}
