//! The files a run writes: checked against the inputs and each other, written to a temporary
//! file beside the target and renamed into place at the end.

use super::interrupt::TempFile;
use super::Output;
use crate::error::{Error, Result};
use crate::output::files::{follow_symlinks, temp_file_beside};
use crate::source::SourceSpec;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

/// Refuses an output path that is one of the input files (the input would be replaced by the
/// results: for a folder or glob, any of its images; `other_inputs`: masks, calibration, world
/// file), or that another output also names. Paths
/// are compared as the files they reach: device and inode for existing files (through
/// symlinks and hard links), the resolved path otherwise.
pub(super) fn check_outputs(
    spec: &SourceSpec,
    other_inputs: &[&Path],
    outputs: &[(&str, &Path)],
) -> Result<()> {
    #[cfg(unix)]
    fn same_file(a: &std::fs::Metadata, b: &std::fs::Metadata) -> bool {
        use std::os::unix::fs::MetadataExt;
        a.dev() == b.dev() && a.ino() == b.ino()
    }
    #[cfg(not(unix))]
    fn same_file(_: &std::fs::Metadata, _: &std::fs::Metadata) -> bool {
        false
    }
    let mut inputs: Vec<PathBuf> = match spec {
        SourceSpec::Video { path, .. } => vec![path.clone()],
        // A listing that fails is reported when the source is opened.
        SourceSpec::Images(s) => crate::source::images::image_paths(s).unwrap_or_default(),
        SourceSpec::Synthetic(_) | SourceSpec::Camera { .. } => Vec::new(),
    };
    inputs.extend(other_inputs.iter().map(|p| p.to_path_buf()));
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
        /// Removed by the stop-signal watcher if the process must end where it is.
        _registered: TempFile,
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
        Ok(Sink::File {
            _registered: TempFile::register(temp.path().to_path_buf()),
            target,
            temp,
        })
    }

    pub(super) fn writer(&self) -> Box<dyn Write + '_> {
        match self {
            Sink::Stdout => Box::new(BufWriter::new(std::io::stdout().lock())),
            Sink::File { temp, .. } => Box::new(BufWriter::with_capacity(1 << 16, temp.as_file())),
            Sink::Device { file, .. } => Box::new(BufWriter::with_capacity(1 << 16, file)),
        }
    }

    /// A writer of its own for the rows' writer thread (the same file, another handle).
    pub(super) fn owned_writer(&self) -> Result<Box<dyn Write + Send>> {
        let file = match self {
            Sink::Stdout => return Ok(Box::new(std::io::stdout())),
            Sink::File { temp, .. } => temp.as_file().try_clone(),
            Sink::Device { file, .. } => file.try_clone(),
        };
        let file = file.map_err(|e| self.error(e))?;
        Ok(Box::new(file))
    }

    /// Where it writes (`<stdout>` for standard output).
    pub(super) fn path(&self) -> &Path {
        match self {
            Sink::Stdout => Path::new("<stdout>"),
            Sink::File { target, .. } | Sink::Device { target, .. } => target,
        }
    }

    /// `bytes`, written whole and flushed.
    pub(super) fn write_all(&self, bytes: &[u8]) -> Result<()> {
        let mut w = self.writer();
        w.write_all(bytes)
            .and_then(|()| w.flush())
            .map_err(|e| self.error(e))
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
            Sink::File { target, temp, .. } => {
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
