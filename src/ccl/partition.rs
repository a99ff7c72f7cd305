//! Partition checker: do two label images describe the same components, up to renumbering?

use crate::frame::image::LabelImage;
use std::collections::HashMap;

/// Returns Ok when `a` and `b` have the same background and there is a bijection between their
/// labels. The error names the first pixel where they disagree.
pub fn same_partition(a: &LabelImage, b: &LabelImage) -> Result<(), String> {
    if (a.width, a.height) != (b.width, b.height) {
        return Err(format!(
            "sizes differ: {}x{} vs {}x{}",
            a.width, a.height, b.width, b.height
        ));
    }
    let mut a_to_b: HashMap<u32, u32> = HashMap::new();
    let mut b_to_a: HashMap<u32, u32> = HashMap::new();
    let w = a.width as usize;
    for (i, (&la, &lb)) in a.data.iter().zip(&b.data).enumerate() {
        let (x, y) = (i % w, i / w);
        if (la == 0) != (lb == 0) {
            return Err(format!(
                "pixel ({x}, {y}): background in one, label in the other ({la} vs {lb})"
            ));
        }
        if la == 0 {
            continue;
        }
        if *a_to_b.entry(la).or_insert(lb) != lb {
            return Err(format!(
                "pixel ({x}, {y}): component {la} of the first is split in the second ({} and {lb})",
                a_to_b[&la]
            ));
        }
        if *b_to_a.entry(lb).or_insert(la) != la {
            return Err(format!(
                "pixel ({x}, {y}): components {} and {la} of the first are merged in the second (as {lb})",
                b_to_a[&lb]
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn img(data: Vec<u32>) -> LabelImage {
        LabelImage {
            width: data.len() as u32,
            height: 1,
            data,
        }
    }

    #[test]
    fn renumbering_is_the_same_partition() {
        assert!(same_partition(&img(vec![1, 1, 0, 2]), &img(vec![7, 7, 0, 3])).is_ok());
    }

    #[test]
    fn split_merge_and_background_are_caught() {
        assert!(same_partition(&img(vec![1, 1, 0, 2]), &img(vec![1, 2, 0, 3])).is_err());
        assert!(same_partition(&img(vec![1, 1, 0, 2]), &img(vec![1, 1, 0, 1])).is_err());
        assert!(same_partition(&img(vec![1, 1, 0, 2]), &img(vec![1, 1, 1, 2])).is_err());
    }
}
