//! Memory file frontmatter: parsing and writing.

use super::*;
use crate::types::{MemoryDoc, MemoryType};
use pretty_assertions::assert_eq;

#[test]
fn flat_frontmatter() {
    let p = parse_memory(
        "---\nname: Testing\ndescription: real db only\ntype: feedback\n---\n\nBody line\n",
    );
    let fm = p.frontmatter.unwrap();
    assert_eq!(fm.name.as_deref(), Some("Testing"));
    assert_eq!(fm.description.as_deref(), Some("real db only"));
    assert_eq!(fm.memory_type, Some(MemoryType::Feedback));
    assert!(!fm.repaired);
    assert_eq!(p.body, "Body line\n");
}

#[test]
fn every_type_and_unknown_types() {
    for t in MemoryType::ALL {
        let fm = parse_memory(&format!("---\ntype: {t}\n---\n"))
            .frontmatter
            .unwrap();
        assert_eq!(fm.memory_type, Some(t));
    }
    for t in [
        "Feedback",
        "USER",
        "notes",
        "1",
        "[user]",
        "",
        "feedback extra",
    ] {
        let text = format!("---\nname: n\ntype: {t}\n---\nb");
        let p = parse_memory(&text);
        let fm = p.frontmatter.unwrap();
        assert_eq!(fm.memory_type, None, "{t}");
        assert_eq!(
            fm.name.as_deref(),
            Some("n"),
            "file is kept, only the type is dropped"
        );
    }
}

#[test]
fn bom_and_crlf() {
    let text = "\u{feff}---\r\nname: N\r\ndescription: D\r\ntype: project\r\n---\r\n\r\nline1\r\nline2\r\n";
    let p = parse_memory(text);
    let fm = p.frontmatter.unwrap();
    assert_eq!(
        (fm.name.as_deref(), fm.description.as_deref()),
        (Some("N"), Some("D"))
    );
    assert_eq!(fm.memory_type, Some(MemoryType::Project));
    assert_eq!(p.body, "line1\r\nline2\r\n");
}

#[test]
fn nested_metadata_type_is_used_when_top_level_is_absent() {
    // The realmem style, including the trailing space after `metadata:`.
    let text = "---\nname: x\ndescription: d\nmetadata: \n  node_type: memory\n  type: reference\n---\n\nb\n";
    assert_eq!(
        parse_memory(text).frontmatter.unwrap().memory_type,
        Some(MemoryType::Reference)
    );
    // A present top-level type wins, even when unknown.
    let text = "---\ntype: weird\nmetadata:\n  type: user\n---\n";
    assert_eq!(parse_memory(text).frontmatter.unwrap().memory_type, None);
}

#[test]
fn malformed_yaml_is_repaired_by_quoting() {
    let text = "---\nname: deploy notes\ndescription: staging: use the blue cluster, not green\ntype: project\n---\nbody\n";
    let fm = parse_memory(text).frontmatter.unwrap();
    assert!(fm.repaired);
    assert_eq!(
        fm.description.as_deref(),
        Some("staging: use the blue cluster, not green")
    );
    assert_eq!(fm.memory_type, Some(MemoryType::Project));

    let text = "---\nname: gofmt\ndescription: `gofmt -l .` is a hard gate\nmetadata:\n  type: feedback\n---\n";
    let fm = parse_memory(text).frontmatter.unwrap();
    assert_eq!(
        fm.description.as_deref(),
        Some("`gofmt -l .` is a hard gate")
    );
    assert_eq!(fm.memory_type, Some(MemoryType::Feedback));
}

#[test]
fn hopeless_yaml_means_no_frontmatter() {
    let text = "---\nname: [unclosed\n  - : : {\n---\nbody\n";
    let p = parse_memory(text);
    assert_eq!(p.frontmatter, None);
    assert_eq!(p.body, text, "the whole text is the body");
}

#[test]
fn missing_or_unclosed_frontmatter() {
    assert_eq!(parse_memory("just text\n").frontmatter, None);
    assert_eq!(
        parse_memory("---\nname: x\nno closing fence\n").frontmatter,
        None
    );
    assert_eq!(
        parse_memory("\n---\nname: x\n---\n").frontmatter,
        None,
        "must start on line 1"
    );
    assert_eq!(parse_memory("").frontmatter, None);
    let p = parse_memory("---\n---\nbody");
    assert_eq!(p.frontmatter.unwrap().name, None);
    assert_eq!(p.body, "body");
}

#[test]
fn render_quotes_only_when_needed_and_round_trips() {
    let doc = MemoryDoc {
        name: "true".into(),
        description: "a: b # not a comment".into(),
        memory_type: None,
        body: "text".into(),
    };
    let text = render_memory(&doc);
    assert_eq!(
        text,
        "---\nname: \"true\"\ndescription: \"a: b # not a comment\"\n---\n\ntext\n"
    );
    let fm = parse_memory(&text).frontmatter.unwrap();
    assert_eq!(fm.name.as_deref(), Some("true"));
    assert_eq!(fm.description.as_deref(), Some("a: b # not a comment"));
    assert!(!fm.repaired);
}

#[test]
fn claude_code_layout_round_trips_byte_for_byte() {
    let files = [
        "---\nname: User role\ndescription: senior Go dev, new to React\ntype: user\n---\n\nThe user writes Go daily.\n",
        "---\nname: No mocks\ndescription: integration tests must hit a real database\ntype: feedback\n---\n\nRule.\n\n**Why:** mocks hid a migration bug.\n**How to apply:** any test touching storage.\n",
        "---\nname: Linear\ndescription: bugs are tracked in Linear project INGEST\ntype: reference\n---\n\nhttps://linear.app/acme/project/ingest\n",
    ];
    for f in files {
        let p = parse_memory(f);
        let fm = p.frontmatter.clone().unwrap();
        let doc = MemoryDoc {
            name: fm.name.unwrap(),
            description: fm.description.unwrap(),
            memory_type: fm.memory_type,
            body: p.body.to_owned(),
        };
        assert_eq!(render_memory(&doc), f);
    }
}

#[test]
fn append_keeps_foreign_frontmatter_and_line_endings() {
    let old = "---\r\nname: x\r\ndescription: d\r\nmetadata: \r\n  node_type: memory\r\n  type: project\r\n---\r\n\r\nfirst\r\n";
    let add = MemoryDoc {
        body: "second\n".into(),
        ..Default::default()
    };
    let out = append_to_existing(old, &add);
    assert_eq!(out, format!("{old}\r\nsecond\r\n"));

    let change = MemoryDoc {
        description: "new desc".into(),
        memory_type: Some(MemoryType::Feedback),
        body: "third".into(),
        ..Default::default()
    };
    let out = append_to_existing(old, &change);
    assert_eq!(
        out,
        "---\r\nname: x\r\ndescription: new desc\r\nmetadata: \r\n  node_type: memory\r\n  type: feedback\r\n---\r\n\r\nfirst\r\n\r\nthird\r\n"
    );
    let fm = parse_memory(&out).frontmatter.unwrap();
    assert_eq!(fm.memory_type, Some(MemoryType::Feedback));

    let out = append_to_existing(
        "plain text",
        &MemoryDoc {
            name: "n".into(),
            body: "more".into(),
            ..Default::default()
        },
    );
    assert_eq!(
        out,
        "---\nname: n\ndescription: \"\"\n---\n\nplain text\n\nmore\n"
    );
}

/// The fast answer never says "plain" where YAML would read the text back as something else:
/// over words, numbers, YAML's special words and every short mix of letters with punctuation,
/// each text `surely_plain` accepts is read back unchanged by the parser; and the common titles
/// and descriptions take the fast path.
#[test]
fn the_fast_plain_check_agrees_with_the_parser() {
    let mut texts: Vec<String> = [
        "Deploy pipeline",
        "load lc3x0f1e",
        "Use PostgreSQL 15",
        "why we chose option 4 (billing)",
        "true",
        "True",
        "FALSE",
        "yes",
        "No",
        "on",
        "Off",
        "y",
        "N",
        "null",
        "Null",
        "nan",
        "NaN",
        "inf",
        "Infinity",
        "none",
        "nil",
        "e3",
        "E5",
        "x1",
        "a:b",
        "a: b",
        "a:",
        "a #b",
        "a#b",
        "Zürich notes",
        "数据库 选择",
        "Ёлка",
        "한국어 메모",
        "a - b",
        "a -b",
        "a ? b",
        "a ?",
        "a|b",
        "a>b",
        "a<b",
        "a=b",
        "a~",
        "a^b",
        "a$b",
        "a/b",
        "a_b",
        "a.b.",
        "a,b",
        "a;b",
        "a+b",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let pieces = [
        "a", "Z", "é", "数", "1", "0x1", ".", ",", ";", ":", "-", "+", "=", "/", "(", ")", "?",
        "$", "^", "~", "<", ">", "_", " ", "#", "'", "\"", "[", "]", "{", "}", "&", "*", "!", "|",
        "%", "@", "`", "\\", "\t", ": ", " #", "true", "null", "inf", "nan", "e",
    ];
    for a in pieces {
        for b in pieces {
            for c in pieces {
                texts.push(format!("{a}{b}{c}"));
            }
        }
    }
    let (mut fast, mut quoted) = (0, 0);
    for t in &texts {
        let t = memloop_text::one_line(t);
        if surely_plain(&t) {
            fast += 1;
            assert!(
                reads_back_plain(&t),
                "`{t}` taken as plain, but YAML reads it otherwise"
            );
        }
        if surely_not_plain(&t) {
            quoted += 1;
            assert!(!surely_plain(&t), "`{t}` taken both ways");
            assert!(
                !reads_back_plain(&t),
                "`{t}` quoted without asking, but YAML reads it back plain"
            );
        }
    }
    assert!(fast > 1000, "the fast path takes the common texts ({fast})");
    assert!(
        quoted > 1000,
        "the fast quote takes the texts it names ({quoted})"
    );
    assert!(surely_not_plain(
        "Fact 7: the service on port 8007 is owned by team 7."
    ));
    for common in [
        "Deploy pipeline",
        "load lc3x0f1e",
        "why we chose option 4 (billing)",
    ] {
        assert!(surely_plain(common), "{common}");
    }
}
