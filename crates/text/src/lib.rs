//! # memloop-text
//!
//! The text functions every other memloop crate reads with, pure and without I/O:
//!
//! - the **analyzer** ([`Analyzer`], [`tokens`], [`normalize`], [`fold_accents`],
//!   [`detect_language`]): how text becomes search terms in every script, shared by the lexical
//!   selectors, the vector cache's text, transcript search and the PostgreSQL team search's query
//!   side, so a memory and a query always meet;
//! - **cutting** text ([`truncate_utf8`], [`one_line`], [`render_template`]): byte budgets that
//!   end on a char boundary, listings that cannot gain lines, prompt templates filled in one pass;
//! - **globs** ([`glob_to_regex`]): the one glob syntax of the glob tool and of conditional
//!   instruction rules;
//! - the **frontmatter** block of a Markdown file ([`frontmatter`]): memory files, instruction
//!   files and sub-agent definitions all start with one.
//!
//! ```
//! use memloop_text::{Analyzer, Language};
//! let analyzer = Analyzer::new(false).with_language(Some(Language::English));
//! assert_eq!(analyzer.unigrams("Deploying the services"), ["deploy", "servic"]);
//! ```
#![warn(missing_docs)]

mod analyzer;
mod cut;
pub mod frontmatter;
mod glob;

pub use analyzer::{
    Analyzer, Language, Script, Terms, UnknownLanguage, detect_language, fold_accents,
    fold_with_offsets, nfkc, normalize, tokens, words,
};
pub use cut::{one_line, render_template, truncate_utf8};
pub use glob::{GlobError, glob_to_regex};
