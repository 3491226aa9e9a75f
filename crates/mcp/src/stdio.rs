//! The process's stdin and stdout as the protocol's streams.
//!
//! tokio's `stdin()` and `stdout()` hand every read and every write to a blocking thread (a file
//! descriptor cannot be assumed pollable), so each request and each answer crosses threads. An
//! MCP client spawns its server with pipes (Python's `subprocess`, Rust's `Command`) or socket
//! pairs (Node's `child_process`), which can be polled: those are driven by the runtime's
//! reactor instead. Anything else (a terminal, a regular file) keeps tokio's streams.

use std::pin::Pin;
use tokio::io::{AsyncRead, AsyncWrite};

/// The protocol's input.
pub(crate) type Reader = Pin<Box<dyn AsyncRead + Send>>;
/// The protocol's output.
pub(crate) type Writer = Pin<Box<dyn AsyncWrite + Send>>;

/// stdin and stdout, polled by the reactor where they are pipes or sockets. Must be called
/// inside a tokio runtime with I/O enabled.
pub(crate) fn streams() -> (Reader, Writer) {
    let reader = polled::reader().unwrap_or_else(|why| {
        tracing::debug!(%why, "stdin read on a blocking thread");
        Box::pin(tokio::io::stdin())
    });
    let writer = polled::writer().unwrap_or_else(|why| {
        tracing::debug!(%why, "stdout written on a blocking thread");
        Box::pin(tokio::io::stdout())
    });
    (reader, writer)
}

#[cfg(unix)]
mod polled {
    use super::{Reader, Writer};
    use std::fs::File;
    use std::os::fd::{AsFd, OwnedFd};
    use std::os::unix::fs::FileTypeExt;

    /// What a standard stream is connected to.
    enum Kind {
        Pipe,
        Socket,
    }

    /// A duplicate of `stream`'s descriptor and what it is, or why it cannot be polled.
    fn open(stream: impl AsFd) -> std::io::Result<(OwnedFd, Kind)> {
        let file = File::from(stream.as_fd().try_clone_to_owned()?);
        let kind = file.metadata()?.file_type();
        let kind = if kind.is_fifo() {
            Kind::Pipe
        } else if kind.is_socket() {
            Kind::Socket
        } else {
            return Err(std::io::Error::other("neither a pipe nor a socket"));
        };
        Ok((OwnedFd::from(file), kind))
    }

    /// A socket descriptor as a tokio stream (non-blocking, registered with the reactor).
    fn socket(fd: OwnedFd) -> std::io::Result<tokio::net::UnixStream> {
        let stream = std::os::unix::net::UnixStream::from(fd);
        stream.set_nonblocking(true)?;
        tokio::net::UnixStream::from_std(stream)
    }

    pub(super) fn reader() -> std::io::Result<Reader> {
        Ok(match open(std::io::stdin())? {
            (fd, Kind::Pipe) => Box::pin(tokio::net::unix::pipe::Receiver::from_owned_fd(fd)?),
            (fd, Kind::Socket) => Box::pin(socket(fd)?),
        })
    }

    pub(super) fn writer() -> std::io::Result<Writer> {
        Ok(match open(std::io::stdout())? {
            (fd, Kind::Pipe) => Box::pin(tokio::net::unix::pipe::Sender::from_owned_fd(fd)?),
            (fd, Kind::Socket) => Box::pin(socket(fd)?),
        })
    }
}

#[cfg(not(unix))]
mod polled {
    use super::{Reader, Writer};

    pub(super) fn reader() -> std::io::Result<Reader> {
        Err(std::io::Error::other(
            "only Unix pipes and sockets are polled",
        ))
    }

    pub(super) fn writer() -> std::io::Result<Writer> {
        Err(std::io::Error::other(
            "only Unix pipes and sockets are polled",
        ))
    }
}
