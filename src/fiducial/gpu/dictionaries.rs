//! The dictionaries as fid_decode reads them: per dictionary five u32 (marker size, markers,
//! border errors allowed, bits corrected, its first marker's row), and one table of codes, four
//! a marker (OpenCV's rotations, as `Dictionary::rotated_code`). Uploaded when the
//! dictionaries or the settings change, kept otherwise.

use crate::error::Result;
use crate::fiducial::detect::ErrorLimits;
use crate::fiducial::dictionary::Dictionary;
use crate::fiducial::params::DetectorParams;
use crate::gpu::{cuda_err, Gpu};
use cudarc::driver::CudaSlice;

/// u32 per dictionary in the description table (FID_DICT_WORDS in kernels/fiducial.cu).
pub const DICT_WORDS: usize = 5;

/// The two tables of `dictionaries` under `params`' error rates.
pub fn tables(dictionaries: &[&Dictionary], params: &DetectorParams) -> (Vec<u32>, Vec<u64>) {
    let mut info = Vec::with_capacity(DICT_WORDS * dictionaries.len());
    let mut codes = Vec::new();
    for dict in dictionaries {
        let limits = ErrorLimits::of(dict, params);
        let first = (codes.len() / 4) as u32;
        info.extend([
            dict.marker_size(),
            dict.len() as u32,
            limits.border,
            limits.hamming,
            first,
        ]);
        for id in 0..dict.len() as u32 {
            for r in 0..4 {
                codes.push(dict.rotated_code(id, r).unwrap_or(0));
            }
        }
    }
    (info, codes)
}

/// The tables on the device, with the host copies they were uploaded from.
#[derive(Default)]
pub struct DeviceDictionaries {
    host: (Vec<u32>, Vec<u64>),
    device: Option<(CudaSlice<u32>, CudaSlice<u64>)>,
}

impl DeviceDictionaries {
    /// The tables of `dictionaries`, uploaded unless they are the ones on the device already.
    pub fn get(
        &mut self,
        gpu: &Gpu,
        dictionaries: &[&Dictionary],
        params: &DetectorParams,
    ) -> Result<&(CudaSlice<u32>, CudaSlice<u64>)> {
        let wanted = tables(dictionaries, params);
        if self.device.is_none() || self.host != wanted {
            self.device = None;
            let s = &gpu.stream;
            let up = |e| cuda_err("uploading the marker dictionaries", e);
            // At least one element each: a buffer of none cannot be allocated.
            let info = s.clone_htod(&padded(&wanted.0)).map_err(up)?;
            let codes = s.clone_htod(&padded(&wanted.1)).map_err(up)?;
            self.device = Some((info, codes));
            self.host = wanted;
        }
        Ok(self.device.as_ref().expect("uploaded above"))
    }
}

/// `values`, or one zero when there are none.
fn padded<T: Copy + Default>(values: &[T]) -> Vec<T> {
    if values.is_empty() {
        vec![T::default()]
    } else {
        values.to_vec()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What fid_decode does with the tables: the first marker whose nearest rotation is within
    /// the correction.
    fn identify_in(info: &[u32], codes: &[u64], d: usize, code: u64) -> Option<(u32, u32, u32)> {
        let i = &info[DICT_WORDS * d..DICT_WORDS * (d + 1)];
        let table = &codes[4 * i[4] as usize..];
        (0..i[1]).find_map(|id| {
            let (mut best, mut rotation) = (u32::MAX, 0);
            for r in 0..4 {
                let diff = (table[4 * id as usize + r] ^ code).count_ones();
                if diff < best {
                    (best, rotation) = (diff, r as u32);
                }
            }
            (best <= i[3]).then_some((id, rotation, best))
        })
    }

    /// Read through the tables, codes identify as `Dictionary::identify` has them, in every
    /// dictionary of a list, with the error limits of the settings.
    #[test]
    fn tables_identify_codes_as_the_dictionaries_do() {
        let names = ["DICT_4X4_50", "DICT_APRILTAG_36h11", "DICT_7X7_1000"];
        let dicts: Vec<Dictionary> = names
            .iter()
            .map(|n| Dictionary::predefined(n).unwrap())
            .collect();
        let refs: Vec<&Dictionary> = dicts.iter().collect();
        let params = DetectorParams::default();
        let (info, codes) = tables(&refs, &params);
        assert_eq!(info.len(), DICT_WORDS * 3);
        assert_eq!(codes.len(), 4 * (50 + 587 + 1000));
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        for (d, dict) in dicts.iter().enumerate() {
            let limits = ErrorLimits::of(dict, &params);
            assert_eq!(info[DICT_WORDS * d + 2], limits.border);
            assert_eq!(info[DICT_WORDS * d + 3], limits.hamming);
            let bits = dict.marker_size() * dict.marker_size();
            for k in 0..400u32 {
                // Marker codes turned and with a few bits flipped, and random codes.
                state = state
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let id = k % dict.len() as u32;
                let mut code = dict.rotated_code(id, (k % 4) as usize).unwrap();
                for b in 0..(k % 5) {
                    code ^= 1 << ((state >> (8 * b)) % bits as u64);
                }
                if k % 7 == 0 {
                    code = state >> (64 - bits);
                }
                let expected = dict
                    .identify(code, limits.hamming)
                    .map(|f| (f.id, f.rotation as u32, f.hamming));
                assert_eq!(
                    identify_in(&info, &codes, d, code),
                    expected,
                    "{}",
                    names[d]
                );
            }
        }
    }

    /// The description table says FID_DICT_WORDS words a dictionary, as the kernel reads it.
    #[test]
    fn description_width_matches_the_kernel() {
        let source = include_str!("../../../kernels/fiducial.cu");
        assert!(source.contains(&format!("#define FID_DICT_WORDS {DICT_WORDS}")));
    }
}
