//! Turning the session notes into the compaction summary message.

use memloop_session_notes::sections;
use memloop_text::render_template;
use memloop_text::truncate_utf8;
use std::path::Path;

/// Wrapper of the notes in the summary message (variables `notes`, `truncationNote`).
pub const SUMMARY_TEMPLATE: &str = include_str!("../templates/session_notes_summary.md");
/// Appended when a section was cut (variable `notesPath`).
pub const TRUNCATION_NOTE: &str = include_str!("../templates/notes_truncated.md");
/// Marks the cut inside a section.
pub const SECTION_TRUNCATED: &str = "[... section truncated ...]";

/// Cut each section to about `max_chars` at a line boundary, marking the cut. Returns the text
/// and whether anything was cut.
pub fn truncate_sections(notes: &str, max_chars: usize) -> (String, bool) {
    let mut out = String::with_capacity(notes.len().min(max_chars * 12));
    let mut cut_any = false;
    for s in sections(notes) {
        if s.text.len() <= max_chars {
            out.push_str(s.text);
            continue;
        }
        cut_any = true;
        let mut used = 0;
        for line in s.text.split_inclusive('\n') {
            if used + line.len() > max_chars {
                if used == 0 {
                    out.push_str(truncate_utf8(line, max_chars));
                    out.push('\n');
                }
                break;
            }
            out.push_str(line);
            used += line.len();
        }
        if !out.ends_with('\n') {
            out.push('\n');
        }
        out.push_str(SECTION_TRUNCATED);
        out.push_str("\n\n");
    }
    (out, cut_any)
}

/// The text of the summary message for `notes` stored at `path`.
pub fn summary_text(notes: &str, path: &Path, max_section_chars: usize) -> String {
    let (body, cut) = truncate_sections(notes, max_section_chars);
    let note = if cut {
        render_template(
            TRUNCATION_NOTE,
            &[("notesPath", &path.display().to_string())],
        )
    } else {
        String::new()
    };
    render_template(
        SUMMARY_TEMPLATE,
        &[
            ("notes", body.trim_end()),
            ("truncationNote", note.trim_end()),
        ],
    )
    .trim_end()
    .to_owned()
}

#[cfg(test)]
mod tests {
    use super::truncate_sections;

    #[test]
    fn long_sections_are_cut_at_a_line_and_marked() {
        let notes = format!("# A\n_i_\n{}\n# B\n_i_\nshort\n", "line\n".repeat(100));
        let (out, cut) = truncate_sections(&notes, 50);
        assert!(cut);
        assert!(out.contains("[... section truncated ...]"));
        assert!(out.contains("# B\n_i_\nshort\n"));
    }
}
