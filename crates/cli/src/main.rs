//! The `memloop` binary: parse, run, map the outcome to an exit code.

use clap::Parser;
use memloop_cli::terminal::Visible;
use memloop_cli::{Cli, Context, Exit, Io, error_message, exit_for, is_broken_pipe};
use memloop_host::env::EnvVars;
use memloop_otel::{OtlpConfig, OtlpExport};
use std::io::{IsTerminal, Write};
use std::process::ExitCode;

/// The server's allocator: a request allocates and frees many small buffers (JSON, headers,
/// query rows) across threads, which mimalloc serves from per-thread pages where the system
/// allocator contends on arenas and keeps more memory mapped.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    without_huge_pages();
    let cli = Cli::parse();
    let export = start_export();
    let code = run(&cli, export.as_ref());
    if let Some(export) = export {
        // Send the spans still buffered; a collector that is gone is only warned about.
        if let Err(e) = export.shutdown() {
            let _ = writeln!(std::io::stderr(), "memloop: warning: {e}");
        }
    }
    code
}

/// Turn transparent huge pages off for this process (Linux; elsewhere nothing to do). mimalloc
/// asks for them on its arenas, and then every page it gives back to the kernel after an idle
/// second and touches again is a 2 MiB page zeroed: measured on a 2-core VM, a third of the
/// server's CPU in a burst of `context_save` batches went to zeroing pages, and the process
/// kept 4 times the memory. A process that cannot turn them off runs as before.
fn without_huge_pages() {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    if let Err(e) = rustix::thread::disable_transparent_huge_pages(true) {
        let _ = writeln!(
            std::io::stderr(),
            "memloop: warning: transparent huge pages left on: {e}"
        );
    }
}

/// The OTLP export the standard variables ask for (`OTEL_EXPORTER_OTLP_ENDPOINT`, ...), if
/// any. A bad setting is warned about and the command runs without it.
fn start_export() -> Option<OtlpExport> {
    let started = OtlpConfig::from_env(&EnvVars::from_process())
        .and_then(|c| c.map(|c| OtlpExport::start(&c)).transpose());
    match started {
        Ok(export) => export,
        Err(e) => {
            let _ = writeln!(
                std::io::stderr(),
                "memloop: warning: traces not exported: {e}"
            );
            None
        }
    }
}

/// stderr for log lines: each line passes [`memloop_mcp::loggable_text`] (credentials redacted,
/// control characters escaped) before it is written, whatever logged it.
struct LoggableStderr(std::io::Stderr);

impl std::io::Write for LoggableStderr {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let line = memloop_mcp::loggable_text(&String::from_utf8_lossy(buf));
        self.0.write_all(line.as_bytes())?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()
    }
}

fn run(cli: &Cli, export: Option<&OtlpExport>) -> ExitCode {
    let filter = tracing_subscriber::EnvFilter::try_from_env("MEMLOOP_LOG")
        // Warnings, and which recall a command runs (hybrid with which model, or BM25).
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn,memloop::recall=info"));
    // Whatever the level, no event that carries a request's payload (memory text) is logged.
    use tracing_subscriber::{Layer, layer::SubscriberExt, util::SubscriberInitExt};
    tracing_subscriber::registry()
        .with(
            tracing_subscriber::fmt::layer()
                .with_writer(|| LoggableStderr(std::io::stderr()))
                // Plain text: no escape sequence from memloop reaches a terminal (a memory's own
                // control characters are shown as symbols; so is the log's styling, by having
                // none).
                .with_ansi(false)
                .without_time()
                .with_filter(filter)
                .with_filter(tracing_subscriber::filter::filter_fn(memloop_mcp::loggable)),
        )
        .with(export.map(|e| e.layer()))
        .init();
    if let memloop_cli::args::Command::Mcp(args) = &cli.command {
        return serve_mcp(cli, args);
    }
    let (stdout, stdin) = (std::io::stdout(), std::io::stdin());
    let interactive = stdin.is_terminal();
    // Text from memories, transcripts and file names must not drive a terminal: shown there
    // with its control characters visible; piped output and JSON stay byte for byte.
    let visible_out = stdout.is_terminal() && !cli.json;
    let visible_err = std::io::stderr().is_terminal();
    // stderr stays unlocked: warnings are logged to it from the store's blocking threads, and a
    // lock held here for the whole run would make them wait forever.
    let (mut out, mut err, mut input): (Box<dyn Write>, Box<dyn Write>, _) = (
        terminal_or_raw(stdout.lock(), visible_out),
        terminal_or_raw(std::io::stderr(), visible_err),
        stdin.lock(),
    );
    let outcome = std::env::current_dir()
        .map_err(anyhow::Error::from)
        .and_then(|cwd| {
            let ctx = Context::new(cli, cwd, EnvVars::from_process());
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            let mut io = Io {
                out: &mut out,
                err: &mut err,
                input: &mut input,
                interactive,
            };
            runtime.block_on(memloop_cli::run(cli, &ctx, &mut io))
        });
    let _ = out.flush();
    match outcome {
        Ok(()) => ExitCode::from(Exit::Ok.code()),
        Err(e) if is_broken_pipe(&e) => ExitCode::from(Exit::Ok.code()),
        Err(e) => {
            let exit = exit_for(&e);
            let _ = writeln!(err, "memloop: error: {}", error_message(&e));
            ExitCode::from(exit.code())
        }
    }
}

/// `w` itself, or wrapped in [`Visible`] when it is bound for a terminal.
fn terminal_or_raw<'a>(w: impl Write + 'a, terminal: bool) -> Box<dyn Write + 'a> {
    if terminal {
        Box::new(Visible::new(w))
    } else {
        Box::new(w)
    }
}

/// `memloop mcp` owns stdin/stdout (the protocol stream), so it runs without the locked streams
/// of the other commands, on a multi-threaded runtime so concurrent requests overlap.
fn serve_mcp(cli: &memloop_cli::Cli, args: &memloop_cli::args::McpArgs) -> ExitCode {
    let outcome = std::env::current_dir()
        .map_err(anyhow::Error::from)
        .and_then(|cwd| {
            let ctx = Context::new(cli, cwd, EnvVars::from_process());
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()?;
            runtime.block_on(memloop_cli::mcp::run(args, &ctx))
        });
    match outcome {
        Ok(()) => ExitCode::from(Exit::Ok.code()),
        Err(e) => {
            let exit = exit_for(&e);
            let stderr = std::io::stderr();
            let terminal = stderr.is_terminal();
            let _ = writeln!(
                terminal_or_raw(stderr, terminal),
                "memloop: error: {}",
                error_message(&e)
            );
            ExitCode::from(exit.code())
        }
    }
}
