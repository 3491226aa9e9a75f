//! The loader on real public CLAUDE.md files (`../shared/data/claudemd/`, see its README).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

#[path = "support/mod.rs"]
mod support;

use memloop_instructions::{InstructionKind, InstructionLoader, LoadOptions, SkipReason};
use support::{claudemd_repo, entries, entry, isolated};

#[test]
fn delexplore_imports_in_lists_and_mid_sentence_and_no_decorator() {
    let Some(repo) = claudemd_repo("LeandroTollardo__DELexplore") else {
        return;
    };
    let loaded = InstructionLoader::new(isolated(&repo))
        .load(&repo, &LoadOptions::default())
        .unwrap();
    let report = &loaded.report;

    // The mid-sentence import (line 15) comes first and is loaded at depth 1.
    let mid = entry(report, "docs/references/delthit_output_formats.md");
    assert!(mid.is_loaded());
    assert_eq!(mid.depth, 1);
    assert_eq!(
        mid.reference.as_deref(),
        Some("docs/references/delthit_output_formats.md")
    );
    // Its second mention, in the import list, is a repeat.
    let repeats = entries(report, "docs/references/delthit_output_formats.md");
    assert_eq!(repeats.len(), 2);
    assert_eq!(repeats[1].skip_reason(), Some(&SkipReason::AlreadyLoaded));

    // The 14 list imports: 9 targets exist (one is the repeat above), 5 are missing.
    let imports: Vec<_> = report.entries.iter().filter(|e| e.depth == 1).collect();
    assert_eq!(imports.len(), 15, "{imports:#?}");
    let missing: Vec<_> = imports
        .iter()
        .filter(|e| e.skip_reason() == Some(&SkipReason::Missing))
        .map(|e| e.path.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        missing,
        [
            "kuai_2018_poisson_enrichment.md",
            "zhang_2023_bb_productivity.md",
            "wichert_2024_del_data_review.md",
            "komar_2020_deldenoiser.md",
            "poongavanam_2026_del_ml_generalizability.md",
        ]
    );
    let loaded_imports = loaded.files.iter().filter(|f| f.depth == 1).count();
    assert_eq!(loaded_imports, 9);
    assert!(
        loaded
            .files
            .iter()
            .all(|f| f.kind == InstructionKind::Project)
    );

    // `@pytest.mark.benchmark` is text, not an import: nothing about it in the report.
    assert!(loaded.files[0].content.contains("@pytest.mark.benchmark"));
    assert!(
        !report
            .entries
            .iter()
            .any(|e| e.path.to_string_lossy().contains("pytest")),
        "{report:#?}"
    );
    // Every loaded file is counted.
    assert!(report.loaded().all(|e| e.bytes > 0 && e.tokens > 0));
    assert_eq!(
        report.total_bytes,
        loaded
            .files
            .iter()
            .map(|f| f.content.len() as u64)
            .sum::<u64>()
    );
}

#[test]
fn hoodcat_nested_import_resolves_relative_to_the_importing_file() {
    let Some(repo) = claudemd_repo("Hoodcat2255__hoodcat-harness") else {
        return;
    };
    let loaded = InstructionLoader::new(isolated(&repo))
        .load(&repo, &LoadOptions::default())
        .unwrap();
    let report = &loaded.report;

    let harness = entry(report, ".claude/harness.md");
    assert!(harness.is_loaded());
    assert_eq!(harness.depth, 1);
    assert!(
        harness
            .imported_from
            .as_ref()
            .unwrap()
            .ends_with("CLAUDE.md")
    );

    // `@docs/research-...md` inside `.claude/harness.md` resolves to `.claude/docs/...`, which
    // does not exist: the loader reports it missing (the file exists only relative to the
    // repository root, and imports resolve relative to the including file).
    let nested = entry(
        report,
        "docs/research-claude-agent-skill-best-practices-antipatterns-20260212.md",
    );
    assert_eq!(nested.depth, 2);
    assert_eq!(nested.skip_reason(), Some(&SkipReason::Missing));
    assert!(nested.path.starts_with(repo.join(".claude/docs")));
    assert!(
        repo.join("docs/research-claude-agent-skill-best-practices-antipatterns-20260212.md")
            .is_file()
    );
    assert_eq!(loaded.files.len(), 2);
    // The human-readable report says so, nested under the importing file.
    let text = loaded.report.to_string();
    assert!(
        text.contains(
            "research-claude-agent-skill-best-practices-antipatterns-20260212.md (skipped: missing)"
        ),
        "{text}"
    );
    assert!(text.contains("2 loaded, 1 skipped"), "{text}");
    // The email addresses inside the research doc never matter: it is not loaded.
    assert!(report.skipped().count() == 1, "{report:#?}");
}
