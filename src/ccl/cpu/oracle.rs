//! The oracle: a plain breadth-first flood fill. Obviously correct, slow, and the reference every
//! other algorithm is checked against. Components are numbered in raster order of first pixel
//! because the scan that seeds the fills goes in raster order.

use crate::ccl::stats::Moments;
use crate::ccl::{Connectivity, LabelRequest, Labeler, Labeling, Mask, StepTime};
use crate::error::Result;
use crate::frame::image::{BinaryImage, LabelImage};
use std::collections::VecDeque;
use std::time::Instant;

pub struct Oracle;

impl Labeler for Oracle {
    fn name(&self) -> &'static str {
        "bfs"
    }

    fn label_mask(&mut self, request: LabelRequest<Mask<'_>>) -> Result<Labeling> {
        let (want, start) = (request.want, Instant::now());
        let (labels, moments) = flood_fill(&request.input.bytes(), request.connectivity);
        let ms = start.elapsed().as_secs_f64() * 1e3;
        Ok(Labeling {
            count: moments.len() as u32,
            stats: want.stats().then(|| {
                moments
                    .iter()
                    .enumerate()
                    .map(|(i, m)| m.to_stats(i as u32 + 1))
                    .collect()
            }),
            labels: want.labels().then_some(labels),
            timings: vec![StepTime::new("flood fill", ms)],
            filtered: None,
            device_detections: None,
        })
    }
}

/// Labels by BFS and accumulates moments pixel by pixel.
pub fn flood_fill(image: &BinaryImage, connectivity: Connectivity) -> (LabelImage, Vec<Moments>) {
    let (w, h) = (image.width as i64, image.height as i64);
    let mut labels = LabelImage::zeros(image.width, image.height);
    let mut moments = Vec::new();
    let mut queue = VecDeque::new();
    let neighbours: &[(i64, i64)] = match connectivity {
        Connectivity::Four => &[(1, 0), (-1, 0), (0, 1), (0, -1)],
        Connectivity::Eight => &[
            (1, 0),
            (-1, 0),
            (0, 1),
            (0, -1),
            (1, 1),
            (1, -1),
            (-1, 1),
            (-1, -1),
        ],
    };
    for start in 0..image.data.len() {
        if image.data[start] == 0 || labels.data[start] != 0 {
            continue;
        }
        let label = moments.len() as u32 + 1;
        let mut m = Moments::EMPTY;
        labels.data[start] = label;
        queue.push_back(start);
        while let Some(i) = queue.pop_front() {
            let (x, y) = (i as i64 % w, i as i64 / w);
            m.add_pixel(x as u32, y as u32);
            for &(dx, dy) in neighbours {
                let (nx, ny) = (x + dx, y + dy);
                if nx < 0 || ny < 0 || nx >= w || ny >= h {
                    continue;
                }
                let j = (ny * w + nx) as usize;
                if image.data[j] != 0 && labels.data[j] == 0 {
                    labels.data[j] = label;
                    queue.push_back(j);
                }
            }
        }
        moments.push(m);
    }
    (labels, moments)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checkerboard_differs_between_4_and_8() {
        let img = BinaryImage::from_fn(4, 4, |x, y| (x + y) % 2 == 0).unwrap();
        let (_, four) = flood_fill(&img, Connectivity::Four);
        let (_, eight) = flood_fill(&img, Connectivity::Eight);
        assert_eq!(four.len(), 8);
        assert_eq!(eight.len(), 1);
    }

    #[test]
    fn raster_order_numbering() {
        // Component B's first pixel (1, 0) comes before A's lower pixels but after A's (0, 0).
        let img = BinaryImage::new(3, 2, vec![1, 0, 1, 1, 0, 0]).unwrap();
        let (labels, m) = flood_fill(&img, Connectivity::Four);
        assert_eq!(labels.data, vec![1, 0, 2, 1, 0, 0]);
        assert_eq!(m[0].area, 2);
        assert_eq!(m[1].area, 1);
    }
}
