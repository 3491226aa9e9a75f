//! Streaming latency benchmark: how long a text delta takes from the socket to the host.
//!
//! A loopback server speaks OpenAI-compatible chat completions and streams 2,000 `delta.content`
//! events, one write (and flush) each, 200 µs apart, recording when each was written to the
//! socket. The agent runs a real `OpenAiCompatModel` against it; the host reads events from a
//! `ChannelSink` on another task and records when each `TextDelta` arrives. Reported: p50, p99
//! and max of (host receive − socket write) over the 2,000 deltas.
//!
//! ```text
//! cargo run --release --example stream_latency --features providers
//! ```
#![allow(clippy::print_stdout, clippy::unwrap_used, clippy::expect_used)]

use memloop::core::Agent;
use memloop::core::events::{AgentEvent, ChannelSink};
use memloop::providers::{OpenAiCompatModel, OpenAiConfig, RetryPolicy};
use std::io::{Read, Write};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const DELTAS: usize = 2_000;

fn serve(listener: std::net::TcpListener, sent: Arc<Mutex<Vec<Option<Instant>>>>) {
    let (mut sock, _) = listener.accept().unwrap();
    sock.set_nodelay(true).unwrap();
    // Read the request head and body (content-length).
    let mut buf = Vec::new();
    let mut tmp = [0u8; 8192];
    let body_start = loop {
        let n = sock.read(&mut tmp).unwrap();
        buf.extend_from_slice(&tmp[..n]);
        if let Some(p) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break p + 4;
        }
    };
    let head = String::from_utf8_lossy(&buf[..body_start]).to_ascii_lowercase();
    let len: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .map(|v| v.trim().parse().unwrap())
        .unwrap_or(0);
    while buf.len() < body_start + len {
        let n = sock.read(&mut tmp).unwrap();
        buf.extend_from_slice(&tmp[..n]);
    }
    sock.write_all(
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n",
    )
    .unwrap();
    for i in 0..DELTAS {
        let chunk = format!(
            "data: {{\"id\":\"chatcmpl-bench\",\"object\":\"chat.completion.chunk\",\"model\":\"bench\",\
             \"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"<{i}>\"}},\"finish_reason\":null}}]}}\n\n"
        );
        let at = Instant::now();
        sock.write_all(chunk.as_bytes()).unwrap();
        sock.flush().unwrap();
        sent.lock().unwrap()[i] = Some(at);
        let until = Instant::now() + Duration::from_micros(200);
        while Instant::now() < until {
            std::hint::spin_loop();
        }
    }
    sock.write_all(
        b"data: {\"id\":\"chatcmpl-bench\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n\
          data: {\"id\":\"chatcmpl-bench\",\"choices\":[],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":2000}}\n\n\
          data: [DONE]\n\n",
    )
    .unwrap();
}

#[tokio::main]
async fn main() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let sent = Arc::new(Mutex::new(vec![None; DELTAS]));
    let server_sent = sent.clone();
    let server = std::thread::spawn(move || serve(listener, server_sent));

    let mut config = OpenAiConfig::new(format!("http://{addr}/v1"), "bench");
    config.retry = RetryPolicy::none();
    let model = OpenAiCompatModel::new(config).unwrap();
    let (sink, mut rx) = ChannelSink::bounded(DELTAS * 2);
    let host = tokio::spawn(async move {
        let mut received = vec![None; DELTAS];
        while let Some(e) = rx.recv().await {
            if let AgentEvent::TextDelta { text, .. } = &e.event {
                let now = Instant::now();
                // A read may carry several deltas; each event holds exactly one "<i>".
                for part in text.split('<').filter(|p| !p.is_empty()) {
                    let i: usize = part.trim_end_matches('>').parse().unwrap();
                    received[i] = Some(now);
                }
            }
        }
        received
    });
    let mut agent = Agent::builder(Arc::new(model))
        .events(Arc::new(sink))
        .build();
    let out = agent.run_turn("stream please").await.unwrap();
    drop(agent);
    let received = host.await.unwrap();
    server.join().unwrap();
    let sent = sent.lock().unwrap();
    let mut lat: Vec<Duration> = sent
        .iter()
        .zip(&received)
        .filter_map(|(s, r)| Some(r.as_ref()?.saturating_duration_since(*s.as_ref()?)))
        .collect();
    lat.sort();
    println!(
        "{} deltas streamed ({} chars of text); {} matched",
        DELTAS,
        out.text.len(),
        lat.len()
    );
    println!(
        "socket write → host event: p50 {:?}, p99 {:?}, max {:?}",
        memloop::testkit::percentile(&lat, 0.50),
        memloop::testkit::percentile(&lat, 0.99),
        lat.last().unwrap()
    );
}
