//! Loopback JSON servers (feature `json-server`): a stand-in for an OpenAI-compatible endpoint
//! that answers from a closure, and an embeddings endpoint built on it.

use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};

/// A loopback HTTP server (a thread on an ephemeral port) that answers every POST with the JSON
/// `answer` returns for the request's JSON body (`200 OK`; a body that is not JSON gets
/// `400 Bad Request` and `answer` is not called). Returns `http://127.0.0.1:<port>`.
///
/// ```
/// use std::io::{Read, Write};
/// let url = memloop_testkit::json_server(|request| serde_json::json!({"echo": request["q"]}))?;
/// let mut stream = std::net::TcpStream::connect(url.trim_start_matches("http://"))?;
/// let body = r#"{"q": 7}"#;
/// write!(stream, "POST / HTTP/1.1\r\ncontent-length: {}\r\n\r\n{body}", body.len())?;
/// let mut answer = String::new();
/// stream.read_to_string(&mut answer)?;
/// assert!(answer.starts_with("HTTP/1.1 200 OK") && answer.ends_with(r#"{"echo":7}"#));
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn json_server(answer: impl Fn(Value) -> Value + Send + 'static) -> std::io::Result<String> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let url = format!("http://{}", listener.local_addr()?);
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { continue };
            // A connection that breaks off mid-request gets no answer; the next one is served.
            let _ = serve(stream, &answer);
        }
    });
    Ok(url)
}

/// One request on `stream`: read the head and the `content-length` bytes of body, answer.
fn serve(mut stream: TcpStream, answer: &impl Fn(Value) -> Value) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut length = 0;
    let mut line = String::new();
    while reader.read_line(&mut line)? > 0 && line != "\r\n" {
        if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
            length = v.trim().parse().unwrap_or(0);
        }
        line.clear();
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body)?;
    let (status, answer) = match serde_json::from_slice(&body) {
        Ok(request) => ("200 OK", answer(request).to_string()),
        Err(e) => (
            "400 Bad Request",
            json!({"error": {"message": format!("the body is not JSON: {e}")}}).to_string(),
        ),
    };
    write!(
        stream,
        "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{answer}",
        answer.len()
    )
}

/// A loopback OpenAI-compatible `/v1/embeddings` server in the documented wire shape whose
/// vector for each input text is `embed(text)` (an `input` that is not a list of strings gets
/// an `error` answer). Returns the base URL, with `/v1`.
///
/// ```
/// let url = memloop_testkit::embeddings_server(|text| vec![text.len() as f32, 1.0])?;
/// assert!(url.starts_with("http://127.0.0.1:") && url.ends_with("/v1"));
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn embeddings_server(
    embed: impl Fn(&str) -> Vec<f32> + Send + 'static,
) -> std::io::Result<String> {
    let url = json_server(move |request: Value| {
        let texts: Option<Vec<&str>> = request["input"]
            .as_array()
            .and_then(|input| input.iter().map(Value::as_str).collect());
        let Some(texts) = texts else {
            return json!({"error": {"message": "`input` is not a list of strings"}});
        };
        let data: Vec<Value> = texts
            .into_iter()
            .enumerate()
            .map(|(i, text)| json!({"object": "embedding", "index": i, "embedding": embed(text)}))
            .collect();
        json!({"object": "list", "data": data, "model": request["model"]})
    })?;
    Ok(format!("{url}/v1"))
}
