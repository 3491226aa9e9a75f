//! OpenAiEmbedder against a loopback server speaking the documented `/v1/embeddings` wire shape
//! (OpenAI; Ollama, vLLM and llama.cpp's `--embedding` server answer the same way): request
//! body, order by `index`, batching, normalisation, the dimension probe, and the chat providers'
//! error mapping and retries, and how the query and passage roles are told to the server
//! ([`EmbedRoles`]).
#![allow(clippy::unwrap_used)]

mod support;

use memloop_core::embed::{EmbedError, Embedder, dot};
use memloop_core::model::ModelError;
use memloop_providers::{EmbedRoles, OpenAiEmbedConfig, OpenAiEmbedder, ProviderError};
use serde_json::{Value, json};
use std::time::Duration;
use support::{Sequence, bodies, fast_retry, serve};
use wiremock::{MockServer, Request, Respond, ResponseTemplate};

/// Embeds each input as a 3-d vector derived from its length, answering in REVERSE index order
/// (the API does not promise order; clients must use `index`).
struct LengthEmbeddings;

impl Respond for LengthEmbeddings {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let body: Value = serde_json::from_slice(&request.body).unwrap();
        let inputs = body["input"].as_array().cloned().unwrap_or_default();
        let mut data: Vec<Value> = inputs
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let n = t.as_str().unwrap_or("").len() as f32;
                json!({"object": "embedding", "index": i, "embedding": [n, 1.0, 0.0]})
            })
            .collect();
        data.reverse();
        ResponseTemplate::new(200).set_body_json(json!({
            "object": "list",
            "data": data,
            "model": body["model"],
            "usage": {"prompt_tokens": 4, "total_tokens": 4},
        }))
    }
}

fn config(server: &MockServer) -> OpenAiEmbedConfig {
    let mut c = OpenAiEmbedConfig::new(format!("{}/v1", server.uri()), "nomic-embed-text")
        .with_api_key("sk-test");
    c.retry = fast_retry(3);
    c.timeout = Some(Duration::from_secs(5));
    c
}

fn strings(texts: &[&str]) -> Vec<String> {
    texts.iter().map(|t| (*t).to_owned()).collect()
}

#[tokio::test]
async fn connect_learns_the_dimension_and_vectors_come_back_in_input_order() {
    let server = MockServer::start().await;
    serve(&server, "/v1/embeddings", LengthEmbeddings).await;
    let e = OpenAiEmbedder::connect(config(&server)).await.unwrap();
    assert_eq!(e.dimension(), 3);
    assert!(
        e.model_id().contains("nomic-embed-text"),
        "{}",
        e.model_id()
    );

    let out = e.embed(&strings(&["a", "abcd"])).await.unwrap();
    // [1,1,0] and [4,1,0], normalised.
    assert!((out[0][0] - 1.0 / 2f32.sqrt()).abs() < 1e-6, "{out:?}");
    assert!((out[1][0] - 4.0 / 17f32.sqrt()).abs() < 1e-6, "{out:?}");
    assert!(out.iter().all(|v| (dot(v, v) - 1.0).abs() < 1e-5));

    let sent = bodies(&server).await;
    assert_eq!(sent.len(), 2, "probe + one batch");
    assert_eq!(
        sent[1],
        json!({"model": "nomic-embed-text", "input": ["a", "abcd"], "encoding_format": "float"})
    );
    let requests = server.received_requests().await.unwrap();
    assert_eq!(
        requests[1].headers.get("authorization").unwrap(),
        "Bearer sk-test"
    );
}

#[tokio::test]
async fn batches_follow_max_batch_and_empty_texts_are_not_sent() {
    let server = MockServer::start().await;
    serve(&server, "/v1/embeddings", LengthEmbeddings).await;
    let mut c = config(&server);
    c.max_batch = 2;
    c.dimensions = Some(3);
    let e: Box<dyn Embedder> = Box::new(OpenAiEmbedder::connect(c).await.unwrap());
    let out = e
        .embed_checked(&strings(&["a", "", "abc", "  ", "ab"]))
        .await
        .unwrap();
    assert_eq!(out.len(), 5);
    assert_eq!(out[1], vec![0.0; 3], "an empty text is a zero vector");
    assert_eq!(out[3], vec![0.0; 3]);
    let sent = bodies(&server).await;
    // No probe (dimension configured); chunks [a, ""], [abc, "  "], [ab].
    let inputs: Vec<Value> = sent.iter().map(|b| b["input"].clone()).collect();
    assert_eq!(inputs, vec![json!(["a"]), json!(["abc"]), json!(["ab"])]);
    assert!(sent.iter().all(|b| b["dimensions"] == 3));
}

#[tokio::test]
async fn failures_map_like_the_chat_providers() {
    let server = MockServer::start().await;
    serve(
        &server,
        "/v1/embeddings",
        Sequence::new(vec![
            ResponseTemplate::new(401)
                .set_body_json(json!({"error": {"message": "Incorrect API key provided"}})),
            ResponseTemplate::new(429).set_body_json(json!({"error": {"message": "slow down"}})),
            ResponseTemplate::new(200).set_body_json(json!({"data": [
                {"index": 0, "embedding": [0.0, 2.0]}
            ]})),
            ResponseTemplate::new(200).set_body_raw("<html>gateway</html>", "text/html"),
            ResponseTemplate::new(200).set_body_json(json!({"data": [
                {"index": 0, "embedding": [1.0, 0.0]},
                {"index": 0, "embedding": [1.0, 0.0]}
            ]})),
            ResponseTemplate::new(200).set_body_json(json!({"data": []})),
        ]),
    )
    .await;
    let mut c = config(&server);
    c.dimensions = Some(2);
    let e = OpenAiEmbedder::connect(c).await.unwrap();
    let one = strings(&["x"]);

    let err = e.embed(&one).await.unwrap_err();
    assert!(
        matches!(&err, EmbedError::Model(ModelError::Auth(m)) if m.contains("Incorrect API key")),
        "{err:?}"
    );
    // 429 is retried, then the vector is normalised.
    assert_eq!(e.embed(&one).await.unwrap(), vec![vec![0.0, 1.0]]);
    for _ in 0..3 {
        let err = e.embed(&one).await.unwrap_err();
        assert!(
            matches!(&err, EmbedError::Model(ModelError::InvalidResponse(_))),
            "{err:?}"
        );
    }
}

#[tokio::test]
async fn a_wrong_length_vector_is_caught_by_embed_checked() {
    let server = MockServer::start().await;
    serve(
        &server,
        "/v1/embeddings",
        ResponseTemplate::new(200).set_body_json(json!({"data": [
            {"index": 0, "embedding": [1.0, 0.0, 0.0, 0.0]}
        ]})),
    )
    .await;
    let mut c = config(&server);
    c.dimensions = Some(3);
    let e: Box<dyn Embedder> = Box::new(OpenAiEmbedder::connect(c).await.unwrap());
    let err = e.embed_checked(&strings(&["x"])).await.unwrap_err();
    assert!(matches!(err, EmbedError::Shape { .. }), "{err:?}");
}

#[tokio::test]
async fn connect_fails_fast_on_a_dead_endpoint() {
    let server = MockServer::start().await;
    serve(
        &server,
        "/v1/embeddings",
        ResponseTemplate::new(404).set_body_json(json!({"error": {"message": "model not found"}})),
    )
    .await;
    let err = OpenAiEmbedder::connect(config(&server)).await.unwrap_err();
    assert!(
        matches!(err, EmbedError::Model(ModelError::Http { status: 404, .. })),
        "{err:?}"
    );
}

#[tokio::test]
async fn an_e5_model_served_over_the_wire_gets_its_query_and_passage_prefixes() {
    let server = MockServer::start().await;
    serve(&server, "/v1/embeddings", LengthEmbeddings).await;
    let mut c = config(&server);
    c.dimensions = Some(3);
    let served: std::sync::Arc<dyn Embedder> =
        std::sync::Arc::new(OpenAiEmbedder::connect(c).await.unwrap());
    let e5 = memloop_core::embed::Prefixed::e5(served);
    let e: &dyn Embedder = &e5;
    e.embed_queries_checked(&strings(&["梅兰妮做什么工作？"]))
        .await
        .unwrap();
    e.embed_checked(&strings(&["Мелани работает медсестрой.", ""]))
        .await
        .unwrap();
    let inputs: Vec<Value> = bodies(&server)
        .await
        .into_iter()
        .map(|b| b["input"].clone())
        .collect();
    assert_eq!(
        inputs,
        vec![
            json!(["query: 梅兰妮做什么工作？"]),
            // The blank text is not sent (a zero vector), and not prefixed.
            json!(["passage: Мелани работает медсестрой."]),
        ]
    );
}

/// `EmbedRoles::InputType`: the dimension probe and `embed` carry the passage value,
/// `embed_queries` the query value; everything else is the plain request.
#[tokio::test]
async fn input_type_roles_tell_queries_from_passages() {
    for (roles, passage) in [
        (EmbedRoles::input_type(), "passage"),
        (EmbedRoles::input_type_with("query", "document"), "document"),
    ] {
        let server = MockServer::start().await;
        serve(&server, "/v1/embeddings", LengthEmbeddings).await;
        let c = config(&server).with_roles(roles);
        let e: Box<dyn Embedder> = Box::new(OpenAiEmbedder::connect(c).await.unwrap());
        assert_eq!(e.dimension(), 3);
        e.embed_checked(&strings(&["Melanie is a nurse.", ""]))
            .await
            .unwrap();
        e.embed_queries_checked(&strings(&["What does Melanie do?"]))
            .await
            .unwrap();
        assert_eq!(
            bodies(&server).await,
            vec![
                json!({"model": "nomic-embed-text", "input": ["dimension probe"],
                       "encoding_format": "float", "input_type": passage}),
                json!({"model": "nomic-embed-text", "input": ["Melanie is a nurse."],
                       "encoding_format": "float", "input_type": passage}),
                json!({"model": "nomic-embed-text", "input": ["What does Melanie do?"],
                       "encoding_format": "float", "input_type": "query"}),
            ]
        );
    }
}

/// `EmbedRoles::None` (the default): no `input_type`, and queries are sent exactly as passages.
#[tokio::test]
async fn without_roles_queries_and_passages_are_sent_alike() {
    let server = MockServer::start().await;
    serve(&server, "/v1/embeddings", LengthEmbeddings).await;
    let mut c = config(&server);
    c.dimensions = Some(3);
    assert_eq!(c.roles, EmbedRoles::None);
    let e = OpenAiEmbedder::connect(c).await.unwrap();
    let passage = e.embed(&strings(&["same text"])).await.unwrap();
    let query = e.embed_queries(&strings(&["same text"])).await.unwrap();
    assert_eq!(passage, query);
    let plain = json!({"model": "nomic-embed-text", "input": ["same text"],
                       "encoding_format": "float", "dimensions": 3});
    assert_eq!(bodies(&server).await, vec![plain.clone(), plain]);
}

/// `EmbedRoles::ModelPerRole`: each role's model name replaces `config.model` (which then
/// need not be set), with no `input_type`.
#[tokio::test]
async fn model_per_role_sends_each_roles_model_name() {
    let server = MockServer::start().await;
    serve(&server, "/v1/embeddings", LengthEmbeddings).await;
    let mut c = config(&server).with_roles(EmbedRoles::model_per_role("e5-query", "e5-passage"));
    c.model = String::new();
    let e = OpenAiEmbedder::connect(c).await.unwrap();
    e.embed(&strings(&["a passage"])).await.unwrap();
    e.embed_queries(&strings(&["a query"])).await.unwrap();
    assert_eq!(
        bodies(&server).await,
        vec![
            json!({"model": "e5-passage", "input": ["dimension probe"], "encoding_format": "float"}),
            json!({"model": "e5-passage", "input": ["a passage"], "encoding_format": "float"}),
            json!({"model": "e5-query", "input": ["a query"], "encoding_format": "float"}),
        ]
    );
}

/// Every role setting has its own model id (cached vectors are keyed by it); `None` keeps the
/// id memloop always used, so existing caches stay valid.
#[test]
fn the_role_setting_is_part_of_the_model_id() {
    let id = |roles: EmbedRoles| {
        let c = OpenAiEmbedConfig::new("http://127.0.0.1:8000/v1/", "e5").with_roles(roles);
        OpenAiEmbedder::with_dimension(c, 384)
            .unwrap()
            .model_id()
            .to_owned()
    };
    let none = id(EmbedRoles::None);
    assert_eq!(none, "openai:e5@http://127.0.0.1:8000/v1:384");
    let ids = [
        none,
        id(EmbedRoles::input_type()),
        id(EmbedRoles::input_type_with("query", "document")),
        id(EmbedRoles::input_type_with("passage", "query")),
        id(EmbedRoles::model_per_role("e5-query", "e5-passage")),
        id(EmbedRoles::model_per_role("e5-passage", "e5-query")),
        id(EmbedRoles::model_per_role("e5", "e5")),
    ];
    for (i, a) in ids.iter().enumerate() {
        for b in &ids[i + 1..] {
            assert_ne!(a, b);
        }
    }
    // The prefixes of `Prefixed` go on top of the roles'.
    let inner: std::sync::Arc<dyn Embedder> = std::sync::Arc::new(
        OpenAiEmbedder::with_dimension(
            OpenAiEmbedConfig::new("http://127.0.0.1:8000/v1", "e5")
                .with_roles(EmbedRoles::input_type()),
            384,
        )
        .unwrap(),
    );
    let prefixed = memloop_core::embed::Prefixed::e5(inner);
    assert!(
        prefixed.model_id().starts_with(&ids[1]),
        "{}",
        prefixed.model_id()
    );
}

/// A role value or role model name that is blank is a configuration error.
#[test]
fn blank_role_values_are_refused() {
    for roles in [
        EmbedRoles::input_type_with("query", " "),
        EmbedRoles::input_type_with("", "passage"),
        EmbedRoles::model_per_role("e5-query", ""),
        EmbedRoles::model_per_role("", "e5-passage"),
    ] {
        let c = OpenAiEmbedConfig::new("http://127.0.0.1:8000/v1", "e5").with_roles(roles);
        let err = OpenAiEmbedder::with_dimension(c, 384).unwrap_err();
        assert!(matches!(err, ProviderError::InvalidConfig(_)), "{err:?}");
    }
}
