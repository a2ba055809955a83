//! Maps a `/files/<path>` request onto a file below the document root, refusing anything
//! that could reach outside it.

use percent_encoding::percent_decode_str;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

#[derive(Debug, PartialEq, Eq)]
pub enum Refusal {
    /// Traversal, absolute path, backslash, NUL, or a link leading outside the root.
    Forbidden,
    /// Missing, or not a regular file.
    NotFound,
}

/// Size and modification time: the SPT key, and what tells a cache entry is still fresh.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileStamp {
    pub len: u64,
    pub modified: Option<SystemTime>,
}

#[derive(Debug)]
pub struct ResolvedFile {
    pub path: PathBuf,
    pub stamp: FileStamp,
}

/// `raw` is the request path after `/files/`, still percent-encoded; `root` must be
/// canonical. The name is decoded once, checked lexically, then resolved through symbolic
/// links and checked again against the root.
pub fn resolve(root: &Path, raw: &str) -> Result<ResolvedFile, Refusal> {
    let decoded: Vec<u8> = percent_decode_str(raw).collect();
    if decoded.is_empty() {
        return Err(Refusal::NotFound);
    }
    if decoded[0] == b'/'
        || decoded.contains(&b'\\')
        || decoded.contains(&0)
        || decoded
            .split(|&b| b == b'/')
            .any(|segment| segment == b"..")
    {
        return Err(Refusal::Forbidden);
    }
    let joined = root.join(OsStr::from_bytes(&decoded));
    let real = joined.canonicalize().map_err(|_| Refusal::NotFound)?;
    if !real.starts_with(root) {
        return Err(Refusal::Forbidden);
    }
    let meta = real.metadata().map_err(|_| Refusal::NotFound)?;
    if !meta.is_file() {
        return Err(Refusal::NotFound);
    }
    Ok(ResolvedFile {
        path: real,
        stamp: FileStamp {
            len: meta.len(),
            modified: meta.modified().ok(),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    /// A document root with one file, and a secret file beside (outside) it.
    fn fixture(name: &str) -> (PathBuf, PathBuf) {
        let base = std::env::temp_dir().join(format!("zhtta-path-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&base);
        let root = base.join("www");
        fs::create_dir_all(root.join("sub")).unwrap();
        fs::write(root.join("sub/a.txt"), b"hello").unwrap();
        fs::write(base.join("secret"), b"secret").unwrap();
        (root.canonicalize().unwrap(), base)
    }

    #[test]
    fn serves_a_file_below_the_root() {
        let (root, base) = fixture("ok");
        let file = resolve(&root, "sub/a%2Etxt").unwrap();
        assert_eq!(file.stamp.len, 5);
        assert!(file.path.ends_with("sub/a.txt"));
        fs::remove_dir_all(base).unwrap();
    }

    #[test]
    fn refuses_traversal_in_every_spelling() {
        let (root, base) = fixture("traversal");
        for raw in [
            "../secret",
            "sub/../../secret",
            "%2e%2e/secret",
            "%2E%2E%2Fsecret",
            "/etc/passwd",
            "%2Fetc%2Fpasswd",
            "sub%5C..%5Csecret",
            "sub\\a.txt",
            "a%00.txt",
            "..",
        ] {
            assert_eq!(
                resolve(&root, raw).unwrap_err(),
                Refusal::Forbidden,
                "{raw}"
            );
        }
        fs::remove_dir_all(base).unwrap();
    }

    #[test]
    fn refuses_a_symbolic_link_leading_outside() {
        let (root, base) = fixture("symlink");
        std::os::unix::fs::symlink(base.join("secret"), root.join("link")).unwrap();
        assert_eq!(resolve(&root, "link").unwrap_err(), Refusal::Forbidden);
        fs::remove_dir_all(base).unwrap();
    }

    #[test]
    fn missing_files_and_directories_are_not_found() {
        let (root, base) = fixture("missing");
        assert_eq!(resolve(&root, "nope").unwrap_err(), Refusal::NotFound);
        assert_eq!(resolve(&root, "sub").unwrap_err(), Refusal::NotFound);
        assert_eq!(resolve(&root, "").unwrap_err(), Refusal::NotFound);
        fs::remove_dir_all(base).unwrap();
    }
}
