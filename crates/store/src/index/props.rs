//! Property tests of the index edits and the capped load.

use super::*;
use proptest::prelude::*;

fn line() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z]{1,8}".prop_map(|f| format!("- [{f}]({f}.md) — hook for {f}")),
        "[ -~é€😀]{0,120}",
        Just(String::new()),
        Just("# Heading".to_owned()),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn upsert_then_remove_touches_only_that_file(lines in prop::collection::vec(line(), 0..40), file in "[a-z]{1,8}", hook in "[ -~]{0,200}") {
        let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
        let rel = format!("{file}.md");
        let entry = format_entry_line(&file, &rel, &hook, 150);
        prop_assert!(entry.chars().count() <= 150);
        let up = upsert_entry(&text, &rel, &entry);
        let for_file = |t: &str| parse_entries(t).into_iter().filter(|e| e.file == rel).count();
        prop_assert_eq!(for_file(&up), 1);
        let (removed, _) = remove_entry(&up, &rel);
        prop_assert_eq!(for_file(&removed), 0);
        // Every line not about `rel` survives both edits, in order, byte for byte.
        let others = |t: &str| t.lines().filter(|l| !parse_entries(l).iter().any(|e| e.file == rel)).map(str::to_owned).collect::<Vec<_>>();
        prop_assert_eq!(others(&removed), others(&text));
    }

    #[test]
    fn capped_load_respects_both_caps(lines in prop::collection::vec("[ -~é€😀]{0,400}", 0..300)) {
        let text = lines.join("\n");
        let l = load_capped(&text, IndexCaps::default());
        let body = l.content.split("\n\n> WARNING: MEMORY.md is ").next().unwrap();
        prop_assert!(body.len() <= 25_000);
        prop_assert!(body.split('\n').count() <= 200);
        prop_assert!(text.trim().starts_with(body));
        let warned = l.content.len() > body.len();
        prop_assert_eq!(warned, l.truncated_by_lines || l.truncated_by_bytes);
        if !warned {
            prop_assert_eq!(body, text.trim());
        }
    }
}
