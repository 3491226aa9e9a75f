//! Reading files that may not be files: a named pipe, a device or a socket where a file was
//! expected would block the reader forever (opening a FIFO waits for a writer, `/dev/zero` never
//! ends). The file tools, and the memory store for its index, the memory it rewrites and the
//! settings it reads, open such paths through [`open_regular`] (or check them with
//! [`ensure_regular`] before writing).

use std::fs::File;
use std::io::{self, Read};
use std::path::Path;

/// Open `path` for reading when it is a regular file (symlinks followed). Anything else fails
/// at once with [`io::ErrorKind::InvalidInput`] and a message naming what it is, before it is
/// opened; a missing path fails with [`io::ErrorKind::NotFound`] as [`File::open`] does.
///
/// ```
/// use memloop_host::files::open_regular;
/// let dir = tempfile::tempdir().unwrap();
/// assert_eq!(open_regular(dir.path()).unwrap_err().kind(), std::io::ErrorKind::InvalidInput);
/// std::fs::write(dir.path().join("notes.md"), "ok").unwrap();
/// assert!(open_regular(&dir.path().join("notes.md")).is_ok());
/// ```
pub fn open_regular(path: &Path) -> io::Result<File> {
    ensure_regular(path)?;
    File::open(path)
}

/// `Ok` when `path` is a regular file (symlinks followed), [`io::ErrorKind::NotFound`] when
/// nothing is there, and [`io::ErrorKind::InvalidInput`] naming what it is otherwise. A writer
/// that may create the file proceeds on `NotFound`: opening a named pipe for writing blocks
/// until a reader comes, as opening it for reading waits for a writer.
pub fn ensure_regular(path: &Path) -> io::Result<()> {
    let meta = std::fs::metadata(path)?;
    if meta.is_file() {
        return Ok(());
    }
    Err(io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("not a regular file ({})", kind(&meta)),
    ))
}

/// The whole of `path` when it is a regular file (see [`open_regular`]).
pub fn read_regular(path: &Path) -> io::Result<Vec<u8>> {
    let mut file = open_regular(path)?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// [`read_regular`] as UTF-8; invalid UTF-8 fails with [`io::ErrorKind::InvalidData`], as
/// [`std::fs::read_to_string`] does.
pub fn read_regular_to_string(path: &Path) -> io::Result<String> {
    String::from_utf8(read_regular(path)?).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            "stream did not contain valid UTF-8",
        )
    })
}

/// What a non-regular file is, for the error message.
fn kind(meta: &std::fs::Metadata) -> &'static str {
    let ft = meta.file_type();
    if ft.is_dir() {
        return "a directory";
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if ft.is_fifo() {
            return "a named pipe";
        }
        if ft.is_char_device() || ft.is_block_device() {
            return "a device";
        }
        if ft.is_socket() {
            return "a socket";
        }
    }
    "not a file"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(unix)]
    #[test]
    fn pipes_and_devices_are_refused_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("MEMORY.md");
        if !memloop_testkit::fifo(&fifo) {
            return;
        }
        // Opening the pipe for reading would wait for a writer forever: the check comes first.
        // Should it ever wait, the test opens the other end itself and fails instead of hanging.
        let (tx, rx) = std::sync::mpsc::channel();
        let reader = {
            let fifo = fifo.clone();
            std::thread::spawn(move || tx.send(read_regular(&fifo)))
        };
        let Ok(read) = rx.recv_timeout(std::time::Duration::from_secs(10)) else {
            drop(std::fs::OpenOptions::new().write(true).open(&fifo));
            let _ = reader.join();
            panic!("read_regular waited on a named pipe");
        };
        let err = read.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
        assert!(err.to_string().contains("named pipe"), "{err}");
        let err = read_regular(Path::new("/dev/zero")).unwrap_err();
        assert!(err.to_string().contains("device"), "{err}");
        // A symlink to a device is followed and refused too.
        let link = dir.path().join("zero.md");
        std::os::unix::fs::symlink("/dev/zero", &link).unwrap();
        assert_eq!(
            read_regular(&link).unwrap_err().kind(),
            io::ErrorKind::InvalidInput
        );
    }

    #[test]
    fn regular_files_read_whole_and_missing_ones_are_not_found() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("備忘録.md");
        std::fs::write(&p, "データベースはポート 5433").unwrap();
        assert_eq!(
            read_regular_to_string(&p).unwrap(),
            "データベースはポート 5433"
        );
        std::fs::write(&p, b"\xff\xfe").unwrap();
        assert_eq!(
            read_regular_to_string(&p).unwrap_err().kind(),
            io::ErrorKind::InvalidData
        );
        std::fs::write(&p, b"").unwrap();
        assert_eq!(read_regular_to_string(&p).unwrap(), "");
        assert_eq!(
            read_regular(&dir.path().join("missing"))
                .unwrap_err()
                .kind(),
            io::ErrorKind::NotFound
        );
    }
}
