//! `--tune`: the lexical levers (BM25F field weights and saturation, then pseudo-relevance
//! feedback) chosen by coordinate descent on conversations 1–5 only, and every configuration
//! reported on 1–5 (tuning), 6–10 (held out) and all 10, on the three retrieval units of the
//! semantic table (plain observations, session summaries, dialog turns), flat and lifted.

use crate::{Conversation, Dir, Level, Tally, evaluate, write_dir};
use anyhow::Result;
use memloop_recall::Bm25Params;

/// Conversations the parameters are chosen on (1–5); 6–10 are only reported.
const TUNE: usize = 5;

/// One retrieval unit: which memory dir of a conversation (0 observations, 1 dialog turns),
/// and its flat and lifted levels.
pub(crate) struct Unit {
    pub(crate) name: &'static str,
    pub(crate) dir: usize,
    pub(crate) flat: Level,
    pub(crate) lifted: Level,
}

/// Plain observations, session summaries and dialog turns (also the units `--rerank` asks).
pub(crate) const UNITS: [Unit; 3] = [
    Unit {
        name: "observation",
        dir: 0,
        flat: Level::Observation,
        lifted: Level::ObservationLifted,
    },
    Unit {
        name: "session summary",
        dir: 0,
        flat: Level::Summary,
        lifted: Level::SummaryLifted,
    },
    Unit {
        name: "dialog turn",
        dir: 1,
        flat: Level::Observation,
        lifted: Level::ObservationLifted,
    },
];

struct Tuner<'a> {
    convs: &'a [Conversation],
    dirs: Vec<[Dir; 2]>,
}

/// R@5 of the six rows (3 units × flat, lifted) over a range of conversations.
type Rows = [f64; 6];

impl Tuner<'_> {
    async fn rows(&self, params: Bm25Params, range: std::ops::Range<usize>) -> Result<Rows> {
        let mut out = [0.0; 6];
        for (u, unit) in UNITS.iter().enumerate() {
            for (j, level) in [unit.flat, unit.lifted].into_iter().enumerate() {
                let p = Bm25Params {
                    dir_weight: if j == 0 { 0.0 } else { params.dir_weight },
                    ..params
                };
                let mut tally = Tally::default();
                for i in range.clone() {
                    evaluate(
                        "bm25",
                        p,
                        level,
                        &self.dirs[i][unit.dir],
                        &self.convs[i],
                        &mut tally,
                    )
                    .await?;
                }
                out[2 * u + j] = tally.recall(None).0;
            }
        }
        Ok(out)
    }

    /// The objective: mean R@5 of the six rows on conversations 1–5.
    async fn score(&self, params: Bm25Params) -> Result<f64> {
        let rows = self.rows(params, 0..TUNE.min(self.convs.len())).await?;
        Ok(rows.iter().sum::<f64>() / rows.len() as f64)
    }
}

type Setter = fn(&mut Bm25Params, f32);

/// A closure as a [`Setter`] (so that one table can hold several).
fn set(f: Setter) -> Setter {
    f
}

/// Coordinate descent over `grid` (two rounds), from `start`; prints every step.
async fn descend(
    tuner: &Tuner<'_>,
    start: Bm25Params,
    grid: &[(&str, Setter, &[f32])],
) -> Result<(Bm25Params, f64)> {
    let mut best = start;
    let mut best_score = tuner.score(best).await?;
    println!("| start | {best_score:.2} |");
    for round in 1..=2 {
        let before = best_score;
        for (name, set, values) in grid {
            for v in *values {
                let mut p = best;
                set(&mut p, *v);
                if p == best {
                    continue;
                }
                let s = tuner.score(p).await?;
                let mark = if s > best_score + 1e-9 {
                    " (better)"
                } else {
                    ""
                };
                println!("| round {round}: {name} = {v} | {s:.2}{mark} |");
                if s > best_score + 1e-9 {
                    best = p;
                    best_score = s;
                }
            }
        }
        if best_score <= before + 1e-9 {
            break;
        }
    }
    Ok((best, best_score))
}

fn describe(p: &Bm25Params) -> String {
    format!(
        "k1 {}, b {}, name {}, desc {}, body {}, bigram {}, coord {}, lift {}, feedback {} docs / {} words / {}",
        p.k1,
        p.b,
        p.name_weight,
        p.description_weight,
        p.body_weight,
        if p.bigrams { p.bigram_weight } else { 0.0 },
        p.coordination,
        p.dir_weight,
        p.feedback_docs,
        p.feedback_terms,
        p.feedback_weight
    )
}

/// Run the lever sweeps and print the split table.
pub async fn run(convs: &[Conversation], base: Bm25Params, feedback_only: bool) -> Result<()> {
    let mut dirs = Vec::new();
    for conv in convs {
        dirs.push([
            write_dir(&conv.observations, &conv.summaries).await?,
            write_dir(&conv.dialog, &conv.summaries).await?,
        ]);
    }
    let tuner = Tuner { convs, dirs };
    let base = crate::lifted(base);
    println!(
        "\nLexical levers, chosen on conversations 1–{TUNE} (objective: mean R@5 of the six rows below):\n"
    );
    println!("| step | mean R@5, conv 1–{TUNE} |\n|---|---|");
    let fields: Vec<(&str, Setter, &[f32])> = vec![
        (
            "name weight",
            set(|p, v| p.name_weight = v),
            &[0.0, 0.5, 1.0, 2.0][..],
        ),
        (
            "description weight",
            set(|p, v| p.description_weight = v),
            &[0.5, 1.0, 1.5, 2.0, 3.0][..],
        ),
        (
            "body weight",
            set(|p, v| p.body_weight = v),
            &[0.5, 1.0, 1.5, 2.0][..],
        ),
        ("k1", set(|p, v| p.k1 = v), &[0.6, 0.9, 1.2, 1.6][..]),
        ("b", set(|p, v| p.b = v), &[0.2, 0.4, 0.6, 0.75][..]),
        (
            "bigram weight",
            set(|p, v| p.bigram_weight = v),
            &[0.1, 0.3, 0.5][..],
        ),
        (
            "coordination",
            set(|p, v| p.coordination = v),
            &[0.0, 0.4, 0.8][..],
        ),
        ("lift", set(|p, v| p.dir_weight = v), &[0.3, 0.5, 0.7][..]),
    ];
    // `--tune feedback`: keep the BM25F parameters given (`--bm25`) and tune feedback only.
    let (bm25f, _) = if feedback_only {
        (base, 0.0)
    } else {
        descend(&tuner, base, &fields).await?
    };
    println!("\nBM25F chosen: {}\n", describe(&bm25f));
    let feedback: Vec<(&str, Setter, &[f32])> = vec![
        (
            "feedback docs",
            set(|p, v| p.feedback_docs = v as usize),
            &[1.0, 2.0, 3.0, 5.0][..],
        ),
        (
            "feedback weight",
            set(|p, v| p.feedback_weight = v),
            &[0.1, 0.2, 0.3, 0.5][..],
        ),
        (
            "feedback words",
            set(|p, v| p.feedback_terms = v as usize),
            &[5.0, 10.0, 20.0][..],
        ),
    ];
    let start = Bm25Params {
        feedback_docs: 3,
        ..bm25f
    };
    let (prf, _) = descend(&tuner, start, &feedback).await?;
    println!("\nFeedback chosen: {}\n", describe(&prf));

    let n = convs.len();
    let mut configs = vec![("BM25 (before: the defaults)", base)];
    if !feedback_only {
        configs.push(("BM25F tuned (lever 1)", bm25f));
    }
    configs.push(("BM25F tuned + feedback (lever 2)", prf));
    println!(
        "| configuration | unit | R@5 conv 1–{TUNE} (tuning) | R@5 conv {}–{n} (held out) | R@5 all {n} |",
        TUNE + 1
    );
    println!("|---|---|---|---|---|");
    for (name, p) in configs {
        let tuned = tuner.rows(p, 0..TUNE.min(n)).await?;
        let held = tuner.rows(p, TUNE.min(n)..n).await?;
        let all = tuner.rows(p, 0..n).await?;
        for (u, unit) in UNITS.iter().enumerate() {
            for (j, lift) in ["", " + lift"].into_iter().enumerate() {
                let r = 2 * u + j;
                println!(
                    "| {name}{lift} | {} | {:.1} | **{:.1}** | {:.1} |",
                    unit.name, tuned[r], held[r], all[r]
                );
            }
        }
    }
    Ok(())
}
