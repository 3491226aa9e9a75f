//! The `MEMORY.md` index: entry lines, edits that keep other lines, and the capped load.

use super::*;
use pretty_assertions::assert_eq;

#[test]
fn entry_line_forms() {
    let e = parse_entry_line("- [A title](dir/a.md) – en dash hook").unwrap();
    assert_eq!(
        (e.title.as_str(), e.file.as_str(), e.hook.as_str()),
        ("A title", "dir/a.md", "en dash hook")
    );
    let e = parse_entry_line("* [B](./b.md)").unwrap();
    assert_eq!((e.file.as_str(), e.hook.as_str()), ("b.md", ""));
    assert!(parse_entry_line("# Memory index").is_none());
    assert!(parse_entry_line("Prose with a [link](x.md) inside.").is_none());
}

#[test]
fn written_lines_stay_under_the_cap() {
    let line = format_entry_line(&"T".repeat(300), "file.md", &"h".repeat(300), 150);
    assert!(line.chars().count() <= 150, "{}", line.chars().count());
    assert!(line.contains("(file.md)"));
    let line = format_entry_line("Title", "f.md", "ünïcödé ".repeat(40).as_str(), 150);
    assert!(line.chars().count() <= 150 && line.ends_with('…'));
    assert_eq!(
        format_entry_line("Multi\nline", "f.md", "  spaced   hook ", 150),
        "- [Multi line](f.md) — spaced hook"
    );
}

#[test]
fn upsert_and_remove_keep_unrelated_lines_byte_exact() {
    let text = "# Index\n\nSome prose mentioning [a](a.md) in passing, with a very long explanation.\n- [A](a.md) — old hook\n- [B](b.md) — keep me  \n";
    let out = upsert_entry(text, "a.md", "- [A](a.md) — new hook");
    assert_eq!(out, text.replace("old hook", "new hook"));
    let out = upsert_entry(&out, "c.md", "- [C](c.md) — added");
    assert!(out.ends_with("- [B](b.md) — keep me  \n- [C](c.md) — added\n"));
    let (out, removed) = remove_entry(&out, "a.md");
    assert!(removed);
    assert_eq!(
        out,
        "# Index\n\nSome prose mentioning [a](a.md) in passing, with a very long explanation.\n- [B](b.md) — keep me  \n- [C](c.md) — added\n"
    );
    let (same, removed) = remove_entry(&out, "zzz.md");
    assert!(!removed);
    assert_eq!(same, out);
    // CRLF files get CRLF lines; a missing final newline is added before appending.
    assert_eq!(
        upsert_entry("- [A](a.md)\r\n", "b.md", "- [B](b.md)"),
        "- [A](a.md)\r\n- [B](b.md)\r\n"
    );
    assert_eq!(
        upsert_entry("- [A](a.md)", "b.md", "- [B](b.md)"),
        "- [A](a.md)\n- [B](b.md)\n"
    );
    // Duplicate lines for one file collapse into the replacement.
    assert_eq!(
        upsert_entry("- [A](a.md)\nx\n- [A2](a.md)\n", "a.md", "- [A](a.md) — h"),
        "- [A](a.md) — h\nx\n"
    );
    assert_eq!(parse_entries("- [A](a.md)\ntext\n- [B](b.md) — h").len(), 2);
}

#[test]
fn under_caps_loads_trimmed_without_warning() {
    let l = load_capped("\n\n- [A](a.md) — x\n\n", IndexCaps::default());
    assert_eq!(l.content, "- [A](a.md) — x");
    assert!(!l.truncated_by_lines && !l.truncated_by_bytes);
    assert_eq!((l.original_lines, l.original_bytes), (1, 17)); // the em dash is 3 UTF-8 bytes
    assert_eq!(load_capped("", IndexCaps::default()).content, "");
}

#[test]
fn line_cap_exact() {
    let lines: Vec<String> = (1..=201).map(|i| format!("l{i}")).collect();
    let l = load_capped(&lines.join("\n"), IndexCaps::default());
    let expected = format!(
        "{}\n\n> WARNING: MEMORY.md is 201 lines (limit 200), so only part of it was loaded. Keep index lines short and move details into topic files.",
        lines[..200].join("\n")
    );
    assert_eq!(l.content, expected);
    assert!(l.truncated_by_lines && !l.truncated_by_bytes);
    // Exactly 200 lines: no cap.
    assert!(!load_capped(&lines[..200].join("\n"), IndexCaps::default()).truncated_by_lines);
}

#[test]
fn byte_cap_cuts_at_last_newline_at_or_before_the_cap() {
    // 100 lines of 299 bytes + newline = 30,000 bytes; the newline at byte 24,999 is kept out.
    let line = "x".repeat(299);
    let text = vec![line.clone(); 100].join("\n");
    let l = load_capped(&text, IndexCaps::default());
    assert!(l.truncated_by_bytes && !l.truncated_by_lines);
    let kept = vec![line; 83].join("\n"); // 83*300-1 = 24,899 bytes
    assert_eq!(
        l.content,
        format!(
            "{kept}\n\n> WARNING: MEMORY.md is 29999 bytes (limit 25000), so only part of it was loaded. Keep index lines short and move details into topic files."
        )
    );
    // A newline exactly at byte 25,000 is "at or before": content is the first 25,000 bytes.
    let text = format!("{}\n{}", "a".repeat(25_000), "b".repeat(10));
    let l = load_capped(&text, IndexCaps::default());
    assert!(
        l.content.starts_with(&"a".repeat(25_000))
            && l.content[25_000..].starts_with("\n\n> WARNING")
    );
}

#[test]
fn byte_cap_hard_cut_on_char_boundary_and_both_caps() {
    // One huge line of 3-byte chars: no newline, hard cut at a char boundary <= 25,000.
    let text = "€".repeat(10_000);
    let l = load_capped(&text, IndexCaps::default());
    let body = l.content.split("\n\n> WARNING").next().unwrap();
    assert_eq!(body.len(), 24_999);
    assert!(l.content.contains("30000 bytes (limit 25000)"));
    // Both caps: 300 lines of 200 bytes.
    let text = vec!["y".repeat(199); 300].join("\n");
    let l = load_capped(&text, IndexCaps::default());
    assert!(l.truncated_by_lines && l.truncated_by_bytes);
    assert!(
        l.content
            .contains("is 300 lines (limit 200) and 59999 bytes (limit 25000), so only part")
    );
    let body = l.content.split("\n\n> WARNING").next().unwrap();
    assert_eq!(body.len(), 125 * 200 - 1);
}

/// Loading only the start of an index (the cap in bytes and a few more) gives the text loading
/// all of it gives, and says it was cut whenever it was.
#[test]
fn loading_the_start_loads_what_loading_all_loads() {
    let caps = IndexCaps {
        max_lines: 5,
        max_bytes: 60,
        max_entry_chars: 150,
    };
    let body = |text: &str| text.split("\n\n> WARNING").next().unwrap_or("").to_owned();
    let mut x: u64 = 11;
    for case in 0..3000 {
        x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
        let lines = (x >> 40) as usize % 12;
        let text: String = (0..lines)
            .map(|i| {
                let len = ((x >> (i % 30)) as usize) % 25;
                format!("{}{}\n", "é".repeat(i % 3), "l".repeat(len))
            })
            .collect();
        let text = format!("{}{text}", " ".repeat(case % 3));
        let all = load_capped(&text, caps);
        // What a reader takes: the leading whitespace, then the cap and 4 bytes, on a char
        // boundary; more follows when anything but whitespace is left.
        let lead = text.len() - text.trim_start().len();
        let mut end = (lead + caps.max_bytes + 4).min(text.len());
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        let rest = if text[end..].trim().is_empty() {
            IndexRest::Nothing
        } else {
            IndexRest::More
        };
        let start = if rest == IndexRest::Nothing {
            &text[..]
        } else {
            &text[..end]
        };
        let part = load_capped_start(start, rest, caps);
        assert_eq!(
            body(&part.content),
            body(&all.content),
            "case {case}: {text:?}"
        );
        assert_eq!(
            part.truncated_by_lines || part.truncated_by_bytes,
            all.truncated_by_lines || all.truncated_by_bytes,
            "case {case}: {text:?}"
        );
        // With the count of lines, the line cap is reported exactly.
        let counted = text
            .trim()
            .split('\n')
            .filter(|_| !text.trim().is_empty())
            .count();
        if rest != IndexRest::Nothing {
            let part = load_capped_start(start, IndexRest::Counted(counted), caps);
            assert_eq!(part.truncated_by_lines, all.truncated_by_lines, "{text:?}");
            assert_eq!(part.original_lines, all.original_lines, "{text:?}");
        }
    }
}
