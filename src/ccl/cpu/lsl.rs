//! TEMPORARY: being written by a helper; delegates to the oracle so the tree builds.
use crate::ccl::{Connectivity, Labeler, Labeling, Want};
use crate::error::Result;
use crate::image::BinaryImage;

pub struct Lsl;

impl Lsl {
    pub fn new() -> Self {
        Lsl
    }
}

impl Labeler for Lsl {
    fn name(&self) -> &'static str {
        "lsl"
    }
    fn label(
        &mut self,
        image: &BinaryImage,
        connectivity: Connectivity,
        want: Want,
    ) -> Result<Labeling> {
        super::oracle::Oracle.label(image, connectivity, want)
    }
}
