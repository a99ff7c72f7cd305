//! The marker settings an analysis asks for, from what a user gives (dictionary names or
//! files, a marker length, a calibration file): `analyze --markers` and the Python package.

use crate::error::{Error, Result};
use crate::fiducial::{Dictionary, MarkerSettings};
use crate::geometry::calibration::Calibration;
use std::path::Path;
use std::sync::Arc;

/// Marker detection for `dictionaries` (OpenCV's names, or dictionary files), with poses when
/// `marker_length` is given (then `calibration` must be too). Every problem is an error here,
/// before any frame: an unknown name (with the list of names), a damaged dictionary file, a
/// dictionary given twice, a marker length that is not positive or comes without a
/// calibration, a calibration file that does not read.
pub fn marker_settings(
    dictionaries: &[String],
    marker_length: Option<f64>,
    calibration: Option<&Path>,
) -> Result<MarkerSettings> {
    let names: Vec<&str> = dictionaries
        .iter()
        .flat_map(|d| d.split(','))
        .map(str::trim)
        .filter(|d| !d.is_empty())
        .collect();
    if names.is_empty() {
        return Err(Error::Invalid(format!(
            "--markers: give a dictionary, e.g. DICT_4X4_50 or DICT_APRILTAG_36h11; available: {}",
            crate::fiducial::dictionary::predefined_names()
                .collect::<Vec<_>>()
                .join(", ")
        )));
    }
    let dictionaries = names
        .iter()
        .map(|name| {
            Dictionary::named_or_file(name)
                .map(Arc::new)
                .map_err(|e| Error::Invalid(format!("--markers: {e}")))
        })
        .collect::<Result<Vec<_>>>()?;
    if marker_length.is_some() && calibration.is_none() {
        return Err(Error::Invalid(
            "--marker-length gives each marker's pose, which needs the camera's calibration: \
             add --calibration FILE (OpenCV's camera_matrix and distortion_coefficients)"
                .into(),
        ));
    }
    let settings = MarkerSettings {
        marker_length,
        calibration: calibration.map(Calibration::load).transpose()?,
        ..MarkerSettings::new(dictionaries)
    };
    settings
        .validate()
        .map_err(|e| Error::Invalid(format!("--markers: {e}")))?;
    Ok(settings)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_files_and_bad_requests() {
        let s = marker_settings(&["DICT_4X4_50, apriltag_36h11".into()], None, None).unwrap();
        let names: Vec<&str> = s.dictionaries.iter().map(|d| d.name()).collect();
        assert_eq!(names, ["DICT_4X4_50", "DICT_APRILTAG_36h11"]);
        assert!(!s.wants_pose());

        let err = marker_settings(&["DICT_4X4_51".into()], None, None)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("unknown marker dictionary 'DICT_4X4_51'")
                && err.contains("DICT_7X7_1000"),
            "{err}"
        );
        let err = marker_settings(&["DICT_4X4_50".into()], Some(0.05), None)
            .unwrap_err()
            .to_string();
        assert!(err.contains("--calibration"), "{err}");
        let err = marker_settings(&["DICT_4X4_50,DICT_4X4_50".into()], None, None)
            .unwrap_err()
            .to_string();
        assert!(err.contains("given twice"), "{err}");
        let err = marker_settings(&[" , ".into()], None, None)
            .unwrap_err()
            .to_string();
        assert!(err.contains("give a dictionary"), "{err}");

        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("mine.yml");
        let d = Dictionary::predefined("DICT_5X5_50").unwrap();
        std::fs::write(&file, d.to_opencv_yaml()).unwrap();
        let s = marker_settings(&[file.display().to_string()], None, None).unwrap();
        assert_eq!(s.dictionaries[0].len(), 50);
        std::fs::write(&file, "%YAML:1.0\nmarkersize: 5\n").unwrap();
        let err = marker_settings(&[file.display().to_string()], None, None)
            .unwrap_err()
            .to_string();
        assert!(err.contains("marker dictionary file"), "{err}");

        let calibration = dir.path().join("cam.json");
        std::fs::write(
            &calibration,
            r#"{"camera_matrix": [[800, 0, 320], [0, 800, 240], [0, 0, 1]], "distortion_coefficients": [0, 0, 0, 0, 0]}"#,
        )
        .unwrap();
        let s = marker_settings(&["DICT_4X4_50".into()], Some(0.05), Some(&calibration)).unwrap();
        assert!(s.wants_pose());
        let err = marker_settings(&["DICT_4X4_50".into()], Some(-1.0), Some(&calibration))
            .unwrap_err()
            .to_string();
        assert!(err.contains("positive length"), "{err}");
    }
}
