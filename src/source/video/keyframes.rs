//! Keyframes a decoder can start at with nothing before them: H.264 and HEVC IDR pictures.
//!
//! A container marks every random-access point as a keyframe, but only an IDR picture closes
//! the stream behind it: no later picture refers to one before it, and every picture before it
//! is shown before it. Decoding from an IDR therefore gives exactly the frames a decoder that
//! started at the beginning gives from that point on. (An HEVC CRA picture or an H.264 I picture
//! with a recovery point is also a keyframe, but the pictures that follow it may refer back.)
//! The packets are read, not decoded: the type of the first picture's NAL unit says it.

/// The codecs whose IDR pictures are recognised.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Codec {
    H264,
    Hevc,
}

/// How a packet's NAL units are delimited: by big-endian lengths of 1–4 bytes (MP4, MKV: the
/// stream's avcC / hvcC record says how many), or by start codes (Annex B: transport streams,
/// raw streams).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Framing {
    Lengths(usize),
    StartCodes,
}

impl Framing {
    /// From the stream's codec extradata: an avcC / hvcC record (version byte 1 first) gives
    /// the length size; anything else (empty, or parameter sets behind start codes) means
    /// start codes.
    pub fn of_stream(codec: Codec, extradata: &[u8]) -> Framing {
        let size_byte = match codec {
            Codec::H264 => 4,
            Codec::Hevc => 21,
        };
        match extradata {
            [1, ..] if extradata.len() > size_byte => {
                Framing::Lengths((extradata[size_byte] & 3) as usize + 1)
            }
            _ => Framing::StartCodes,
        }
    }
}

/// The NAL units of a packet (their first byte onwards), in order.
fn nal_units(framing: Framing, data: &[u8]) -> Vec<&[u8]> {
    let mut units = Vec::new();
    match framing {
        Framing::Lengths(size) => {
            let mut at = 0usize;
            while at + size <= data.len() {
                let len = data[at..at + size]
                    .iter()
                    .fold(0usize, |acc, &b| (acc << 8) | b as usize);
                let (begin, end) = (at + size, at + size + len);
                // A length past the packet's end: damaged, the rest is not read.
                if end > data.len() {
                    break;
                }
                if len > 0 {
                    units.push(&data[begin..end]);
                }
                at = end;
            }
        }
        Framing::StartCodes => {
            // A unit begins after each 00 00 01 (a four-byte start code has one more zero).
            let mut starts = Vec::new();
            let mut i = 0usize;
            while i + 3 <= data.len() {
                if data[i] == 0 && data[i + 1] == 0 && data[i + 2] == 1 {
                    starts.push(i + 3);
                    i += 3;
                } else {
                    i += 1;
                }
            }
            for (k, &begin) in starts.iter().enumerate() {
                let end = starts.get(k + 1).map_or(data.len(), |&next| next - 3);
                if begin < end {
                    units.push(&data[begin..end]);
                }
            }
        }
    }
    units
}

/// Whether the packet's first picture is an IDR picture (the first NAL unit that carries
/// picture data decides; parameter sets and SEI before it do not).
pub fn starts_with_idr(codec: Codec, framing: Framing, data: &[u8]) -> bool {
    for unit in nal_units(framing, data) {
        let header = unit[0];
        match codec {
            Codec::H264 => {
                let kind = header & 0x1f;
                if (1..=5).contains(&kind) {
                    return kind == 5;
                }
            }
            Codec::Hevc => {
                let kind = (header >> 1) & 0x3f;
                if kind <= 31 {
                    return kind == 19 || kind == 20; // IDR_W_RADL, IDR_N_LP
                }
            }
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_lengths(units: &[&[u8]], size: usize) -> Vec<u8> {
        let mut out = Vec::new();
        for u in units {
            out.extend(&(u.len() as u32).to_be_bytes()[4 - size..]);
            out.extend(*u);
        }
        out
    }

    fn with_start_codes(units: &[&[u8]]) -> Vec<u8> {
        let mut out = Vec::new();
        for (k, u) in units.iter().enumerate() {
            out.extend(if k == 0 {
                &[0u8, 0, 0, 1][..]
            } else {
                &[0u8, 0, 1][..]
            });
            out.extend(*u);
        }
        out
    }

    #[test]
    fn h264_idr_after_parameter_sets_and_sei() {
        // SPS (7), PPS (8), SEI (6), then an IDR slice (5) or a non-IDR I slice (1).
        let idr: [&[u8]; 4] = [
            &[0x67, 1, 2],
            &[0x68, 3],
            &[0x06, 5, 0x80],
            &[0x65, 0x88, 0],
        ];
        let non_idr: [&[u8]; 2] = [&[0x06, 5, 0x80], &[0x41, 0x9a, 0]];
        for size in 1..=4 {
            let f = Framing::Lengths(size);
            assert!(starts_with_idr(Codec::H264, f, &with_lengths(&idr, size)));
            assert!(!starts_with_idr(
                Codec::H264,
                f,
                &with_lengths(&non_idr, size)
            ));
        }
        let f = Framing::StartCodes;
        assert!(starts_with_idr(Codec::H264, f, &with_start_codes(&idr)));
        assert!(!starts_with_idr(
            Codec::H264,
            f,
            &with_start_codes(&non_idr)
        ));
        // No picture at all, or damaged lengths: not a place to start.
        assert!(!starts_with_idr(
            Codec::H264,
            f,
            &with_start_codes(&idr[..2])
        ));
        assert!(!starts_with_idr(
            Codec::H264,
            Framing::Lengths(4),
            &[0, 0, 0, 9, 0x65]
        ));
        assert!(!starts_with_idr(Codec::H264, Framing::Lengths(4), &[]));
    }

    #[test]
    fn hevc_idr_but_not_cra() {
        // VPS (32), SPS (33), then IDR_W_RADL (19), IDR_N_LP (20) or CRA (21).
        let unit = |kind: u8| [kind << 1, 1, 0xaf];
        for (kind, idr) in [(19u8, true), (20, true), (21, false), (1, false)] {
            let units: [&[u8]; 3] = [&unit(32), &unit(33), &unit(kind)];
            let f = Framing::Lengths(4);
            assert_eq!(
                starts_with_idr(Codec::Hevc, f, &with_lengths(&units, 4)),
                idr
            );
            assert_eq!(
                starts_with_idr(Codec::Hevc, Framing::StartCodes, &with_start_codes(&units)),
                idr
            );
        }
    }

    #[test]
    fn framing_from_the_stream_record() {
        let avcc = [1u8, 0x64, 0, 0x28, 0xff, 0xe1];
        assert_eq!(Framing::of_stream(Codec::H264, &avcc), Framing::Lengths(4));
        let mut hvcc = vec![1u8; 23];
        hvcc[21] = 0xf1;
        assert_eq!(Framing::of_stream(Codec::Hevc, &hvcc), Framing::Lengths(2));
        assert_eq!(
            Framing::of_stream(Codec::H264, &[0, 0, 0, 1, 0x67]),
            Framing::StartCodes
        );
        assert_eq!(Framing::of_stream(Codec::H264, &[]), Framing::StartCodes);
    }
}
