//! memloop's own files in a memory dir (the batch journal, lock files, the idempotency records,
//! markers): opened without following links. Anyone who can write to the memory dir (another
//! user of a shared dir, a cloned repository) can plant a symbolic link where memloop keeps such
//! a file; followed, it would lead memloop's reads, writes and deletions to wherever the link
//! points. So a link (or anything but a regular file, or a directory where memloop keeps a
//! directory) is refused with an error that names the file relative to the memory dir, never
//! the memory dir's absolute path (refusals reach clients that must not learn where it is).
//!
//! On Unix the final component is opened with `O_NOFOLLOW` (and `O_NONBLOCK`, so a named pipe
//! planted there cannot block the open) and the opened file is checked with `fstat`; elsewhere
//! the path is checked with `symlink_metadata` before it is opened. The directory holding the
//! file (`base`) is trusted: it is the memory dir itself, or an internal directory opened
//! through [`internal_dir`].

use std::fs::{File, OpenOptions};
use std::io::{self, Read};
use std::path::{Path, PathBuf};

/// The refusal of an internal file or dir `rel` (relative to the memory dir) that is `what`.
fn refused(rel: &str, what: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!(
            "`{rel}` in the memory dir is {what}; memloop does not follow links for its own \
             files: remove it"
        ),
    )
}

/// What a non-regular entry is, for the refusal.
fn kind_of(meta: &std::fs::Metadata) -> &'static str {
    let ft = meta.file_type();
    if ft.is_symlink() {
        "a symbolic link"
    } else if ft.is_dir() {
        "a directory, not a file"
    } else {
        "not a regular file"
    }
}

/// Create (if missing) and check the internal directory `base/name` (`name` relative to the
/// memory dir, e.g. `.memloop-idempotency`): `base` is created when missing; `name` must be a
/// real directory, not a symbolic link to one. Returns its path. A link or another kind of file
/// there fails with [`io::ErrorKind::InvalidInput`] and a message naming `name` (never `base`).
///
/// ```
/// # fn main() -> std::io::Result<()> {
/// let dir = tempfile::tempdir()?;
/// let keys = memloop_files::internal_dir(dir.path(), ".memloop-idempotency")?;
/// assert!(keys.is_dir());
/// # #[cfg(unix)] {
/// std::fs::remove_dir(&keys)?;
/// std::os::unix::fs::symlink(std::env::temp_dir(), &keys)?;
/// let err = memloop_files::internal_dir(dir.path(), ".memloop-idempotency").unwrap_err();
/// assert!(err.to_string().contains("`.memloop-idempotency` in the memory dir is a symbolic link"));
/// # }
/// # Ok(()) }
/// ```
pub fn internal_dir(base: &Path, name: &str) -> io::Result<PathBuf> {
    std::fs::create_dir_all(base)?;
    match std::fs::create_dir(base.join(name)) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e),
    }
    existing_internal_dir(base, name)?.ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::NotFound,
            format!("`{name}` in the memory dir went away as it was made"),
        )
    })
}

/// The internal directory `base/name` when it exists, checked as [`internal_dir`] checks it
/// (a real directory, not a symbolic link to one), without creating anything: `Ok(None)` when
/// there is nothing there, the refusal of [`internal_dir`] when something else is. For readers
/// and sweeps, which must neither create a dir nor follow a link planted where one belongs.
///
/// ```
/// # fn main() -> std::io::Result<()> {
/// let dir = tempfile::tempdir()?;
/// assert!(memloop_files::existing_internal_dir(dir.path(), ".memloop-queue")?.is_none());
/// assert!(!dir.path().join(".memloop-queue").exists());
/// memloop_files::internal_dir(dir.path(), ".memloop-queue")?;
/// assert!(memloop_files::existing_internal_dir(dir.path(), ".memloop-queue")?.is_some());
/// # Ok(()) }
/// ```
pub fn existing_internal_dir(base: &Path, name: &str) -> io::Result<Option<PathBuf>> {
    let path = base.join(name);
    let meta = match std::fs::symlink_metadata(&path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    if !meta.file_type().is_dir() {
        tracing::warn!(path = %path.display(), "internal dir refused: {}", kind_of(&meta));
        return Err(refused(name, kind_of(&meta)));
    }
    // Opened without following a link, as a directory: a link swapped in since the look fails.
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        if let Err(e) = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_DIRECTORY)
            .open(&path)
        {
            return Err(explain(name, &path, e));
        }
    }
    Ok(Some(path))
}

/// Open the internal file `base/rel` (`rel` relative to the memory dir, e.g. `.memloop.lock`
/// or `.memloop-idempotency/.lock`) with `options`, without following a link: when `options`
/// creates files, a missing file is created, but a link there (even a dangling one) is never
/// followed. Anything but a regular file fails with [`io::ErrorKind::InvalidInput`] and a
/// message naming `rel` (never `base`); a missing file that is not created fails with
/// [`io::ErrorKind::NotFound`].
///
/// ```
/// # fn main() -> std::io::Result<()> {
/// let dir = tempfile::tempdir()?;
/// let mut create = std::fs::OpenOptions::new();
/// create.write(true).create(true).truncate(false);
/// memloop_files::open_internal_file(dir.path(), ".memloop.lock", &create)?;
/// # #[cfg(unix)] {
/// std::os::unix::fs::symlink("/etc/hostname", dir.path().join(".swept"))?;
/// let err = memloop_files::open_internal_file(dir.path(), ".swept", &create).unwrap_err();
/// assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
/// assert!(!err.to_string().contains(&*dir.path().to_string_lossy()));
/// # }
/// # Ok(()) }
/// ```
pub fn open_internal_file(base: &Path, rel: &str, options: &OpenOptions) -> io::Result<File> {
    let path = base.join(rel);
    #[cfg(unix)]
    let file = {
        use std::os::unix::fs::OpenOptionsExt;
        let mut options = options.clone();
        options.custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK);
        options.open(&path).map_err(|e| explain(rel, &path, e))?
    };
    #[cfg(not(unix))]
    let file = {
        match std::fs::symlink_metadata(&path) {
            Ok(meta) if !meta.file_type().is_file() => {
                tracing::warn!(path = %path.display(), "internal file refused: {}", kind_of(&meta));
                return Err(refused(rel, kind_of(&meta)));
            }
            _ => {}
        }
        options.open(&path)?
    };
    let meta = file.metadata()?;
    if !meta.file_type().is_file() {
        tracing::warn!(path = %path.display(), "internal file refused: {}", kind_of(&meta));
        return Err(refused(rel, kind_of(&meta)));
    }
    Ok(file)
}

/// The whole of the internal file `base/rel`, read without following a link (see
/// [`open_internal_file`]); [`io::ErrorKind::NotFound`] when it is missing.
///
/// ```
/// # fn main() -> std::io::Result<()> {
/// let dir = tempfile::tempdir()?;
/// std::fs::write(dir.path().join(".memloop-owner"), "владелец")?;
/// assert_eq!(memloop_files::read_internal_file(dir.path(), ".memloop-owner")?, "владелец".as_bytes());
/// # Ok(()) }
/// ```
pub fn read_internal_file(base: &Path, rel: &str) -> io::Result<Vec<u8>> {
    let mut file = open_internal_file(base, rel, OpenOptions::new().read(true))?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// The error of a no-follow open of `path` (`rel` in the memory dir): a link there is refused
/// by name; any other error is returned as it is (an OS error names no path).
#[cfg(unix)]
fn explain(rel: &str, path: &Path, e: io::Error) -> io::Error {
    let link = std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink());
    let what = match e.raw_os_error() {
        Some(libc::ELOOP) if link => "a symbolic link",
        Some(libc::ENOTDIR) => "not a directory",
        Some(libc::ENXIO) => "not a regular file",
        _ => return e,
    };
    tracing::warn!(path = %path.display(), error = %e, "internal file refused: {what}");
    refused(rel, what)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn internal_files_are_created_read_and_a_directory_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let mut create = OpenOptions::new();
        create.write(true).create(true).truncate(false);
        std::io::Write::write_all(
            &mut open_internal_file(dir.path(), ".marker", &create).unwrap(),
            "Ünïcödé заметка".as_bytes(),
        )
        .unwrap();
        assert_eq!(
            read_internal_file(dir.path(), ".marker").unwrap(),
            "Ünïcödé заметка".as_bytes()
        );
        assert_eq!(
            read_internal_file(dir.path(), ".missing")
                .unwrap_err()
                .kind(),
            io::ErrorKind::NotFound
        );
        std::fs::create_dir(dir.path().join(".journal")).unwrap();
        let err = read_internal_file(dir.path(), ".journal").unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
        std::fs::write(dir.path().join(".file"), "x").unwrap();
        assert_eq!(
            internal_dir(dir.path(), ".file").unwrap_err().kind(),
            io::ErrorKind::InvalidInput
        );
    }

    #[cfg(unix)]
    #[test]
    fn links_are_refused_by_their_name_in_the_memory_dir_and_never_followed() {
        let dir = tempfile::tempdir().unwrap();
        let victim = tempfile::tempdir().unwrap();
        std::fs::write(victim.path().join("important.json"), "важно").unwrap();
        let link = dir.path().join(".memloop.lock");
        std::os::unix::fs::symlink(victim.path().join("important.json"), &link).unwrap();
        let mut create = OpenOptions::new();
        create.write(true).create(true).truncate(true);
        let err = open_internal_file(dir.path(), ".memloop.lock", &create).unwrap_err();
        let msg = err.to_string();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
        assert!(
            msg.contains("`.memloop.lock` in the memory dir is a symbolic link"),
            "{msg}"
        );
        assert!(!msg.contains(&*dir.path().to_string_lossy()), "{msg}");
        assert!(read_internal_file(dir.path(), ".memloop.lock").is_err());
        assert_eq!(
            std::fs::read_to_string(victim.path().join("important.json")).unwrap(),
            "важно"
        );
        // A dangling link is not created through either.
        std::os::unix::fs::symlink(victim.path().join("new.json"), dir.path().join(".new"))
            .unwrap();
        assert!(open_internal_file(dir.path(), ".new", &create).is_err());
        assert!(!victim.path().join("new.json").exists());
    }
}
