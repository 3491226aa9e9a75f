//! Loading a model directory: every missing or malformed file is a `EmbedError::Load` naming it,
//! unsupported models are refused with the reason, and configuration changes change the model id.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

mod support;

use memloop_candle::CandleEmbedder;
use memloop_core::embed::{EmbedError, Embedder};
use std::path::Path;
use support::{copy_model, cosine, minilm_dir, references, write};

/// The load error's message, which must name `file`.
fn load_error(dir: &Path, file: &str) -> String {
    match CandleEmbedder::load(dir) {
        Err(EmbedError::Load(msg)) => {
            eprintln!("{msg}");
            assert!(msg.contains(file), "{file:?} not named in {msg:?}");
            msg
        }
        Err(other) => panic!("expected a load error naming {file}, got {other}"),
        Ok(_) => panic!("loaded a directory with a broken {file}"),
    }
}

#[test]
fn an_empty_or_absent_directory_names_modules_json() {
    let tmp = tempfile::tempdir().unwrap();
    load_error(tmp.path(), "modules.json");
    load_error(&tmp.path().join("absent"), "modules.json");
}

#[test]
fn malformed_modules_json_is_named() {
    let tmp = tempfile::tempdir().unwrap();
    write(tmp.path(), "modules.json", "[{\"idx\": 0,");
    let msg = load_error(tmp.path(), "modules.json");
    assert!(msg.contains("malformed JSON"), "{msg}");
    write(tmp.path(), "modules.json", r#"{"not": "a list"}"#);
    load_error(tmp.path(), "modules.json");
}

#[test]
fn every_missing_file_is_named() {
    let Some(model) = minilm_dir() else { return };
    for file in [
        "config.json",
        "tokenizer.json",
        "model.safetensors",
        "1_Pooling/config.json",
    ] {
        let copy = copy_model(&model);
        std::fs::remove_file(copy.path().join(file)).unwrap();
        load_error(copy.path(), file);
    }
}

#[test]
fn malformed_files_are_named() {
    let Some(model) = minilm_dir() else { return };
    for file in [
        "config.json",
        "tokenizer.json",
        "1_Pooling/config.json",
        "sentence_bert_config.json",
    ] {
        let copy = copy_model(&model);
        write(copy.path(), file, "{\"truncated");
        load_error(copy.path(), file);
    }
    // Well-formed JSON that is not what it should be.
    let copy = copy_model(&model);
    write(
        copy.path(),
        "config.json",
        r#"{"model_type": "bert", "hidden_size": "big"}"#,
    );
    load_error(copy.path(), "config.json");
    let copy = copy_model(&model);
    write(copy.path(), "tokenizer.json", r#"{"model": 3}"#);
    load_error(copy.path(), "tokenizer.json");
    let copy = copy_model(&model);
    write(
        copy.path(),
        "sentence_bert_config.json",
        r#"{"max_seq_length": "long"}"#,
    );
    load_error(copy.path(), "sentence_bert_config.json");
    let copy = copy_model(&model);
    write(
        copy.path(),
        "sentence_bert_config.json",
        r#"{"max_seq_length": 1}"#,
    );
    load_error(copy.path(), "sentence_bert_config.json");
}

#[test]
fn weights_that_are_not_safetensors_or_not_this_model_are_named() {
    let Some(model) = minilm_dir() else { return };
    let copy = copy_model(&model);
    let weights = copy.path().join("model.safetensors");
    std::fs::remove_file(&weights).unwrap();
    std::fs::write(&weights, b"not a safetensors file").unwrap();
    load_error(copy.path(), "model.safetensors");

    // The real weights under a config with another shape: a missing or misshapen tensor.
    let copy = copy_model(&model);
    let config = std::fs::read_to_string(copy.path().join("config.json")).unwrap();
    write(
        copy.path(),
        "config.json",
        &config.replace("\"num_hidden_layers\": 6", "\"num_hidden_layers\": 7"),
    );
    load_error(copy.path(), "model.safetensors");
}

#[test]
fn unsupported_models_are_refused_with_the_reason() {
    let Some(model) = minilm_dir() else { return };
    let copy = copy_model(&model);
    write(
        copy.path(),
        "1_Pooling/config.json",
        r#"{"embedding_dimension": 384, "pooling_mode": "lasttoken"}"#,
    );
    assert!(load_error(copy.path(), "1_Pooling/config.json").contains("lasttoken"));

    let copy = copy_model(&model);
    let modules = r#"[
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
        {"idx": 2, "name": "2", "path": "2_Dense", "type": "sentence_transformers.models.Dense"}
    ]"#;
    write(copy.path(), "modules.json", modules);
    assert!(load_error(copy.path(), "modules.json").contains("Dense"));

    let copy = copy_model(&model);
    let config = std::fs::read_to_string(copy.path().join("config.json")).unwrap();
    write(
        copy.path(),
        "config.json",
        &config.replace("\"model_type\": \"bert\"", "\"model_type\": \"t5\""),
    );
    assert!(load_error(copy.path(), "config.json").contains("t5"));

    let copy = copy_model(&model);
    write(
        copy.path(),
        "1_Pooling/config.json",
        r#"{"word_embedding_dimension": 768}"#,
    );
    assert!(load_error(copy.path(), "1_Pooling/config.json").contains("768"));
}

#[tokio::test]
async fn without_normalize_and_sentence_bert_config_vectors_are_still_unit_length() {
    let Some(model) = minilm_dir() else { return };
    let copy = copy_model(&model);
    let modules = r#"[
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}
    ]"#;
    write(copy.path(), "modules.json", modules);
    std::fs::remove_file(copy.path().join("sentence_bert_config.json")).unwrap();
    let embedder = CandleEmbedder::load(copy.path()).unwrap();
    let refs = references();
    let texts: Vec<String> = refs.iter().map(|r| r.text.clone()).collect();
    let vectors = embedder.embed(&texts).await.unwrap();
    for (r, v) in refs.iter().zip(&vectors) {
        let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-5, "norm {norm}");
        let cos = cosine(v, &r.vector);
        if r.word_pieces <= 256 {
            assert!(cos >= 0.999, "cosine {cos} for {:?}", r.text);
        } else {
            // max_seq_length defaults to 512: the text is no longer truncated at 256.
            assert!(cos < 0.9999, "cosine {cos}: still truncated at 256?");
        }
    }
}

#[test]
fn model_id_follows_what_decides_the_vectors() {
    let Some(model) = minilm_dir() else { return };
    let base = CandleEmbedder::load(&model).unwrap();
    let copy = copy_model(&model);
    let same = CandleEmbedder::load(copy.path()).unwrap();
    let hash = |e: &CandleEmbedder| e.model_id().rsplit(':').next().unwrap().to_owned();
    assert_eq!(hash(&base), hash(&same), "the same files give the same id");
    write(
        copy.path(),
        "sentence_bert_config.json",
        r#"{"max_seq_length": 128, "do_lower_case": false}"#,
    );
    let shorter = CandleEmbedder::load(copy.path()).unwrap();
    assert_ne!(hash(&base), hash(&shorter));
    write(
        copy.path(),
        "1_Pooling/config.json",
        r#"{"pooling_mode": "cls"}"#,
    );
    let cls = CandleEmbedder::load(copy.path()).unwrap();
    assert_ne!(hash(&shorter), hash(&cls));
}

#[tokio::test]
async fn other_pooling_modes_run() {
    let Some(model) = minilm_dir() else { return };
    let text = vec![references()[2].text.clone()];
    let mean = CandleEmbedder::load(&model)
        .unwrap()
        .embed(&text)
        .await
        .unwrap();
    for mode in ["cls", "max", "mean_sqrt_len_tokens"] {
        let copy = copy_model(&model);
        write(
            copy.path(),
            "1_Pooling/config.json",
            &format!(r#"{{"pooling_mode": "{mode}"}}"#),
        );
        let v = CandleEmbedder::load(copy.path())
            .unwrap()
            .embed(&text)
            .await
            .unwrap();
        let cos = cosine(&v[0], &mean[0]);
        if mode == "mean_sqrt_len_tokens" {
            // The same direction as the mean: only the length differs, and vectors are normalised.
            assert!(cos > 0.99999, "{mode}: {cos}");
        } else {
            assert!(cos < 0.999, "{mode} gave the mean's vector");
        }
    }
}
