//! A loopback OTLP/HTTP receiver (feature `otlp`): what a collector is to an exporter, on a
//! thread and an ephemeral port, keeping every request it was sent, with the spans of the trace
//! requests decoded from OpenTelemetry's protobuf wire form.

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message as _;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex, PoisonError};

/// One request an [`OtlpReceiver`] was sent.
#[derive(Debug, Clone)]
pub struct OtlpRequest {
    /// Its path (`/v1/traces`, `/v1/metrics`).
    pub path: String,
    /// Its `content-type` header (`application/x-protobuf` for `http/protobuf`).
    pub content_type: Option<String>,
    /// Its body.
    pub body: Vec<u8>,
}

/// A loopback OTLP/HTTP receiver: every POST is answered `200 OK` and kept. Point an exporter
/// at [`url`](Self::url) (`OTEL_EXPORTER_OTLP_ENDPOINT`).
///
/// ```
/// let receiver = memloop_testkit::OtlpReceiver::start()?;
/// assert!(receiver.url.starts_with("http://127.0.0.1:"));
/// assert!(receiver.spans().is_empty());
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct OtlpReceiver {
    /// Its base URL (`http://127.0.0.1:<port>`): signals are posted under `/v1/`.
    pub url: String,
    received: Arc<Mutex<Vec<OtlpRequest>>>,
}

impl OtlpReceiver {
    /// Listen on a free loopback port, serving on a thread of its own.
    pub fn start() -> std::io::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let url = format!("http://{}", listener.local_addr()?);
        let received = Arc::new(Mutex::new(Vec::new()));
        let keep = received.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                let keep = keep.clone();
                // Each connection on a thread: an exporter keeps its connection open.
                std::thread::spawn(move || {
                    let _ = serve(stream, &keep);
                });
            }
        });
        Ok(Self { url, received })
    }

    /// Every request received so far, in order.
    pub fn requests(&self) -> Vec<OtlpRequest> {
        self.received
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The trace requests received so far (`/v1/traces`, protobuf), decoded; a body that does
    /// not decode is left out.
    pub fn trace_requests(&self) -> Vec<ExportTraceServiceRequest> {
        self.requests()
            .iter()
            .filter(|r| r.path == "/v1/traces")
            .filter_map(|r| ExportTraceServiceRequest::decode(r.body.as_slice()).ok())
            .collect()
    }

    /// Every span received so far, of every resource and scope.
    pub fn spans(&self) -> Vec<Span> {
        self.trace_requests()
            .into_iter()
            .flat_map(|r| r.resource_spans)
            .flat_map(|rs| rs.scope_spans)
            .flat_map(|ss| ss.spans)
            .collect()
    }
}

/// The value of `span`'s attribute `key` as text (numbers and booleans written out), if it has
/// one.
pub fn span_attr(span: &Span, key: &str) -> Option<String> {
    span.attributes
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| kv.value.as_ref()?.value.as_ref())
        .map(|v| match v {
            AnyValue::StringValue(s) => s.clone(),
            AnyValue::IntValue(i) => i.to_string(),
            AnyValue::BoolValue(b) => b.to_string(),
            AnyValue::DoubleValue(d) => d.to_string(),
            other => format!("{other:?}"),
        })
}

/// Serve the requests of one connection until it closes.
fn serve(stream: TcpStream, keep: &Mutex<Vec<OtlpRequest>>) -> std::io::Result<()> {
    let mut writer = stream.try_clone()?;
    let mut reader = BufReader::new(stream);
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 {
            return Ok(());
        }
        let path = line.split_whitespace().nth(1).unwrap_or("/").to_owned();
        let (mut length, mut content_type) = (0, None);
        loop {
            line.clear();
            if reader.read_line(&mut line)? == 0 || line == "\r\n" {
                break;
            }
            if let Some((name, value)) = line.split_once(':') {
                match name.trim().to_ascii_lowercase().as_str() {
                    "content-length" => length = value.trim().parse().unwrap_or(0),
                    "content-type" => content_type = Some(value.trim().to_owned()),
                    _ => {}
                }
            }
        }
        let mut body = vec![0; length];
        reader.read_exact(&mut body)?;
        keep.lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(OtlpRequest {
                path,
                content_type,
                body,
            });
        writer.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n")?;
    }
}
