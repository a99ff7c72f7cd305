//! Files written in place of others: a temporary file beside the target, with the mode the
//! target has or would get, renamed onto it at the end (`analysis`'s outputs, `record`), and
//! the file a chain of symlinks leads to (written through, the links kept).

use crate::error::{Error, Result};
use std::path::{Path, PathBuf};

fn output_error(path: &Path, why: &str) -> Error {
    Error::Output {
        path: path.to_path_buf(),
        why: why.to_string(),
    }
}

/// A temporary file in the folder of `target` (the file `named` leads to), with the mode the
/// target has or would get.
pub fn temp_file_beside(named: &Path, target: &Path) -> Result<tempfile::NamedTempFile> {
    let dir = match target.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    if !dir.is_dir() {
        let why = if dir.exists() {
            "is not a folder"
        } else {
            "does not exist"
        };
        return Err(output_error(named, &format!("{} {why}", dir.display())));
    }
    // An existing file keeps its mode; a new one gets the usual 0666 less the umask (not the
    // temporary file's 0600).
    #[cfg(unix)]
    let mode = {
        use std::os::unix::fs::PermissionsExt;
        std::fs::metadata(target)
            .ok()
            .map(|m| m.permissions().mode() & 0o777)
    };
    let prefix = temp_prefix(target);
    let mut builder = tempfile::Builder::new();
    builder.prefix(&prefix).suffix(".tmp");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        builder.permissions(std::fs::Permissions::from_mode(0o666));
    }
    // Report the bare reason: tempfile's message names the random temp file.
    let temp = builder.tempfile_in(&dir).map_err(|e| {
        let why = std::io::Error::from(e.kind());
        output_error(
            named,
            &format!("cannot create a file in {}: {why}", dir.display()),
        )
    })?;
    #[cfg(unix)]
    if let Some(mode) = mode {
        use std::os::unix::fs::PermissionsExt;
        temp.as_file()
            .set_permissions(std::fs::Permissions::from_mode(mode))
            .map_err(|e| output_error(named, &e.to_string()))?;
    }
    Ok(temp)
}

/// The temporary file's name is `.NAME.XXXXXX.tmp`; NAME is shortened (on a character
/// boundary) so that the whole stays within the 255 bytes a file name may have.
fn temp_prefix(target: &Path) -> String {
    const MAX_NAME: usize = 255 - ".".len() - ".XXXXXX.tmp".len();
    let name = target
        .file_name()
        .map_or("markerscope".into(), |n| n.to_string_lossy());
    let mut end = name.len().min(MAX_NAME);
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    format!(".{}.", &name[..end])
}

/// The path a chain of symlinks leads to (the path itself when it is not a link). A link
/// that leads nowhere yet gives where the file would be created.
pub fn follow_symlinks(path: &Path) -> PathBuf {
    let mut path = path.to_path_buf();
    // As many links as the kernel follows.
    for _ in 0..40 {
        let is_link = std::fs::symlink_metadata(&path).is_ok_and(|m| m.file_type().is_symlink());
        if !is_link {
            break;
        }
        let Ok(next) = std::fs::read_link(&path) else {
            break;
        };
        path = match path.parent() {
            Some(dir) if next.is_relative() => dir.join(next),
            _ => next,
        };
    }
    path
}
