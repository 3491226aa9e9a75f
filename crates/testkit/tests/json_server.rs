//! `json_server` answers each POST from its closure (400 for a body that is not JSON) and
//! `embeddings_server` in the OpenAI `/v1/embeddings` shape, vectors in input order.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use memloop_testkit::{embeddings_server, json_server};
use serde_json::{Value, json};
use std::io::{Read, Write};

/// The status line and the body of the answer to a POST of `body` to `url` (`http://host:port`,
/// any path after it).
fn post(url: &str, body: &str) -> (String, String) {
    let addr = url.trim_start_matches("http://");
    let addr = addr.split('/').next().unwrap();
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    write!(
        stream,
        "POST /v1/embeddings HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    let (head, body) = answer.split_once("\r\n\r\n").unwrap();
    (head.lines().next().unwrap().to_owned(), body.to_owned())
}

#[test]
fn every_post_is_answered_from_the_closure_and_bad_json_is_refused() {
    let url = json_server(|request| json!({"seen": request["n"]})).unwrap();
    for n in 0..3 {
        let (status, body) = post(&url, &json!({"n": n}).to_string());
        assert_eq!(status, "HTTP/1.1 200 OK");
        assert_eq!(
            serde_json::from_str::<Value>(&body).unwrap(),
            json!({"seen": n})
        );
    }
    let (status, body) = post(&url, "{not json");
    assert_eq!(status, "HTTP/1.1 400 Bad Request");
    assert!(body.contains("not JSON"), "{body}");
}

#[test]
fn embeddings_come_back_in_input_order_in_the_openai_shape() {
    let url = embeddings_server(|text| vec![text.len() as f32, 1.0]).unwrap();
    assert!(url.ends_with("/v1"), "{url}");
    let request = json!({"model": "m", "input": ["a", "abc", ""]});
    let (status, body) = post(&url, &request.to_string());
    assert_eq!(status, "HTTP/1.1 200 OK");
    let answer: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(answer["model"], "m");
    let data = answer["data"].as_array().unwrap();
    let got: Vec<(u64, Vec<f64>)> = data
        .iter()
        .map(|d| {
            let v = d["embedding"].as_array().unwrap();
            (
                d["index"].as_u64().unwrap(),
                v.iter().map(|x| x.as_f64().unwrap()).collect(),
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            (0, vec![1.0, 1.0]),
            (1, vec![3.0, 1.0]),
            (2, vec![0.0, 1.0])
        ]
    );
    let (_, body) = post(&url, &json!({"model": "m", "input": [1, 2]}).to_string());
    assert!(body.contains("not a list of strings"), "{body}");
}
