//! On-disk cache of the code NVRTC compiles from `kernels/`: a start after the first reads it
//! instead of compiling every kernel file again (NVRTC takes seconds for all of them). The code
//! is CUBIN for the device's real architecture (`sm_XY`: the driver loads it as it is), or PTX
//! for a virtual one (`compute_XY`) where NVRTC cannot make CUBIN for the device.
//!
//! An entry is one file, `<kernel file>-<arch>-<hash>.cubin` (or `.ptx`), whose first line names
//! everything the code depends on (kernel file, architecture, NVRTC version, options, source
//! length and hash) and whose last line marks it complete. An entry is used only when both lines match, so
//! a changed source, another NVRTC or a half-written file is compiled again. Entries are written
//! to a temporary file and renamed into place, and an entry replaces the older ones of its
//! kernel file and architecture. The cache is best effort: a folder that cannot be read or
//! written only means compiling, never an error.
//!
//! Where: the folder `GpuTuning::kernel_cache` names (`MARKERSCOPE_KERNEL_CACHE`, else the
//! user's cache folder; `crate::tuning`).

use std::io::Write;
use std::path::{Path, PathBuf};

/// Bump when the entry format changes.
const FORMAT: u32 = 2;

/// The last line of a complete entry.
const TRAILER: &str = "// end of markerscope kernel cache entry";

/// What a cached entry was compiled from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CacheKey {
    /// Entry file name.
    file_name: String,
    /// First line of the entry.
    header: String,
    /// Entry file names of the same kernel file and architecture start with this.
    family: String,
}

impl CacheKey {
    pub fn new(
        kernel_file: &str,
        arch: &str,
        source: &str,
        options: &[String],
        nvrtc: (i32, i32),
    ) -> CacheKey {
        let mut hash = Fnv1a::default();
        hash.write(source.as_bytes());
        for option in options {
            hash.write(&[0]);
            hash.write(option.as_bytes());
        }
        let hash = hash.0;
        let stem = kernel_file.strip_suffix(".cu").unwrap_or(kernel_file);
        let family = format!("{stem}-{arch}-");
        let extension = if arch.starts_with("sm_") {
            "cubin"
        } else {
            "ptx"
        };
        CacheKey {
            file_name: format!("{family}{hash:016x}.{extension}"),
            header: format!(
                "// markerscope kernel cache {FORMAT}: {kernel_file} {arch} nvrtc {}.{} \
                 options [{}] source {} bytes fnv1a {hash:016x}",
                nvrtc.0,
                nvrtc.1,
                options.join(" "),
                source.len()
            ),
            family,
        }
    }
}

/// 64-bit FNV-1a: stable across Rust versions (std's hasher is not), enough to tell sources
/// apart (the header also holds the source length).
struct Fnv1a(u64);

impl Default for Fnv1a {
    fn default() -> Self {
        Fnv1a(0xcbf2_9ce4_8422_2325)
    }
}

impl Fnv1a {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ b as u64).wrapping_mul(0x0100_0000_01b3);
        }
    }
}

/// A cache folder.
#[derive(Clone, Debug)]
pub struct KernelCache {
    dir: PathBuf,
}

impl KernelCache {
    pub fn at(dir: impl Into<PathBuf>) -> KernelCache {
        KernelCache { dir: dir.into() }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The code of a complete entry for `key`, or None (no entry, unreadable, or not this
    /// key's).
    pub fn get(&self, key: &CacheKey) -> Option<Vec<u8>> {
        let bytes = std::fs::read(self.dir.join(&key.file_name)).ok()?;
        let newline = bytes.iter().position(|&b| b == b'\n')?;
        let (header, rest) = (&bytes[..newline], &bytes[newline + 1..]);
        let code = rest.strip_suffix(format!("\n{TRAILER}\n").as_bytes())?;
        // A NUL would end PTX early when it is handed to the driver as a C string.
        let is_ptx = key.file_name.ends_with(".ptx");
        (header == key.header.as_bytes() && !(is_ptx && code.contains(&0))).then(|| code.to_vec())
    }

    /// Stores `code` for `key` and removes the older entries of the same kernel file and
    /// architecture.
    pub fn put(&self, key: &CacheKey, code: &[u8]) -> std::io::Result<()> {
        std::fs::create_dir_all(&self.dir)?;
        let mut tmp = tempfile::NamedTempFile::new_in(&self.dir)?;
        tmp.write_all(key.header.as_bytes())?;
        tmp.write_all(b"\n")?;
        tmp.write_all(code)?;
        write!(tmp, "\n{TRAILER}\n")?;
        tmp.as_file().sync_all()?;
        tmp.persist(self.dir.join(&key.file_name))
            .map_err(|e| e.error)?;
        for entry in std::fs::read_dir(&self.dir)?.flatten() {
            let name = entry.file_name();
            let name = name.to_string_lossy();
            let entry_file = name.ends_with(".ptx") || name.ends_with(".cubin");
            if name.starts_with(&key.family) && entry_file && name != key.file_name {
                let _ = std::fs::remove_file(entry.path());
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PTX: &str = ".version 8.0\n.target sm_90\n.address_size 64\n";

    fn key(source: &str, nvrtc: (i32, i32)) -> CacheKey {
        CacheKey::new("ha4.cu", "compute_90", source, &["-lineinfo".into()], nvrtc)
    }

    #[test]
    fn an_entry_is_found_by_its_own_key_only() {
        let dir = tempfile::tempdir().unwrap();
        let cache = KernelCache::at(dir.path());
        let k = key("int a;", (12, 8));
        assert_eq!(cache.get(&k), None);
        cache.put(&k, PTX.as_bytes()).unwrap();
        assert_eq!(cache.get(&k).as_deref(), Some(PTX.as_bytes()));
        // Another source, NVRTC, option list or architecture is another entry.
        assert_eq!(cache.get(&key("int b;", (12, 8))), None);
        assert_eq!(cache.get(&key("int a;", (13, 0))), None);
        let other_opts = CacheKey::new("ha4.cu", "compute_90", "int a;", &[], (12, 8));
        assert_eq!(cache.get(&other_opts), None);
        let other_arch = CacheKey::new(
            "ha4.cu",
            "compute_80",
            "int a;",
            &["-lineinfo".into()],
            (12, 8),
        );
        assert_eq!(cache.get(&other_arch), None);
    }

    #[test]
    fn truncated_foreign_or_nul_entries_are_misses() {
        let dir = tempfile::tempdir().unwrap();
        let cache = KernelCache::at(dir.path());
        let k = key("int a;", (12, 8));
        let path = dir.path().join(&k.file_name);
        cache.put(&k, PTX.as_bytes()).unwrap();
        let whole = std::fs::read_to_string(&path).unwrap();
        assert!(whole.ends_with(&format!("{TRAILER}\n")), "{whole}");
        // Cut before the trailer: a half-written file.
        std::fs::write(&path, &whole[..whole.len() - TRAILER.len() - 3]).unwrap();
        assert_eq!(cache.get(&k), None);
        // Same file name, another header (a hash collision or a hand-edited file).
        std::fs::write(&path, whole.replacen("nvrtc 12.8", "nvrtc 12.9", 1)).unwrap();
        assert_eq!(cache.get(&k), None);
        std::fs::write(&path, whole.replacen(".target", ".tar\0get", 1)).unwrap();
        assert_eq!(cache.get(&k), None);
        std::fs::write(&path, [0xff, 0xfe, b'\n']).unwrap();
        assert_eq!(cache.get(&k), None);
    }

    #[test]
    fn cubin_entries_hold_any_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let cache = KernelCache::at(dir.path());
        let k = CacheKey::new("ha4.cu", "sm_90", "int a;", &[], (13, 0));
        assert!(k.file_name.ends_with(".cubin"), "{}", k.file_name);
        let cubin: Vec<u8> = b"\x7fELF\0\n\xff".iter().copied().chain(0..=255).collect();
        cache.put(&k, &cubin).unwrap();
        assert_eq!(cache.get(&k), Some(cubin.clone()));
        // PTX and CUBIN of one kernel file are separate entries.
        let ptx = CacheKey::new("ha4.cu", "compute_90", "int a;", &[], (13, 0));
        assert_eq!(cache.get(&ptx), None);
        cache.put(&ptx, PTX.as_bytes()).unwrap();
        assert_eq!(cache.get(&k), Some(cubin));
    }

    #[test]
    fn a_new_entry_replaces_older_ones_of_its_file_and_arch() {
        let dir = tempfile::tempdir().unwrap();
        let cache = KernelCache::at(dir.path());
        let old = key("int a;", (12, 8));
        let new = key("int a; int b;", (12, 8));
        let other_file = CacheKey::new("flsl.cu", "compute_90", "int a;", &[], (12, 8));
        cache.put(&old, PTX.as_bytes()).unwrap();
        cache.put(&other_file, PTX.as_bytes()).unwrap();
        cache.put(&new, PTX.as_bytes()).unwrap();
        assert_eq!(cache.get(&old), None);
        assert!(cache.get(&new).is_some());
        assert!(cache.get(&other_file).is_some());
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(names.len(), 2, "{names:?}");
    }

    #[test]
    fn an_unwritable_folder_is_an_error_to_the_caller_not_a_panic() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("not-a-folder");
        std::fs::write(&file, b"x").unwrap();
        let cache = KernelCache::at(file.join("kernels"));
        let k = key("int a;", (12, 8));
        assert!(cache.put(&k, PTX.as_bytes()).is_err());
        assert_eq!(cache.get(&k), None);
    }

    #[test]
    fn the_hash_is_fnv1a_64() {
        // Reference values of 64-bit FNV-1a.
        let hash = |s: &str| {
            let mut h = Fnv1a::default();
            h.write(s.as_bytes());
            h.0
        };
        assert_eq!(hash(""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(hash("a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(hash("foobar"), 0x8594_4171_f739_67e8);
    }
}
