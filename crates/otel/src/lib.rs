//! # memloop-otel
//!
//! Export the loop's spans and its GenAI client metrics ([`memloop_core::telemetry`]) over OTLP/HTTP to a collector or a tracing
//! backend (Arize Phoenix, Jaeger, Grafana Tempo, Langfuse, ...), configured by the standard
//! variables. Spans leave from the exporter's own background thread in batches, so a slow or
//! unreachable collector never holds a turn; [`OtlpExport::shutdown`] (or dropping the
//! export) flushes what is left.
//!
//! ```no_run
//! use memloop_host::env::EnvVars;
//! use memloop_otel::{OtlpConfig, OtlpExport};
//! use tracing_subscriber::layer::SubscriberExt;
//! use tracing_subscriber::util::SubscriberInitExt;
//!
//! let config = OtlpConfig::from_env(&EnvVars::from_process())?.expect("OTEL_EXPORTER_OTLP_ENDPOINT");
//! let export = OtlpExport::start(&config)?;
//! tracing_subscriber::registry().with(export.layer()).init();
//! // ... run agents ...
//! export.shutdown()?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![warn(missing_docs)]

use memloop_host::env::EnvVars;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{Protocol, WithExportConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::SdkTracerProvider;

/// `OTEL_EXPORTER_OTLP_ENDPOINT`: the collector's base URL (`/v1/traces` is appended).
pub const ENDPOINT_ENV: &str = "OTEL_EXPORTER_OTLP_ENDPOINT";
/// `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`: the full URL traces go to (wins over the base URL).
pub const TRACES_ENDPOINT_ENV: &str = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT";
/// `OTEL_EXPORTER_OTLP_METRICS_ENDPOINT`: the full URL metrics go to (wins over the base URL).
pub const METRICS_ENDPOINT_ENV: &str = "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT";
/// `OTEL_METRIC_EXPORT_INTERVAL`: milliseconds between metric exports (default 60,000).
pub const METRIC_EXPORT_INTERVAL_ENV: &str = "OTEL_METRIC_EXPORT_INTERVAL";
/// `OTEL_EXPORTER_OTLP_PROTOCOL`: `http/protobuf` (default) or `http/json`.
pub const PROTOCOL_ENV: &str = "OTEL_EXPORTER_OTLP_PROTOCOL";
/// `OTEL_SERVICE_NAME`: the `service.name` resource attribute (default `memloop`).
pub const SERVICE_NAME_ENV: &str = "OTEL_SERVICE_NAME";
/// `OTEL_RESOURCE_ATTRIBUTES`: `key=value` pairs, comma-separated, added to the resource.
pub const RESOURCE_ATTRIBUTES_ENV: &str = "OTEL_RESOURCE_ATTRIBUTES";

/// Where and how to export.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OtlpConfig {
    /// The URL spans are posted to (`http://127.0.0.1:6006/v1/traces`).
    pub traces_endpoint: String,
    /// The URL metrics are posted to (`http://127.0.0.1:6006/v1/metrics`); `None` exports no
    /// metrics (only `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` was set).
    pub metrics_endpoint: Option<String>,
    /// Time between metric exports (the last ones leave at shutdown).
    pub metric_interval: std::time::Duration,
    /// Protobuf (the default) or JSON bodies.
    pub json: bool,
    /// `service.name`.
    pub service_name: String,
    /// Other resource attributes.
    pub resource_attributes: Vec<(String, String)>,
}

/// Why the export could not start or finish.
#[derive(Debug, thiserror::Error)]
pub enum OtlpError {
    /// A variable holds something the export cannot use.
    #[error("{variable}: {reason}")]
    Config {
        /// The variable.
        variable: &'static str,
        /// What is wrong with it.
        reason: String,
    },
    /// The exporter could not be built or shut down.
    #[error("OTLP export: {0}")]
    Export(String),
}

impl OtlpConfig {
    /// Export to `endpoint` (a base URL; `/v1/traces` is appended) as `memloop`.
    pub fn new(endpoint: &str) -> Self {
        Self {
            traces_endpoint: traces_url(endpoint),
            metrics_endpoint: Some(signal_url(endpoint, "metrics")),
            metric_interval: DEFAULT_METRIC_INTERVAL,
            json: false,
            service_name: "memloop".into(),
            resource_attributes: Vec::new(),
        }
    }

    /// The configuration the standard variables give, or `None` when no endpoint is set
    /// (no export).
    ///
    /// ```
    /// use memloop_host::env::EnvVars;
    /// use memloop_otel::OtlpConfig;
    /// let env = EnvVars::from_pairs([
    ///     ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:6006"),
    ///     ("OTEL_SERVICE_NAME", "billing-agent"),
    ///     ("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=staging,team=payments"),
    /// ]);
    /// let c = OtlpConfig::from_env(&env).unwrap().unwrap();
    /// assert_eq!(c.traces_endpoint, "http://127.0.0.1:6006/v1/traces");
    /// assert_eq!(c.metrics_endpoint.as_deref(), Some("http://127.0.0.1:6006/v1/metrics"));
    /// assert_eq!(c.service_name, "billing-agent");
    /// assert_eq!(c.resource_attributes.len(), 2);
    /// assert!(OtlpConfig::from_env(&EnvVars::from_pairs::<&str, &str>([])).unwrap().is_none());
    /// ```
    pub fn from_env(env: &EnvVars) -> Result<Option<Self>, OtlpError> {
        let endpoint = match (env.get(TRACES_ENDPOINT_ENV), env.get(ENDPOINT_ENV)) {
            (Some(full), _) if !full.trim().is_empty() => full.trim().to_owned(),
            (_, Some(base)) if !base.trim().is_empty() => traces_url(base.trim()),
            _ => return Ok(None),
        };
        let metrics_endpoint = match (env.get(METRICS_ENDPOINT_ENV), env.get(ENDPOINT_ENV)) {
            (Some(full), _) if !full.trim().is_empty() => Some(full.trim().to_owned()),
            (_, Some(base)) if !base.trim().is_empty() => Some(signal_url(base.trim(), "metrics")),
            _ => None,
        };
        let metric_interval = match env.get(METRIC_EXPORT_INTERVAL_ENV).map(str::trim) {
            None | Some("") => DEFAULT_METRIC_INTERVAL,
            Some(ms) => match ms.parse::<u64>() {
                Ok(ms) if ms > 0 => std::time::Duration::from_millis(ms),
                _ => {
                    return Err(OtlpError::Config {
                        variable: METRIC_EXPORT_INTERVAL_ENV,
                        reason: format!("`{ms}` is not a positive number of milliseconds"),
                    });
                }
            },
        };
        let json = match env.get(PROTOCOL_ENV).map(str::trim) {
            None | Some("") | Some("http/protobuf") => false,
            Some("http/json") => true,
            Some(other) => {
                return Err(OtlpError::Config {
                    variable: PROTOCOL_ENV,
                    reason: format!("`{other}` is not supported; use http/protobuf or http/json"),
                });
            }
        };
        let mut resource_attributes = Vec::new();
        for pair in env
            .get(RESOURCE_ATTRIBUTES_ENV)
            .unwrap_or_default()
            .split(',')
            .map(str::trim)
            .filter(|p| !p.is_empty())
        {
            match pair.split_once('=') {
                Some((k, v)) if !k.trim().is_empty() => {
                    resource_attributes.push((k.trim().to_owned(), v.trim().to_owned()));
                }
                _ => {
                    return Err(OtlpError::Config {
                        variable: RESOURCE_ATTRIBUTES_ENV,
                        reason: format!("`{pair}` is not key=value"),
                    });
                }
            }
        }
        Ok(Some(Self {
            traces_endpoint: endpoint,
            metrics_endpoint,
            metric_interval,
            json,
            service_name: env
                .get(SERVICE_NAME_ENV)
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .unwrap_or("memloop")
                .to_owned(),
            resource_attributes,
        }))
    }
}

/// The metric export interval when `OTEL_METRIC_EXPORT_INTERVAL` names none (the standard's).
const DEFAULT_METRIC_INTERVAL: std::time::Duration = std::time::Duration::from_secs(60);

/// `base` with the traces path.
fn traces_url(base: &str) -> String {
    signal_url(base, "traces")
}

/// `base` with the path of `signal` (`traces`, `metrics`).
fn signal_url(base: &str, signal: &str) -> String {
    format!("{}/v1/{signal}", base.trim_end_matches('/'))
}

/// A running export: its tracing layer, and the flush at the end.
pub struct OtlpExport {
    provider: SdkTracerProvider,
    meters: Option<opentelemetry_sdk::metrics::SdkMeterProvider>,
}

impl std::fmt::Debug for OtlpExport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OtlpExport").finish_non_exhaustive()
    }
}

impl OtlpExport {
    /// Start exporting as `config` says (nothing is sent until spans close). With a metrics
    /// endpoint, the export's meter provider becomes the process's global one
    /// (`opentelemetry::global`), so instruments registered on it (the MCP server's metrics,
    /// with `memloop-mcp`'s `otel` feature) are exported too.
    pub fn start(config: &OtlpConfig) -> Result<Self, OtlpError> {
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_endpoint(config.traces_endpoint.clone())
            .with_protocol(match config.json {
                true => Protocol::HttpJson,
                false => Protocol::HttpBinary,
            })
            .build()
            .map_err(|e| OtlpError::Export(e.to_string()))?;
        let resource = Resource::builder_empty()
            .with_service_name(config.service_name.clone())
            .with_attributes(
                config
                    .resource_attributes
                    .iter()
                    .map(|(k, v)| opentelemetry::KeyValue::new(k.clone(), v.clone())),
            )
            .build();
        let provider = SdkTracerProvider::builder()
            .with_batch_exporter(exporter)
            .with_resource(resource.clone())
            .build();
        let meters = match &config.metrics_endpoint {
            None => None,
            Some(endpoint) => {
                let exporter = opentelemetry_otlp::MetricExporter::builder()
                    .with_http()
                    .with_endpoint(endpoint.clone())
                    .with_protocol(match config.json {
                        true => Protocol::HttpJson,
                        false => Protocol::HttpBinary,
                    })
                    .build()
                    .map_err(|e| OtlpError::Export(e.to_string()))?;
                let reader = opentelemetry_sdk::metrics::PeriodicReader::builder(exporter)
                    .with_interval(config.metric_interval)
                    .build();
                Some(
                    opentelemetry_sdk::metrics::SdkMeterProvider::builder()
                        .with_reader(reader)
                        .with_resource(resource)
                        .build(),
                )
            }
        };
        if let Some(meters) = &meters {
            // Libraries' own instruments (the MCP server's metrics) report through the process's
            // global meter provider: it is this export's.
            opentelemetry::global::set_meter_provider(meters.clone());
        }
        Ok(Self { provider, meters })
    }

    /// The layer that turns memloop's `tracing` spans into OpenTelemetry spans (their name
    /// from `otel.name`, their kind from `otel.kind`, every other field an attribute). Only
    /// spans of memloop's crates at `INFO` or above pass (the `DEBUG` ones, a store's
    /// `memory_write` or a provider's `model_stream`, are detail inside a `chat` or
    /// `execute_tool` span and cost a turn more than they tell): not those of the exporter's own
    /// HTTP client (which would feed on themselves), nor other libraries' (a transport's span may
    /// carry a request body),
    /// and no log events (a debug event may quote a message or a tool's input) except those of
    /// target `memloop::secrets`, which name the pattern of a refused credential (never the
    /// text): they become events of the span they happened in.
    ///
    /// With a metrics endpoint, the layer also turns the metric events of
    /// [`METRICS_TARGET`](memloop_core::telemetry::METRICS_TARGET) (and those alone) into the GenAI
    /// client metrics `gen_ai.client.operation.duration` and `gen_ai.client.token.usage`.
    pub fn layer<S>(&self) -> impl tracing_subscriber::Layer<S> + use<S>
    where
        S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
    {
        use tracing_subscriber::Layer as _;
        let spans = tracing_opentelemetry::layer()
            .with_tracer(self.provider.tracer("memloop"))
            .with_filter(tracing_subscriber::filter::filter_fn(|m| {
                (m.is_span()
                    && m.target().starts_with("memloop")
                    && *m.level() <= tracing::Level::INFO)
                    || (m.is_event() && m.target() == memloop_secrets::SECRET_REFUSED_TARGET)
            }));
        let metrics = self.meters.clone().map(|meters| {
            tracing_opentelemetry::MetricsLayer::new(meters).with_filter(
                tracing_subscriber::filter::filter_fn(|m| {
                    m.is_event() && m.target() == memloop_core::telemetry::METRICS_TARGET
                }),
            )
        });
        spans.and_then(metrics)
    }

    /// Send what is buffered and stop. An unreachable collector is reported, not waited for
    /// beyond the exporter's timeout.
    ///
    /// A collector that takes traces but not metrics (Arize Phoenix) is not an error: the
    /// metrics' failure is logged at debug level.
    pub fn shutdown(self) -> Result<(), OtlpError> {
        if let Some(meters) = &self.meters {
            if let Err(e) = meters.shutdown() {
                tracing::debug!(error = %e, "metrics not exported");
            }
        }
        self.provider
            .shutdown()
            .map_err(|e| OtlpError::Export(e.to_string()))
    }
}
