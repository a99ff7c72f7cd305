//! The files a run writes: checked against the inputs and each other, written to a temporary
//! file beside the target and renamed into place at the end.

use super::Output;
use crate::error::{Error, Result};
use crate::source::SourceSpec;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

/// Refuses an output path that is one of the input files (the input would be replaced by the
/// results: for a folder or glob, any of its images), or that another output also names. Paths
/// are compared as the files they reach: device and inode for existing files (through
/// symlinks and hard links), the resolved path otherwise.
pub(super) fn check_outputs(spec: &SourceSpec, outputs: &[(&str, &Path)]) -> Result<()> {
    #[cfg(unix)]
    fn same_file(a: &std::fs::Metadata, b: &std::fs::Metadata) -> bool {
        use std::os::unix::fs::MetadataExt;
        a.dev() == b.dev() && a.ino() == b.ino()
    }
    #[cfg(not(unix))]
    fn same_file(_: &std::fs::Metadata, _: &std::fs::Metadata) -> bool {
        false
    }
    let inputs: Vec<PathBuf> = match spec {
        SourceSpec::Video { path, .. } => vec![path.clone()],
        // A listing that fails is reported when the source is opened.
        SourceSpec::Images(s) => crate::source::images::image_paths(s).unwrap_or_default(),
        SourceSpec::Synthetic(_) | SourceSpec::Camera { .. } => Vec::new(),
    };
    let input_meta: Vec<(&PathBuf, std::fs::Metadata)> = inputs
        .iter()
        .filter_map(|p| std::fs::metadata(p).ok().map(|m| (p, m)))
        .filter(|(_, m)| m.is_file())
        .collect();
    for (i, (flag, out)) in outputs.iter().enumerate() {
        if out.as_os_str().is_empty() {
            return Err(Error::Invalid(format!("{flag} is empty: give a file path")));
        }
        if let Ok(meta) = std::fs::metadata(out) {
            if let Some((input, _)) = input_meta.iter().find(|(_, m)| same_file(m, &meta)) {
                let is = if input.as_path() == *out {
                    "is the input".to_string()
                } else {
                    format!("is the same file as the input {}", input.display())
                };
                return Err(Error::Invalid(format!(
                    "{flag} {} {is}: writing the results there would destroy it; choose another output path",
                    out.display()
                )));
            }
        }
        for (other_flag, other) in &outputs[..i] {
            if resolved(out) == resolved(other) {
                return Err(Error::Invalid(format!(
                    "{flag} {} is also the {other_flag} file; give each output its own file",
                    out.display()
                )));
            }
        }
    }
    Ok(())
}

/// Where a path leads: symlinks followed (also one that leads nowhere yet) and the folder made
/// absolute, as far as it exists.
fn resolved(path: &Path) -> PathBuf {
    let path = &follow_symlinks(path);
    if let Ok(p) = std::fs::canonicalize(path) {
        return p;
    }
    match (path.parent(), path.file_name()) {
        (Some(dir), Some(name)) => {
            let dir = if dir.as_os_str().is_empty() {
                Path::new(".")
            } else {
                dir
            };
            std::fs::canonicalize(dir)
                .map(|d| d.join(name))
                .unwrap_or_else(|_| path.to_path_buf())
        }
        _ => path.to_path_buf(),
    }
}

/// Where the rows go: stdout, or a temporary file renamed onto the target on success
/// (dropped, and so deleted, on failure).
pub(super) enum Sink {
    Stdout,
    File {
        target: PathBuf,
        temp: tempfile::NamedTempFile,
    },
    /// An existing device or pipe (`/dev/null`, a FIFO): written directly, never replaced.
    Device {
        target: PathBuf,
        file: std::fs::File,
    },
}

impl Sink {
    pub(super) fn open(output: &Output) -> Result<Sink> {
        match output {
            Output::Stdout if stdout_was_closed() => Err(output_error(
                Path::new("<stdout>"),
                "standard output is closed, so the rows would be lost; redirect it (>/dev/null \
                 to discard them) or use --out FILE",
            )),
            Output::Stdout => Ok(Sink::Stdout),
            Output::File(named) => Sink::open_file(named),
        }
    }

    fn open_file(named: &Path) -> Result<Sink> {
        if named.as_os_str().is_empty() {
            return Err(output_error(
                named,
                "the output path is empty; give a file name",
            ));
        }
        if named.is_dir() {
            return Err(output_error(named, "it is a folder"));
        }
        if named.as_os_str().to_string_lossy().ends_with('/') {
            return Err(output_error(
                named,
                "the path ends with /, so it names a folder; give a file name",
            ));
        }
        if std::fs::metadata(named).is_ok_and(|m| !m.is_file()) {
            // Renaming a temporary file onto /dev/null would replace the device.
            let file = std::fs::OpenOptions::new()
                .write(true)
                .open(named)
                .map_err(|e| output_error(named, &e.to_string()))?;
            return Ok(Sink::Device {
                target: named.to_path_buf(),
                file,
            });
        }
        // A symlink is written through: the file it points to is replaced, the link stays.
        let target = follow_symlinks(named);
        let temp = temp_file_beside(named, &target)?;
        Ok(Sink::File { target, temp })
    }

    pub(super) fn writer(&self) -> Box<dyn Write + '_> {
        match self {
            Sink::Stdout => Box::new(BufWriter::new(std::io::stdout().lock())),
            Sink::File { temp, .. } => Box::new(BufWriter::with_capacity(1 << 16, temp.as_file())),
            Sink::Device { file, .. } => Box::new(BufWriter::with_capacity(1 << 16, file)),
        }
    }

    pub(super) fn error(&self, e: std::io::Error) -> Error {
        match self {
            Sink::Stdout => output_error(Path::new("<stdout>"), &e.to_string()),
            Sink::File { target, .. } | Sink::Device { target, .. } => {
                output_error(target, &e.to_string())
            }
        }
    }

    pub(super) fn commit(self) -> Result<()> {
        match self {
            Sink::Stdout | Sink::Device { .. } => Ok(()),
            Sink::File { target, temp } => {
                temp.as_file()
                    .sync_all()
                    .map_err(|e| output_error(&target, &e.to_string()))?;
                temp.persist(&target)
                    .map_err(|e| output_error(&target, &e.error.to_string()))?;
                Ok(())
            }
        }
    }
}

/// A temporary file in the folder of `target` (the file `named` leads to), with the mode the
/// target has or would get.
fn temp_file_beside(named: &Path, target: &Path) -> Result<tempfile::NamedTempFile> {
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
fn follow_symlinks(path: &Path) -> PathBuf {
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

/// Whether the process was started with its standard output closed (`>&-`). Rust's runtime
/// then puts /dev/null, opened read-write, in its place, where every row would vanish without
/// an error; a shell's `>/dev/null` opens it write-only.
#[cfg(target_os = "linux")]
fn stdout_was_closed() -> bool {
    // SAFETY: fcntl(F_GETFL) only reads the descriptor's flags.
    let flags = unsafe { libc::fcntl(1, libc::F_GETFL) };
    if flags < 0 {
        return true;
    }
    flags & libc::O_ACCMODE == libc::O_RDWR
        && std::fs::read_link("/proc/self/fd/1").is_ok_and(|p| p == Path::new("/dev/null"))
}

#[cfg(not(target_os = "linux"))]
fn stdout_was_closed() -> bool {
    false
}

fn output_error(path: &Path, why: &str) -> Error {
    Error::Output {
        path: path.to_path_buf(),
        why: why.to_string(),
    }
}
