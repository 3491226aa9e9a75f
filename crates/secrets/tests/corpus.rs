//! The secret filter against a table of credential lines (every one refused, the error naming
//! the pattern and never the value, and redaction removing the value) and a table of harmless
//! lines that talk about passwords, tokens and secrets without giving one (every one accepted),
//! in English and in more than forty other languages; and the real memory dirs in
//! `../shared/data/realmem/`, none of whose files is refused.
//!
//! The lines are written in general shapes (a label with a qualifier in the language's own word
//! order, a separator or a copula, a value), not to fit the detector: the detector has one
//! structural rule, not a phrase per line.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    clippy::print_stderr
)]

use memloop_secrets::{SecretFilter, SecretFound, redact_secrets};
use std::collections::BTreeSet;

/// (line, the secret part that must never appear in the error)
const CREDENTIALS: &[(&str, &str)] = &[
    // The plain assignments that used to slip through.
    ("password = hunter", "hunter"),
    ("wifi password: letmein", "letmein"),
    ("password = x", "= x"),
    ("token=abc", "abc"),
    ("postgres://admin:S3cretPass@db/x", "S3cretPass"),
    // Assignments in many syntaxes.
    ("DB_PASSWORD=hunter2", "hunter2"),
    ("export GITHUB_TOKEN=abc123def", "abc123def"),
    (
        "export AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMIK7MDENG",
        "wJalrXUtnFEMIK7MDENG",
    ),
    (
        "password: \"correct horse battery staple\"",
        "correct horse",
    ),
    ("\"password\": \"hunter2\"", "hunter2"),
    ("{\"api_key\": \"k-12345\"}", "k-12345"),
    ("api_key = 'abcdef'", "abcdef"),
    ("apiKey: qwerty", "qwerty"),
    ("API key: zxcvbnm", "zxcvbnm"),
    ("client_secret=shhh", "shhh"),
    ("clientSecret: 'topsecret'", "topsecret"),
    ("access_token: tok", "tok"),
    ("refresh_token = r1", "r1"),
    ("auth_token:abcd", "abcd"),
    ("private_key = mykey", "mykey"),
    ("passphrase: opensesame", "opensesame"),
    ("passwd=root", "root"),
    ("pwd=admin", "admin"),
    ("DB_PASS=postgres", "postgres"),
    ("smtp.pass = mailpass", "mailpass"),
    ("credentials: bob:pa55", "pa55"),
    ("password := \"gopher\"", "gopher"),
    ("'password' => 'phpsecret'", "phpsecret"),
    ("$password = \"perlpass\";", "perlpass"),
    ("let token = \"rusty\";", "rusty"),
    ("const SECRET = 'jsvalue'", "jsvalue"),
    ("secret = 42", "42"),
    ("password = 123456", "123456"),
    ("my wifi password: Tr0ub4dor is the one", "Tr0ub4dor"),
    ("Password: letmein", "letmein"),
    ("router admin password=admin123", "admin123"),
    ("AccountKey=abcdEFGH1234==", "abcdEFGH1234"),
    ("Server=db;User Id=sa;Password=Passw0rd;", "Passw0rd"),
    ("Data Source=x;Pwd=odbcpw;", "odbcpw"),
    ("<password>xmlpass</password>", "xmlpass"),
    ("mysql --password=dbpass -u root", "dbpass"),
    ("curl --token abc123 https://api", "abc123"),
    ("login --password hunter2", "hunter2"),
    // Connection strings.
    ("mysql://root:toor@localhost:3306/app", "toor"),
    ("redis://:redispass@cache:6379/0", "redispass"),
    (
        "mongodb+srv://app:M0ngoPw@cluster0.example.net/db",
        "M0ngoPw",
    ),
    ("amqp://guest:guest2@rabbit/", "guest2"),
    ("https://deploy:ghpass@git.example.com/repo.git", "ghpass"),
    ("ftp://user:ftppw@files.example.com", "ftppw"),
    // Well-known token shapes.
    ("key AKIAIOSFODNN7EXAMPLE in use", "AKIAIOSFODNN7"),
    ("ghp_0123456789abcdefghijABCDEFGHIJ012345", "ghp_0123"),
    (
        "github_pat_11ABCDEFG0123456789_abcdefghijklmnop",
        "github_pat_11",
    ),
    ("glpat-abcdefghij0123456789", "glpat-abc"),
    (
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
        "eyJhbGci",
    ),
    ("xoxb-123456789012-abcdefghij", "xoxb-1234"),
    (
        "https://hooks.slack.com/services/T0001/B0001/abcdefXYZ",
        "abcdefXYZ",
    ),
    ("sk-ant-api03-abcdefghijklmnopqrstuvwxyz", "sk-ant-api03"),
    ("sk-proj-abcdefghijklmnopqrstuvwx", "sk-proj-abc"),
    ("sk_live_abcdefghijklmnop1234", "sk_live_abc"),
    ("AIzaSyA-abcdefghijklmnopqrstuvwxyz01234", "AIzaSyA"),
    ("npm_abcdefghijklmnopqrstuvwxyz0123456789", "npm_abc"),
    ("hf_abcdefghijklmnopqrstuvwxyzABCDEFGH", "hf_abc"),
    (
        "SG.abcdefghijklmnopqrstuv.abcdefghijklmnopqrstuvwxyz0123456789",
        "SG.abc",
    ),
    (
        "Authorization: Bearer abcdefghijklmnopqrstuvwxyz012345",
        "abcdefghijklmnop",
    ),
    ("Authorization: Basic dXNlcjpwYXNzd29yZA==", "dXNlcjpw"),
    // Private keys.
    ("-----BEGIN RSA PRIVATE KEY-----", "BEGIN RSA"),
    (
        "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXk\n",
        "b3BlbnNzaC1rZXk",
    ),
    ("-----BEGIN EC PRIVATE KEY-----", "BEGIN EC"),
    ("-----BEGIN PRIVATE KEY-----", "-----BEGIN PRIVATE"),
    ("-----BEGIN PGP PRIVATE KEY BLOCK-----", "PGP PRIVATE"),
    ("PuTTY-User-Key-File-3: ssh-ed25519", "ssh-ed25519"),
    // Prose forms and abbreviations of the label.
    ("the password is hunter2", "hunter2"),
    ("The staging password is S3cr3tPass2024.", "S3cr3tPass2024"),
    ("the password for staging is Tr0ub4dor&3", "Tr0ub4dor"),
    ("FYI the api key is k9x7Q2mZ", "k9x7Q2mZ"),
    ("the access token was 8f3a9c1e2b", "8f3a9c1e2b"),
    ("the passcode is 739184", "739184"),
    ("pw: hunter22", "hunter22"),
    ("admin pw = letmein", "letmein"),
    ("psw: qwerty99", "qwerty99"),
    ("passcode=4412", "4412"),
    // A label on one line, its value on the next.
    ("password:\nhunter2", "hunter2"),
    ("Wi-Fi password:\n  C0ffeeShop!", "C0ffeeShop"),
    ("api_key =\n'abcd1234efgh'", "abcd1234efgh"),
    // Client flags glued to their value, and password arguments.
    ("mysql -uroot -pS3cr3t mydb", "S3cr3t"),
    (
        "mysqldump -u backup -p'dump2024' shop > shop.sql",
        "dump2024",
    ),
    ("mariadb -h db -u app -pAppPw99", "AppPw99"),
    ("sshpass -p hunter2 ssh deploy@host", "hunter2"),
    ("redis-cli -h cache -a r3disPw ping", "r3disPw"),
    ("curl -u admin:adm1nPw https://api.internal/v1", "adm1nPw"),
    (
        "docker login -u bot -p dockerPw123 registry.local",
        "dockerPw123",
    ),
    ("ldapsearch -x -D cn=admin -w LdapPw1 -b dc=x", "LdapPw1"),
    ("smbclient //nas/share -U alice%SmbPw7", "SmbPw7"),
    // Fullwidth and other compatibility forms.
    ("ｐａｓｓｗｏｒｄ = hunter2", "hunter2"),
    ("ＰＡＳＳＷＯＲＤ：ｓｅｃｒｅｔ１２３", "ｓｅｃｒｅｔ"),
    ("ＡＰＩ＿ＫＥＹ＝ａｂｃｄｅｆ", "ａｂｃｄｅｆ"),
    // Vendor token shapes.
    (
        "dop_v1_0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
        "dop_v1_0123",
    ),
    ("shpat_0123456789abcdef0123456789abcdef", "shpat_0123"),
    ("key-0123456789abcdef0123456789abcdef", "key-0123456789"),
    (
        "bot 123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw1 for alerts",
        "AAHdqTcvCH1v",
    ),
    ("ya29.a0AfH6SMBxyzabcdefghijklmnop", "ya29.a0AfH6"),
    ("GOCSPX-abcdefghijklmnopqrstuvwx12", "GOCSPX-abc"),
    ("whsec_abcdefghijklmnopqrstuvwx1234", "whsec_abc"),
    ("xapp-1-A0123456789-0123456789012-abcdef", "xapp-1-A0123"),
    (
        "secret_abcdefghijklmnopqrstuvwxyz0123456789ABCDEFG",
        "secret_abcdefghij",
    ),
    (
        "lin_api_abcdefghijklmnopqrstuvwxyz0123456789ABCD",
        "lin_api_abc",
    ),
    ("hvs.CAESIabcdefghijklmnopqrstuvwxyz", "hvs.CAESI"),
    (
        "dp.pt.abcdefghijklmnopqrstuvwxyz0123456789ABCD",
        "dp.pt.abc",
    ),
    ("glsa_abcdefghijklmnopqrstuvwxyz012345_0a1b2c3d", "glsa_abc"),
    ("NRAK-ABCDEFGHIJKLMNOPQRSTUVWXYZ0", "NRAK-ABC"),
    (
        "PMAK-0123456789abcdef01234567-0123456789abcdef0123456789abcdef01",
        "PMAK-0123",
    ),
    (
        "AGE-SECRET-KEY-1QQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQ",
        "AGE-SECRET-KEY-1QQQ",
    ),
    (
        "gsk_abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMN",
        "gsk_abc",
    ),
    ("r8_abcdefghijklmnopqrstuvwxyz0123456789A", "r8_abc"),
    ("dapi0123456789abcdef0123456789abcdef", "dapi0123"),
    // A short label that is also a word, with a qualifier before its separator.
    ("pw for router → Qw7zLp2Vn9", "Qw7zLp2Vn9"),
    ("pass for the VPN: Zr8!kLm2Qx", "Zr8!kLm2Qx"),
    ("pwd of nas-01 -> h7Tq-29xLp!", "h7Tq-29xLp"),
    ("Pass (staging) = Vb3nQ8rT2z", "Vb3nQ8rT2z"),
];

/// Credential lines in other languages: Chinese, Japanese, Korean, Russian, Spanish, Portuguese,
/// German, French and Italian, then Ukrainian, Bulgarian, Serbian, Dutch, the Nordic languages,
/// Finnish, Estonian, Hungarian, Turkish, the West and South Slavic languages, Lithuanian,
/// Romanian, Indonesian, Malay, Vietnamese, Greek, Arabic, Persian, Urdu, Hebrew, Hindi, Bengali
/// and Thai: (line, the secret part).
const CREDENTIALS_OTHER_LANGUAGES: &[(&str, &str)] = &[
    // Chinese
    ("生产数据库密码是 S3cr3tPass2024", "S3cr3tPass2024"),
    ("密码：hunter2", "hunter2"),
    ("数据库密码: Pg2024!prod", "Pg2024!prod"),
    ("服务器的密码为 Xk93mq2z", "Xk93mq2z"),
    ("API密钥=sk9f8e7d6c5b", "sk9f8e7d6c5b"),
    ("访问令牌：tok_8a7b6c5d4e", "tok_8a7b6c5d4e"),
    ("Wi-Fi 密码是 coffee2024", "coffee2024"),
    ("口令: abc123xyz", "abc123xyz"),
    ("密碼：Taipei101!", "Taipei101"),
    ("密码：\nQwerty!234", "Qwerty!234"),
    ("秘钥 = 7f3k9q2m1x", "7f3k9q2m1x"),
    // Japanese
    ("パスワード: hunter2", "hunter2"),
    ("パスワードは Tokyo2024! です", "Tokyo2024"),
    ("本番DBのパスワードはP4ssw0rdJPです", "P4ssw0rdJP"),
    ("APIキー：abcd1234efgh", "abcd1234efgh"),
    ("アクセストークン = at_9f8e7d6c", "at_9f8e7d6c"),
    ("暗証番号: 482913", "482913"),
    ("トークン: ya29x8c7v6b5", "ya29x8c7v6b5"),
    ("パスワード：\nSakura#88", "Sakura#88"),
    // Korean
    ("비밀번호: hunter2", "hunter2"),
    ("비밀번호는 Seoul2024! 입니다", "Seoul2024"),
    ("DB 비밀번호는 Kimchi99", "Kimchi99"),
    ("API 키: kr8s7d6f5g4h", "kr8s7d6f5g4h"),
    ("패스워드 = Pa55word", "Pa55word"),
    ("토큰: tk_1a2b3c4d5e", "tk_1a2b3c4d5e"),
    ("암호: Hangul#123", "Hangul#123"),
    ("비번은 qwer1234", "qwer1234"),
    // Russian
    ("Пароль: hunter2", "hunter2"),
    ("пароль от базы: Qwerty123", "Qwerty123"),
    ("Пароль — Moskva2024!", "Moskva2024"),
    ("токен = ghx7Kp2Lm9", "ghx7Kp2Lm9"),
    ("ключ API: 9f8e7d6c5b4a", "9f8e7d6c5b4a"),
    ("секретный ключ: s3kr3tKey", "s3kr3tKey"),
    ("пароль для сервера: Serv3r!pw", "Serv3r!pw"),
    // Spanish
    ("contraseña = hunter2", "hunter2"),
    ("La contraseña es Madrid2024!", "Madrid2024"),
    ("contraseña de la base de datos: Bd#2024x", "Bd#2024x"),
    ("clave secreta: cl4v3S3cr3ta", "cl4v3S3cr3ta"),
    ("clave de API = es_9a8b7c6d", "es_9a8b7c6d"),
    ("Contraseña del wifi: cafe2024", "cafe2024"),
    // Portuguese
    ("senha: hunter2", "hunter2"),
    ("A senha é Lisboa2024!", "Lisboa2024"),
    ("senha do banco = Banc0#pw", "Banc0#pw"),
    ("chave de API: pt7h6g5f4d3s", "pt7h6g5f4d3s"),
    ("chave secreta = Ch4v3S3gr3d0", "Ch4v3S3gr3d0"),
    // German
    ("Passwort: hunter2", "hunter2"),
    ("Das Passwort ist Berlin2024!", "Berlin2024"),
    ("Kennwort = Geh3im!99", "Geh3im!99"),
    ("Passwort für den Server: Srv#2024de", "Srv#2024de"),
    ("API-Schlüssel: de8a7b6c5d4e", "de8a7b6c5d4e"),
    ("Das WLAN-Passwort lautet Kaffee2024", "Kaffee2024"),
    // French
    ("mot de passe : hunter2", "hunter2"),
    ("Le mot de passe est Paris2024!", "Paris2024"),
    ("mot de passe du serveur = S3rv3ur!", "S3rv3ur"),
    ("clé API : fr9e8d7c6b5a", "fr9e8d7c6b5a"),
    ("jeton: jt_5f4e3d2c1b", "jt_5f4e3d2c1b"),
    ("mdp: Baguette42", "Baguette42"),
    ("clé secrète = cl3S3cr3t3", "cl3S3cr3t3"),
    // Italian
    ("password: ciao2024", "ciao2024"),
    ("La password è Roma2024!", "Roma2024"),
    ("parola d'ordine: Pizza#88", "Pizza#88"),
    ("chiave API = it6g5f4e3d2c", "it6g5f4e3d2c"),
    ("chiave segreta: Ch1av3Segreta", "Ch1av3Segreta"),
    ("codice segreto: cs_7h6g5f4e", "cs_7h6g5f4e"),
    // Ukrainian, Bulgarian, Serbian
    ("Пароль до бази: Kyiv2024!", "Kyiv2024"),
    ("ключ доступу: ua7f6e5d4c", "ua7f6e5d4c"),
    ("парола: Sofia#2024", "Sofia#2024"),
    ("Паролата е Plovdiv2024!", "Plovdiv2024"),
    ("лозинка: Beograd#99", "Beograd#99"),
    // Dutch, Swedish, Norwegian, Danish
    ("wachtwoord: Amst3rdam!", "Amst3rdam"),
    ("Het wachtwoord is Utrecht2024", "Utrecht2024"),
    ("wachtwoord van de server = Srv!nl2024", "Srv!nl2024"),
    ("lösenord: Stockholm#1", "Stockholm#1"),
    ("Lösenordet är Malmo2024!", "Malmo2024"),
    ("passord: Oslo2024!", "Oslo2024"),
    ("Passordet er Bergen#77", "Bergen#77"),
    ("adgangskode: Kbh2024!x", "Kbh2024!x"),
    ("Adgangskoden er Aarhus99!", "Aarhus99"),
    // Finnish, Estonian, Hungarian
    ("salasana: Helsinki#24", "Helsinki#24"),
    ("Tietokannan salasana: Tku2024pw", "Tku2024pw"),
    ("parool: Tallinn2024!", "Tallinn2024"),
    ("jelszó: Budapest#2024", "Budapest#2024"),
    ("A jelszava: Debrecen99", "Debrecen99"),
    // Turkish
    ("Şifre: Istanbul2024!", "Istanbul2024"),
    ("veritabanı şifresi: Ankara#06", "Ankara#06"),
    // Polish, Czech, Slovak, Croatian, Slovenian, Lithuanian, Romanian
    ("hasło: Warszawa2024!", "Warszawa2024"),
    ("Hasło do bazy: Krk#2024pl", "Krk#2024pl"),
    ("Hasło jest Gdansk99!", "Gdansk99"),
    ("heslo: Praha2024!", "Praha2024"),
    ("Heslo je Brno#2024", "Brno#2024"),
    ("Heslo: Kosice2024!", "Kosice2024"),
    ("lozinka: Zagreb2024!", "Zagreb2024"),
    ("Lozinka je Split#2024", "Split#2024"),
    ("geslo: Ljubljana#1", "Ljubljana#1"),
    ("slaptažodis: Vilnius2024!", "Vilnius2024"),
    ("parolă: Bucuresti#24", "Bucuresti#24"),
    ("Parola de acces este Cluj2024!", "Cluj2024"),
    // Indonesian, Malay, Vietnamese
    ("kata sandi: Jakarta2024!", "Jakarta2024"),
    ("Kata sandinya adalah Bandung#88", "Bandung#88"),
    ("kata laluan: KualaLumpur#1", "KualaLumpur#1"),
    ("mật khẩu: HaNoi2024!", "HaNoi2024"),
    ("Mật khẩu là Saigon#2024", "Saigon#2024"),
    // Greek
    ("κωδικός πρόσβασης: Athina2024!", "Athina2024"),
    ("Ο κωδικός πρόσβασης είναι Thessaloniki#1", "Thessaloniki#1"),
    // Arabic, Persian, Urdu
    ("كلمة المرور: Riyadh2024!", "Riyadh2024"),
    ("كلمة السر هي Cairo#2024", "Cairo#2024"),
    ("وكلمة المرور: Dubai99!x", "Dubai99!x"),
    ("رمز عبور: Tehran#1402", "Tehran#1402"),
    ("پاس ورڈ: Lahore2024!", "Lahore2024"),
    // Hebrew
    ("סיסמה: TelAviv2024!", "TelAviv2024"),
    ("הסיסמה היא Haifa#2024", "Haifa#2024"),
    // Hindi, Bengali, Thai
    ("पासवर्ड: Dilli2024!", "Dilli2024"),
    ("सर्वर का पासवर्ड = Mumbai#99", "Mumbai#99"),
    ("পাসওয়ার্ড: Dhaka#2024", "Dhaka#2024"),
    ("รหัสผ่าน: Bangkok2024!", "Bangkok2024"),
    ("รหัสผ่านคือ Siam#2024", "Siam#2024"),
];

const HARMLESS: &[&str] = &[
    "Run the tests from pwd: /src/app",
    "the user forgot the password reset flow",
    "Passwords are stored in 1Password; never paste them here.",
    "secret: rotation happens monthly",
    "token limits: keep prompts short",
    "max_tokens: 256 for the selector",
    "password = os.environ(\"DB_PASS\")",
    "api_key: ${ANTHROPIC_API_KEY}",
    "token=<redacted>",
    "the JWT expiry bug was in auth.rs",
    "type: feedback",
    "Password resets go through the admin console.",
    "The API token is read from the ANTHROPIC_API_KEY environment variable.",
    "Never commit secrets; use the vault instead.",
    "Tokens expire after one hour, so refresh them before long jobs.",
    "The password policy requires 12 characters.",
    "We rotate the signing secret every quarter.",
    "password: see the team vault entry for staging",
    "Secret: never store credentials in memory files",
    "token: the one from the CI settings page, not a personal one",
    "api key: ask the platform team for one",
    "require_password = true",
    "use_token: false",
    "password = $DB_PASSWORD",
    "password: ${{ secrets.DB_PASSWORD }}",
    "token = {{ vault_token }}",
    "api_key = process.env.API_KEY",
    "api_key = os.environ[\"API_KEY\"]",
    "SECRET_KEY = env(\"DJANGO_SECRET\")",
    "password=****",
    "password: xxxxxx",
    "token = <your token here>",
    "secret = %s",
    "token_path: /etc/app/token",
    "password_file = ~/.config/app/pass",
    "The database url is postgres://localhost/app (no credentials in it).",
    "Connect with postgres://app@db/x and the password from the vault.",
    "Clone https://github.com/acme/app.git to get started.",
    "input_tokens=1200 output_tokens=300 per request",
    "token_count = 4096",
    "The tokenizer splits on whitespace.",
    "Use the --password-file flag instead of --password.",
    "The bypass: skip the cache when debugging",
    "Compass: north is up on the map",
    "User prefers passwordless login via passkeys.",
    "The secret sauce is good tests.",
    "Don't log the auth token in error messages.",
    "The CSRF token is checked in middleware.rs.",
    "An API key is needed for the geocoding service; it lives in the vault.",
    "The password field must be masked in the UI.",
    "Bearer tokens go in the Authorization header.",
    "Private keys stay on the build machine, never in the repo.",
    "Rotate credentials after an incident.",
    "secrets.toml is git-ignored.",
    "The token bucket rate limiter allows 10 req/s.",
    "GitHub tokens start with ghp_ and are refused by the filter.",
    "AWS keys start with AKIA.",
    "Keep the JWT secret out of the frontend bundle.",
    "password reset emails are sent by the notifier service",
    "Ask before changing the secret manager configuration.",
    "The pass rate of the test suite is 98%.",
    "token: a unit of text the model reads",
    "the password policy requires 12 characters",
    "The password is stored in the vault, not here.",
    "the password is correct but the account is locked",
    "The token is JWT-based and expires hourly.",
    "the password is SHA256-hashed before storage",
    "the api key is in 1Password under Staging",
    "The secret is good tests and small commits.",
    "password: at least 12 characters",
    "Password policy: 12 characters minimum",
    "the passcode is the one from the SMS",
    "Password:\nSee the team vault.",
    "Passwords:\n- never commit them",
    "Token:\n${GITHUB_TOKEN}",
    "Run mysql -u root -p and type the password at the prompt.",
    "mysql -u app -p shop_db",
    "curl -u \"$USER:$PASS\" https://api.internal",
    "redis-cli -a $REDIS_PASSWORD ping",
    "sshpass -p \"$SSH_PASS\" ssh deploy@host",
    "docker login -u bot -p $DOCKER_TOKEN",
    "Use `mysql -p` so the password is not in the shell history.",
    "ｔｈｅ ｐａｓｓｗｏｒｄ ｒｅｓｅｔ ｆｌｏｗ",
    "ＡＰＩ＿ＫＥＹ＝＄｛ＡＰＩ＿ＫＥＹ｝",
    "The key-value store is Redis.",
    "Telegram alerts go to the #ops chat.",
    "The webhook secret is rotated by the deploy job.",
    "The Vault token is issued by the CI role.",
    "The PIN is 4 digits long.",
    "our pw policy: no reuse of the last 5",
    "The token was revoked after the incident.",
    "Credentials are in the team vault; ask Maria.",
    // A short label that is also a word, with a qualifier, and no random value after it.
    "pass rate for the nightly suite: 98.5%",
    "pw reset flow → see the runbook",
    "pass the build id to: deploy-service-v2",
    "pass through to the backend -> gateway v2",
    "pass 2 of the migration: backfill the search column",
    "pw for the router: ask Maria, it is in the vault",
];

/// Harmless lines in the same languages: they talk about passwords, keys and tokens.
const HARMLESS_OTHER_LANGUAGES: &[&str] = &[
    // Chinese
    "密码学课程",
    "密码学是计算机安全的基础。",
    "密码长度至少 12 位。",
    "密码重置流程在管理后台。",
    "不要把密码写进记忆文件。",
    "密码存放在团队保险库中。",
    "令牌桶限流每秒 10 个请求。",
    "API密钥从环境变量 ANTHROPIC_API_KEY 读取。",
    "密码：见团队保险库",
    "密码是什么？请问管理员。",
    "用户忘记了密码。",
    "密钥每季度轮换一次。",
    // Japanese
    "パスワードを忘れた場合は管理者に連絡",
    "パスワードは12文字以上にしてください。",
    "パスワードは定期的に変更してください。",
    "トークン数の上限は4096です。",
    "APIキーは環境変数から読み込みます。",
    "暗号化にはAESを使います。",
    "パスワード: 保管庫を参照",
    "秘密鍵はビルドマシンにだけ置く。",
    "アクセストークンの有効期限は1時間。",
    // Korean
    "비밀번호를 잊으셨나요?",
    "비밀번호는 8자 이상이어야 합니다.",
    "비밀번호는 금고에 보관합니다.",
    "암호화는 AES-256을 사용합니다.",
    "API 키는 환경 변수에서 읽습니다.",
    "토큰 수 제한은 4096입니다.",
    "비밀번호: 팀 금고 참고",
    // Russian
    "Пароль должен содержать не менее 12 символов.",
    "Пароль: 12 символов минимум",
    "Пароль хранится в хранилище секретов.",
    "Сброс пароля выполняется через админку.",
    "Токен истекает через час.",
    "Ключ API берётся из переменной окружения.",
    "Не храните пароли в файлах памяти.",
    "пароль: см. хранилище команды",
    // Spanish
    "La contraseña es obligatoria.",
    "La contraseña debe tener al menos 12 caracteres.",
    "El usuario olvidó su contraseña.",
    "palabra clave: rust",
    "La clave secreta se rota cada trimestre.",
    "contraseña: ver el gestor del equipo",
    // Portuguese
    "A senha é obrigatória.",
    "A senha deve ter pelo menos 12 caracteres.",
    "Redefinição de senha pelo painel.",
    "senha: ver o cofre da equipe",
    "A chave de API vem da variável de ambiente.",
    // German
    "Das Passwort ist 8 Zeichen lang.",
    "Das Passwort ist mindestens 12 Zeichen lang.",
    "Passwort vergessen? Bitte den Admin fragen.",
    "Passwort: siehe Team-Tresor",
    "Der API-Schlüssel kommt aus der Umgebungsvariable.",
    "Kennwortrichtlinie: 12 Zeichen",
    // French
    "Le mot de passe est expiré.",
    "Le mot de passe doit contenir 12 caractères.",
    "mot de passe : voir le coffre de l'équipe",
    "Mot de passe oublié ? Contactez l'admin.",
    "Le jeton expire après une heure.",
    "La clé API est lue depuis l'environnement.",
    // Italian
    "La password è scaduta.",
    "La password deve avere almeno 12 caratteri.",
    "password dimenticata? Chiedi all'amministratore.",
    "La chiave API è nella variabile d'ambiente.",
    "chiave segreta: vedi il vault del team",
    // Ukrainian, Bulgarian, Serbian
    "Пароль має містити щонайменше 12 символів.",
    "Паролата трябва да е поне 12 знака.",
    "Заборавили сте лозинку?",
    // Dutch, Swedish, Norwegian, Danish
    "Wachtwoord vergeten? Klik op de link.",
    "Het wachtwoord is verlopen.",
    "wachtwoordbeleid: minimaal 12 tekens",
    "wachtwoord: zie de kluis van het team",
    "Lösenordet är för kort.",
    "Glömt lösenordet? Kontakta admin.",
    "Passordet er gammelt og må byttes.",
    "Adgangskoden skal være mindst 12 tegn.",
    // Finnish, Estonian, Hungarian
    "Salasana on vanhentunut.",
    "Unohditko salasanan?",
    "Parool peab olema vähemalt 12 märki.",
    "A jelszó legalább 12 karakter legyen.",
    "Elfelejtette a jelszavát?",
    // Turkish
    "Şifrenizi mi unuttunuz?",
    "Şifre en az 12 karakter olmalıdır.",
    "Şifre: ekibin kasasına bakın",
    // Polish, Czech, Croatian, Romanian
    "Hasło musi mieć co najmniej 12 znaków.",
    "Nie pamiętasz hasła?",
    "Hasło jest wymagane.",
    "Heslo je příliš krátké.",
    "Heslo je uloženo v trezoru.",
    "Lozinka je istekla.",
    "Parola de acces este obligatorie.",
    // Indonesian, Vietnamese
    "Kata sandi harus minimal 12 karakter.",
    "kata sandi: lihat brankas tim",
    "Mật khẩu phải có ít nhất 12 ký tự.",
    "Mật khẩu là bắt buộc.",
    // Greek
    "Ο κωδικός πρόσβασης έχει λήξει.",
    "Ο κωδικός πρόσβασης είναι υποχρεωτικός.",
    "Ο κωδικός: 1234 είναι ο ταχυδρομικός κώδικας.",
    // Arabic, Persian, Hebrew
    "كلمة المرور يجب أن تكون 12 حرفًا على الأقل.",
    "نسيت كلمة المرور؟",
    "كلمة المرور: راجع خزنة الفريق",
    "رمز عبور باید حداقل ۱۲ کاراکتر باشد.",
    "הסיסמה חייבת להכיל 12 תווים.",
    "שכחת את הסיסמה?",
    // Hindi, Bengali, Thai
    "पासवर्ड कम से कम 12 अक्षरों का होना चाहिए।",
    "পাসওয়ার্ড ভুলে গেছেন?",
    "รหัสผ่านต้องมีอย่างน้อย 12 ตัวอักษร",
];

/// New credential lines, tagged with their language (ISO 639-1): the shapes of issue 43 (a
/// qualifier after the label, copulas, dashes, synonyms the old list lacked, vendor tokens of
/// non-canonical length, command lines, URLs) in every language the filter knows.
const TAGGED_CREDENTIALS: &[(&str, &str, &str)] = &[
    // The issue's own examples.
    ("ru", "пароль администратора: Qw7zLp2Vn9", "Qw7zLp2Vn9"),
    ("ru", "пароль администратора — Qw7zLp2Vn9", "Qw7zLp2Vn9"),
    (
        "ru",
        "API-ключ сервиса оплаты: sk_live_4eC39HqLyjWDarjtT1zdp7dc",
        "4eC39HqLyjWD",
    ),
    (
        "pl",
        "token dostępu do API: ghp_R8s2kLm4Qp7xZt1Vw9Yb3Nc6Hd0Jf5Ga2Ke",
        "ghp_R8s2kLm4",
    ),
    ("cs", "heslo k databázi je Qw7zLp2Vn9", "Qw7zLp2Vn9"),
    ("fa", "رمز عبور پایگاه داده: Qw7zLp2Vn9", "Qw7zLp2Vn9"),
    (
        "el",
        "ο κωδικός πρόσβασης του διαχειριστή: Qw7zLp2Vn9",
        "Qw7zLp2Vn9",
    ),
    (
        "en",
        "webhook secret for payments = whsec_MfKQ9r71mBpq3ZxT8vLw2Yc5",
        "whsec_MfKQ9r",
    ),
    ("zh", "管理员账号 admin，口令 Qw7zLp2Vn9", "Qw7zLp2Vn9"),
    // Vendor tokens shorter and longer than canonical.
    ("en", "ghp_a1B2c3D4e5F6g7H8i9J0k1", "ghp_a1B2c3D4"),
    (
        "en",
        "ghp_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8s9T0u1",
        "ghp_a1B2c3D4",
    ),
    ("en", "gho_Zx8Yw7Vu6Ts5Rq4Po3Nm2Lk1Ji0", "gho_Zx8Yw7"),
    ("en", "ghs_Qa1Ws2Ed3Rf4Tg5Yh6Uj7Ik8", "ghs_Qa1Ws2"),
    ("en", "ghu_Pl0Ok9Ij8Uh7Yg6Tf5Rd4Es3Wa2", "ghu_Pl0Ok9"),
    ("en", "ghr_Mn8Bv7Cx6Za5Sd4Fg3Hj2Kl1", "ghr_Mn8Bv7"),
    (
        "en",
        "github_pat_11AbCdEfG0aB1cD2eF3gH4",
        "github_pat_11AbCd",
    ),
    ("en", "sk_live_51Hx9Q2", "sk_live_51Hx"),
    (
        "en",
        "sk_test_4eC39HqLyjWDarjtT1zdp7dcAbCdEfGhIjKlMnOpQr",
        "sk_test_4eC39",
    ),
    ("en", "rk_live_51Mz8Kq2Lp4Nw6", "rk_live_51Mz8"),
    ("en", "whsec_7Tq2Lm9Np4Kx8Zw1", "whsec_7Tq2"),
    ("en", "xoxb-2048-Ab3Cd4", "xoxb-2048"),
    (
        "en",
        "xoxp-1234567890-0987654321-1122334455-aB3dE5fG7hI9jK1lM3nO5pQ7",
        "xoxp-1234567890",
    ),
    ("en", "xoxa-2-Qw7zLp2Vn9Rt5", "xoxa-2-Qw7z"),
    ("en", "xoxr-8x7c6v5b4n3m", "xoxr-8x7c6v"),
    ("en", "xoxs-5566778899-Ab12Cd34", "xoxs-5566778899"),
    ("en", "AKIA2E0A8F3B244C", "AKIA2E0A8F3B"),
    ("en", "ASIAY34FZKBOKMUTVV7AXYZ", "ASIAY34FZKBO"),
    (
        "en",
        "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYzEXAMPLE1",
        "wJalrXUtnFEMI",
    ),
    (
        "en",
        "the AWS secret is 9drTJvcXLB89EXAMPLELB8NrC3yF7HQb2kZQ0uN4d",
        "9drTJvcXLB89",
    ),
    ("en", "sk-Ab3De5Gh7Jk9Mn1Pq3St5Vw7", "sk-Ab3De5"),
    (
        "en",
        "sk-proj-Xy8Wv7Ut6Sr5Qp4On3Ml2Kj1Ih0Gf9Ed8Cb7Az6",
        "sk-proj-Xy8W",
    ),
    (
        "en",
        "sk-ant-api03-Zq9Xw8Ev7Rc6Tb5Yn4Um3Ik2Ol1Pa0",
        "sk-ant-api03-Zq9X",
    ),
    ("en", "sk-ant-Qw7zLp2Vn9Rt5Ys3Xu1", "sk-ant-Qw7z"),
    ("en", "glpat-Xr4Tq8Wz2Lm6Np", "glpat-Xr4T"),
    ("en", "glpat-1a2B3c4D5e6F7g8H9i0J1k2L3m4N", "glpat-1a2B"),
    ("en", "AIzaSyB1c2D3e4F5g6H7i8J9k0L", "AIzaSyB1c2"),
    (
        "en",
        "AIzaSyD-9tSrke72PouQMnMX7a7eZSW0jkFMBWYabcdef",
        "AIzaSyD-9tSr",
    ),
    (
        "en",
        "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJhZG1pbiJ9.Sfl9Kx",
        "eyJhbGciOiJSUzI1",
    ),
    (
        "en",
        "Authorization: eyJ0eXAiOiJKV1QiLCJhbGciOiJIUzI1NiJ9.eyJ1aWQiOjQyfQ.aB3cD4eF5gH6",
        "eyJ0eXAi",
    ),
    (
        "en",
        "-----BEGIN ENCRYPTED PRIVATE KEY-----\nMIIFHDBOBgkqhkiG9w0BBQ0wQTApBgkqhkiG9w0BBQwwHAQI\n-----END ENCRYPTED PRIVATE KEY-----",
        "MIIFHDBOBgkq",
    ),
    (
        "en",
        "-----BEGIN DSA PRIVATE KEY-----\nMIIBuwIBAAKBgQD\n",
        "MIIBuwIBAAKBgQD",
    ),
    // Command lines and URLs.
    (
        "en",
        "mysql -h db.internal -u admin -pQw7zLp2Vn9 shop",
        "Qw7zLp2Vn9",
    ),
    (
        "en",
        "mysqldump --user=backup --password=Bk9!x2Lq shop",
        "Bk9!x2Lq",
    ),
    ("en", "psql --password Pg4Lm8Qz2 -h db", "Pg4Lm8Qz2"),
    ("en", "gh auth login --token ghx9Lm2Pq8Zw", "ghx9Lm2Pq8Zw"),
    (
        "en",
        "vault login -method=userpass password=Vt7Kq2Lm9",
        "Vt7Kq2Lm9",
    ),
    (
        "en",
        "./deploy.sh --api-key=9f8e7d6c5b4a3928 --env prod",
        "9f8e7d6c5b4a3928",
    ),
    (
        "en",
        "npm publish --auth-token Np4Xz8Lq2Wm6",
        "Np4Xz8Lq2Wm6",
    ),
    (
        "en",
        "postgres://app_user:Qw7zLp2Vn9@db.internal:5432/shop",
        "Qw7zLp2Vn9",
    ),
    (
        "en",
        "postgresql://admin:S3cr3t!x@10.0.0.5/analytics",
        "S3cr3t!x",
    ),
    (
        "en",
        "mongodb://root:Mg8Qz2Lp@mongo-0.mongo:27017/?authSource=admin",
        "Mg8Qz2Lp",
    ),
    (
        "en",
        "amqps://svc:Rb7Tq3Wm@mq.example.org/vhost",
        "Rb7Tq3Wm",
    ),
    (
        "en",
        "smtp://mailer:Sm4Tp8Xq@smtp.example.com:587",
        "Sm4Tp8Xq",
    ),
    (
        "en",
        "redis://default:Rd5Xq9Lm2@redis.internal:6379",
        "Rd5Xq9Lm2",
    ),
    (
        "en",
        "git clone https://oauth2:glx7Tq2Lm9Np4@gitlab.example.com/team/app.git",
        "glx7Tq2Lm9Np4",
    ),
    // English: qualifiers after the label, copulas, dashes.
    (
        "en",
        "password for the staging database: Xk8#pLq2",
        "Xk8#pLq2",
    ),
    ("en", "admin password of the router — Rt9!mVb3", "Rt9!mVb3"),
    ("en", "The root password on db01 is Zq7Wx3Lp9", "Zq7Wx3Lp9"),
    (
        "en",
        "api key for the geocoding service = 5b9e1c7a3f2d8e4b",
        "5b9e1c7a3f2d8e4b",
    ),
    (
        "en",
        "Our Sentry auth token: 7c3e9a1b5d2f8e4a6c0b",
        "7c3e9a1b5d2f",
    ),
    (
        "en",
        "client secret of the OAuth app is Cs8Tq2Lm9Wx4",
        "Cs8Tq2Lm9Wx4",
    ),
    ("en", "signing key for webhooks: Sk4!Lm8Qz2", "Sk4!Lm8Qz2"),
    ("en", "PIN for the office alarm: 4817", "4817"),
    ("en", "passcode to the server room — 902614", "902614"),
    (
        "en",
        "The Wi-Fi passphrase here is Guest-2024-Lobby",
        "Guest-2024-Lobby",
    ),
    ("en", "deploy token: Dt5Xq9Lm2Wp7", "Dt5Xq9Lm2Wp7"),
    ("en", "| staging password | Xp7!qL2m |", "Xp7!qL2m"),
    ("en", "refresh token (prod) = Rf8Tq3Wm6Xz1", "Rf8Tq3Wm6Xz1"),
    (
        "en",
        "credentials for the NAS: admin / Na5!Xq8L",
        "Na5!Xq8L",
    ),
    (
        "en",
        "Bitbucket app password: ATBB7kLm2Qp9Xz4Wv",
        "ATBB7kLm2Qp9",
    ),
    ("en", "The bot token is 8Xq2Lm9Wp4Zt7Vn3", "8Xq2Lm9Wp4Zt"),
    // Russian
    ("ru", "пароль от почты: Mx4!tR8q", "Mx4!tR8q"),
    ("ru", "пароль базы данных продакшена — Pd7#kQ2w", "Pd7#kQ2w"),
    ("ru", "Пароль пользователя root: Rt5Lm9Xq", "Rt5Lm9Xq"),
    ("ru", "токен бота телеграма: Tg8Xq2Lm5Wp9", "Tg8Xq2Lm5Wp9"),
    ("ru", "секретный ключ приложения = Sk3!mQ7z", "Sk3!mQ7z"),
    ("ru", "пин-код карты: 4821", "4821"),
    (
        "ru",
        "ключ доступа к хранилищу: Ak9Zq2Lm7Xw4",
        "Ak9Zq2Lm7Xw4",
    ),
    (
        "ru",
        "Пароль для входа в админку — Adm1n!2024",
        "Adm1n!2024",
    ),
    ("ru", "пароль:\nVq8#Lm3z", "Vq8#Lm3z"),
    (
        "ru",
        "токен доступа к GitLab: glpat-Xr4Tq8Wz2Lm6Np",
        "glpat-Xr4T",
    ),
    ("ru", "пароль сервера это Sv7Kq2Lm9", "Sv7Kq2Lm9"),
    // Ukrainian
    ("uk", "пароль адміністратора: Ua7!kQ2m", "Ua7!kQ2m"),
    ("uk", "Пароль до пошти — Pw9Xq3Lz", "Pw9Xq3Lz"),
    ("uk", "токен доступу до API: Tk4Lm8Qz2Wx", "Tk4Lm8Qz2Wx"),
    ("uk", "секретний ключ сервісу = Sc5#mP9q", "Sc5#mP9q"),
    ("uk", "Пароль від Wi-Fi є Kv2024!net", "Kv2024!net"),
    ("uk", "ключ доступу до сховища: Kx8Wq3Lm7", "Kx8Wq3Lm7"),
    // Bulgarian
    ("bg", "паролата на администратора: Bg7!xQ2m", "Bg7!xQ2m"),
    ("bg", "парола за базата данни — Db4Lm9Qz", "Db4Lm9Qz"),
    ("bg", "Паролата за сървъра е Srv8#Kq2", "Srv8#Kq2"),
    ("bg", "токен за достъп: Tk7Zq3Lm9Wx", "Tk7Zq3Lm9Wx"),
    ("bg", "парола на рутера = Rt3!Lm8q", "Rt3!Lm8q"),
    // Serbian, Croatian, Bosnian
    ("sr", "лозинка администратора: Sr8!kQ3m", "Sr8!kQ3m"),
    ("sr", "Лозинка за базу је Bz5Lm9Qx", "Bz5Lm9Qx"),
    ("hr", "lozinka za bazu podataka: Hr7#mQ2z", "Hr7#mQ2z"),
    ("hr", "Lozinka administratora je Zg4!Lm8q", "Zg4!Lm8q"),
    ("hr", "zaporka poslužitelja — Ps9Xq3Lm", "Ps9Xq3Lm"),
    ("hr", "šifra za wifi: Wf6#Kq2m", "Wf6#Kq2m"),
    ("sr", "lozinka servera = Sv3!Kq8m", "Sv3!Kq8m"),
    // Polish
    ("pl", "hasło administratora: Pl8!xQ3m", "Pl8!xQ3m"),
    (
        "pl",
        "Hasło do bazy danych produkcyjnej — Kr7#mQ2z",
        "Kr7#mQ2z",
    ),
    ("pl", "hasło użytkownika root = Rt4Lm9Qx", "Rt4Lm9Qx"),
    ("pl", "Hasło do serwera to Srv5!Kq2", "Srv5!Kq2"),
    (
        "pl",
        "klucz API usługi płatności: 7b3e9a1c5d2f8e4a",
        "7b3e9a1c5d2f",
    ),
    ("pl", "token dostępu: Tk2Lm8Qz5Wx", "Tk2Lm8Qz5Wx"),
    ("pl", "PIN do karty: 7390", "7390"),
    // Czech, Slovak
    ("cs", "heslo správce: Cz7!kQ2m", "Cz7!kQ2m"),
    ("cs", "Heslo do databáze — Db8#Lm3q", "Db8#Lm3q"),
    ("cs", "heslo uživatele root = Rt6Xq2Lm", "Rt6Xq2Lm"),
    (
        "cs",
        "klíč API platební brány: 9c3e7a1b5d2f8e4a",
        "9c3e7a1b5d2f",
    ),
    ("cs", "Heslo k serveru je Sv9!Lm2q", "Sv9!Lm2q"),
    ("sk", "heslo administrátora: Sk5#xQ8m", "Sk5#xQ8m"),
    ("sk", "Heslo k databáze je Ba7Lm3Qz", "Ba7Lm3Qz"),
    ("sk", "kľúč API služby = 4d9e2a7c1b5f3e8a", "4d9e2a7c1b5f"),
    // Slovenian, Lithuanian, Latvian, Estonian
    ("sl", "geslo skrbnika: Lj8!kQ2m", "Lj8!kQ2m"),
    ("sl", "Geslo za bazo je Gs4#Lm9q", "Gs4#Lm9q"),
    ("lt", "administratoriaus slaptažodis: Vl7!xQ3m", "Vl7!xQ3m"),
    ("lt", "slaptažodis duomenų bazei — Db5Lm8Qz", "Db5Lm8Qz"),
    ("lv", "parole administratoram: Rg7!kQ2m", "Rg7!kQ2m"),
    ("lv", "Datubāzes parole ir Lv8#Lm3q", "Lv8#Lm3q"),
    ("et", "parool andmebaasi jaoks: Ee7!xQ2m", "Ee7!xQ2m"),
    ("et", "Serveri parool on Tl5#Lm9q", "Tl5#Lm9q"),
    // Finnish
    ("fi", "salasana tietokantaan: Fi7!kQ2m", "Fi7!kQ2m"),
    ("fi", "Pääkäyttäjän salasana on Hk8#Lm3q", "Hk8#Lm3q"),
    ("fi", "palvelimen salasana — Sv4Xq9Lm", "Sv4Xq9Lm"),
    ("fi", "API-avaimen salasana = Av6!Lm2q", "Av6!Lm2q"),
    // Hungarian
    ("hu", "az adminisztrátor jelszava: Hu7!kQ2m", "Hu7!kQ2m"),
    ("hu", "jelszó az adatbázishoz — Db9#Lm3q", "Db9#Lm3q"),
    ("hu", "A szerver jelszava Bp5Xq8Lm!", "Bp5Xq8Lm"),
    ("hu", "jelszó = Jz4!Lm7q", "Jz4!Lm7q"),
    // Romanian
    ("ro", "parola administratorului: Ro7!kQ2m", "Ro7!kQ2m"),
    ("ro", "Parola bazei de date este Bd8#Lm3q", "Bd8#Lm3q"),
    ("ro", "parolă pentru server — Sv5Xq9Lm", "Sv5Xq9Lm"),
    (
        "ro",
        "cheia API a serviciului: 6a2e8c4b1d7f3e9a",
        "6a2e8c4b1d7f",
    ),
    // Spanish
    ("es", "contraseña del administrador: Es7!kQ2m", "Es7!kQ2m"),
    (
        "es",
        "La contraseña de la base de datos de producción es Pr8#Lm3q",
        "Pr8#Lm3q",
    ),
    ("es", "clave del wifi de la oficina — Of5Xq9Lm", "Of5Xq9Lm"),
    ("es", "token de acceso a la API: Tk3Lm8Qz2Wx", "Tk3Lm8Qz2Wx"),
    ("es", "clave secreta de la app = Cs9!Lm4q", "Cs9!Lm4q"),
    ("es", "contraseña:\nMd4#Lq8z", "Md4#Lq8z"),
    ("es", "código PIN de la tarjeta: 5837", "5837"),
    (
        "es",
        "clave de API de pagos: sk_live_51Mz8Kq2Lp4Nw6Yt",
        "sk_live_51Mz8",
    ),
    // Catalan, Galician
    ("ca", "contrasenya de l'administrador: Ca7!kQ2m", "Ca7!kQ2m"),
    ("ca", "La contrasenya del servidor és Bc8#Lm3q", "Bc8#Lm3q"),
    ("gl", "contrasinal do servidor: Gl5!Xq9m", "Gl5!Xq9m"),
    // Portuguese
    ("pt", "senha do administrador: Pt7!kQ2m", "Pt7!kQ2m"),
    (
        "pt",
        "A senha do banco de dados de produção é Bd8#Lm3q",
        "Bd8#Lm3q",
    ),
    ("pt", "palavra-passe do router — Rt5Xq9Lm", "Rt5Xq9Lm"),
    (
        "pt",
        "chave de acesso ao bucket: Ak3Lm8Qz2Wx",
        "Ak3Lm8Qz2Wx",
    ),
    ("pt", "token do bot = Tb9!Lm4q7Zx", "Tb9!Lm4q7Zx"),
    ("pt", "senha:\nSp4#Lq8z", "Sp4#Lq8z"),
    // French
    ("fr", "mot de passe administrateur : Fr7!kQ2m", "Fr7!kQ2m"),
    (
        "fr",
        "Le mot de passe de la base de production est Pr8#Lm3q",
        "Pr8#Lm3q",
    ),
    ("fr", "mot de passe du wifi — Wf5Xq9Lm", "Wf5Xq9Lm"),
    ("fr", "jeton d'accès à l'API : Jt3Lm8Qz2Wx", "Jt3Lm8Qz2Wx"),
    ("fr", "clé secrète de l'application = Cs9!Lm4q", "Cs9!Lm4q"),
    ("fr", "code PIN de la carte : 6142", "6142"),
    ("fr", "mdp du compte admin : Ad4#Lq8z", "Ad4#Lq8z"),
    // Italian
    ("it", "password dell'amministratore: It7!kQ2m", "It7!kQ2m"),
    (
        "it",
        "La password del database di produzione è Db8#Lm3q",
        "Db8#Lm3q",
    ),
    (
        "it",
        "chiave API del servizio di pagamento — 3f9a1c7e5b2d8f4a",
        "3f9a1c7e5b2d",
    ),
    ("it", "token di accesso: Tk5Lm8Qz2Wx", "Tk5Lm8Qz2Wx"),
    ("it", "codice di accesso alla porta = 470915", "470915"),
    // German
    ("de", "Passwort des Administrators: De7!kQ2m", "De7!kQ2m"),
    (
        "de",
        "Das Passwort der Produktionsdatenbank ist Pr8#Lm3q",
        "Pr8#Lm3q",
    ),
    ("de", "Datenbankpasswort: Db5Xq9Lm!", "Db5Xq9Lm"),
    ("de", "Kennwort für den Router — Rt3!Lm8q", "Rt3!Lm8q"),
    ("de", "Zugriffstoken der API = Zt9Lm4Qx7Wp", "Zt9Lm4Qx7Wp"),
    (
        "de",
        "API-Schlüssel des Zahlungsdienstes: sk_live_51Kq8Mz2Lp4",
        "sk_live_51Kq8",
    ),
    ("de", "PIN der Karte: 8305", "8305"),
    // Dutch
    ("nl", "wachtwoord van de beheerder: Nl7!kQ2m", "Nl7!kQ2m"),
    (
        "nl",
        "Het wachtwoord van de productiedatabase is Pr8#Lm3q",
        "Pr8#Lm3q",
    ),
    (
        "nl",
        "API-sleutel van de betaaldienst — 8e2a6c4b1d9f3e7a",
        "8e2a6c4b1d9f",
    ),
    ("nl", "toegangscode voor de deur = 731846", "731846"),
    // Swedish, Norwegian, Danish, Icelandic
    ("sv", "lösenord för databasen: Sv7!kQ2m", "Sv7!kQ2m"),
    ("sv", "Lösenordet till servern är Pr8#Lm3q", "Pr8#Lm3q"),
    (
        "sv",
        "API-nyckel för betaltjänsten = 2b8e4a6c1d9f3e7a",
        "2b8e4a6c1d9f",
    ),
    ("no", "passord til databasen: No7!kQ2m", "No7!kQ2m"),
    ("no", "Passordet for ruteren er Rt8#Lm3q", "Rt8#Lm3q"),
    (
        "no",
        "API-nøkkel for betalingstjenesten — 5c1e7a3b9d2f8e4a",
        "5c1e7a3b9d2f",
    ),
    ("da", "adgangskode til databasen: Dk7!kQ2m", "Dk7!kQ2m"),
    ("da", "Kodeordet til serveren er Sv8#Lm3q", "Sv8#Lm3q"),
    (
        "da",
        "API-nøgle til betalingstjenesten = 9a3e5c7b1d2f8e4a",
        "9a3e5c7b1d2f",
    ),
    ("is", "lykilorð stjórnanda: Is7!kQ2m", "Is7!kQ2m"),
    ("is", "Lykilorðið að þjóninum er Rk8#Lm3q", "Rk8#Lm3q"),
    // Turkish, Azerbaijani
    ("tr", "yönetici şifresi: Tr7!kQ2m", "Tr7!kQ2m"),
    ("tr", "veritabanı şifresi — Db8#Lm3q", "Db8#Lm3q"),
    ("tr", "sunucunun şifresi = Sv5Xq9Lm", "Sv5Xq9Lm"),
    (
        "tr",
        "ödeme servisinin API anahtarı: 4e8a2c6b1d9f3e7a",
        "4e8a2c6b1d9f",
    ),
    ("tr", "şifre Ank4ra!06x", "Ank4ra!06x"),
    ("tr", "erişim anahtarı = Ea7Lm3Qz9Wx", "Ea7Lm3Qz9Wx"),
    ("az", "açar söz: Az7!kQ2m", "Az7!kQ2m"),
    // Indonesian, Malay, Tagalog, Swahili
    ("id", "kata sandi admin: Id7!kQ2m", "Id7!kQ2m"),
    (
        "id",
        "Kata sandi database produksi adalah Pr8#Lm3q",
        "Pr8#Lm3q",
    ),
    (
        "id",
        "kunci API layanan pembayaran — 6f2a8c4e1b9d3f7a",
        "6f2a8c4e1b9d",
    ),
    ("id", "sandi wifi kantor = Wf5Xq9Lm", "Wf5Xq9Lm"),
    ("ms", "kata laluan pentadbir: My7!kQ2m", "My7!kQ2m"),
    ("ms", "Kata laluan pelayan ialah Kl8#Lm3q", "Kl8#Lm3q"),
    ("sw", "nenosiri la msimamizi: Sw7!kQ2m", "Sw7!kQ2m"),
    ("sw", "Nenosiri la seva ni Nb8#Lm3q", "Nb8#Lm3q"),
    // Vietnamese
    ("vi", "mật khẩu quản trị: Vn7!kQ2m", "Vn7!kQ2m"),
    ("vi", "Mật khẩu cơ sở dữ liệu là Db8#Lm3q", "Db8#Lm3q"),
    (
        "vi",
        "khóa API của dịch vụ thanh toán — 1d7a3e9c5b2f8e4a",
        "1d7a3e9c5b2f",
    ),
    ("vi", "mã truy cập = Tc5Xq9Lm2W", "Tc5Xq9Lm2W"),
    // Greek
    (
        "el",
        "κωδικός πρόσβασης της βάσης δεδομένων — Gr7!kQ2m",
        "Gr7!kQ2m",
    ),
    (
        "el",
        "Ο κωδικός πρόσβασης του διακομιστή είναι Sv8#Lm3q",
        "Sv8#Lm3q",
    ),
    (
        "el",
        "κλειδί API της υπηρεσίας πληρωμών: 8b4e2a6c1d9f3e7a",
        "8b4e2a6c1d9f",
    ),
    ("el", "συνθηματικό του δρομολογητή = Rt5Xq9Lm", "Rt5Xq9Lm"),
    ("el", "μυστικό κλειδί εφαρμογής: Mk3!Lm8q", "Mk3!Lm8q"),
    // Arabic
    ("ar", "كلمة مرور المسؤول: Ar7!kQ2m", "Ar7!kQ2m"),
    (
        "ar",
        "كلمة المرور الخاصة بقاعدة البيانات هي Db8#Lm3q",
        "Db8#Lm3q",
    ),
    ("ar", "كلمة السر للخادم — Sv5Xq9Lm", "Sv5Xq9Lm"),
    (
        "ar",
        "مفتاح API لخدمة الدفع: 3c9e1a7b5d2f8e4a",
        "3c9e1a7b5d2f",
    ),
    ("ar", "الرقم السري للبطاقة: 7294", "7294"),
    ("ar", "رمز الوصول = Tk9Lm4Qx7Wp", "Tk9Lm4Qx7Wp"),
    // Persian
    ("fa", "رمز عبور مدیر سیستم: Fa7!kQ2m", "Fa7!kQ2m"),
    ("fa", "رمز عبور سرور Sv8#Lm3q است", "Sv8#Lm3q"),
    ("fa", "کلمه عبور ایمیل — Em5Xq9Lm", "Em5Xq9Lm"),
    ("fa", "گذرواژه پایگاه داده = Db3!Lm8q", "Db3!Lm8q"),
    ("fa", "توکن دسترسی: Tk7Lm3Qz9Wx", "Tk7Lm3Qz9Wx"),
    // Urdu
    ("ur", "ایڈمن کا پاس ورڈ: Ur7!kQ2m", "Ur7!kQ2m"),
    ("ur", "سرور کا پاس ورڈ Sv8#Lm3q ہے", "Sv8#Lm3q"),
    // Hebrew
    ("he", "סיסמת המנהל: He7!kQ2m", "He7!kQ2m"),
    ("he", "הסיסמה של מסד הנתונים היא Db8#Lm3q", "Db8#Lm3q"),
    (
        "he",
        "מפתח API של שירות התשלומים — 7e3a9c5b1d2f8e4a",
        "7e3a9c5b1d2f",
    ),
    ("he", "טוקן גישה = Tk5Xq9Lm2W", "Tk5Xq9Lm2W"),
    // Hindi
    ("hi", "एडमिन का पासवर्ड: Hi7!kQ2m", "Hi7!kQ2m"),
    ("hi", "डेटाबेस का पासवर्ड Db8#Lm3q है", "Db8#Lm3q"),
    ("hi", "पासवर्ड सर्वर के लिए — Sv5Xq9Lm", "Sv5Xq9Lm"),
    (
        "hi",
        "भुगतान सेवा की एपीआई कुंजी: 2a8e4c6b1d9f3e7a",
        "2a8e4c6b1d9f",
    ),
    ("hi", "टोकन = Tk3Lm8Qz2Wx", "Tk3Lm8Qz2Wx"),
    // Bengali
    ("bn", "অ্যাডমিনের পাসওয়ার্ড: Bn7!kQ2m", "Bn7!kQ2m"),
    ("bn", "সার্ভারের পাসওয়ার্ড হল Sv8#Lm3q", "Sv8#Lm3q"),
    ("bn", "টোকেন: Tk5Xq9Lm2W", "Tk5Xq9Lm2W"),
    // Thai
    ("th", "รหัสผ่านผู้ดูแลระบบ: Th7!kQ2m", "Th7!kQ2m"),
    ("th", "รหัสผ่านของฐานข้อมูลคือ Db8#Lm3q", "Db8#Lm3q"),
    ("th", "โทเค็นของบอท = Tk5Xq9Lm2W", "Tk5Xq9Lm2W"),
    // Chinese
    ("zh", "管理员密码：Zh7!kQ2m", "Zh7!kQ2m"),
    ("zh", "生产数据库的登录密码为 Db8#Lm3q", "Db8#Lm3q"),
    ("zh", "支付服务的密钥：4f8a2c6e1b9d3f7a", "4f8a2c6e1b9d"),
    ("zh", "服务器秘钥 Sv5Xq9Lm2W", "Sv5Xq9Lm2W"),
    ("zh", "数据库口令是 Kl3!Lm8q", "Kl3!Lm8q"),
    ("zh", "访问令牌 = Tk7Lm3Qz9Wx", "Tk7Lm3Qz9Wx"),
    ("zh", "账号 root 密码 Rt9#Lm4Qz", "Rt9#Lm4Qz"),
    (
        "zh",
        "API密钥：sk-proj-Xy8Wv7Ut6Sr5Qp4On3Ml2",
        "sk-proj-Xy8W",
    ),
    ("zh", "Wi-Fi密码：Cafe#2024x", "Cafe#2024x"),
    ("zh", "密碼是 Tw8!Lm3q", "Tw8!Lm3q"),
    // Japanese
    ("ja", "管理者のパスワード: Ja7!kQ2m", "Ja7!kQ2m"),
    (
        "ja",
        "本番データベースのパスワードは Db8#Lm3q です",
        "Db8#Lm3q",
    ),
    (
        "ja",
        "決済サービスのAPIキー：9d3a7e1c5b2f8e4a",
        "9d3a7e1c5b2f",
    ),
    ("ja", "暗証番号は 4096 です", "4096"),
    ("ja", "サーバーのパスワード Sv5Xq9Lm2W", "Sv5Xq9Lm2W"),
    ("ja", "ボットのトークン：Tk3Lm8Qz2Wx", "Tk3Lm8Qz2Wx"),
    ("ja", "秘密鍵のパスフレーズ: Pf4#Lq8z", "Pf4#Lq8z"),
    // Korean
    ("ko", "관리자 비밀번호: Ko7!kQ2m", "Ko7!kQ2m"),
    (
        "ko",
        "운영 데이터베이스 비밀번호는 Db8#Lm3q 입니다",
        "Db8#Lm3q",
    ),
    (
        "ko",
        "결제 서비스 API 키 — 6b2e8a4c1d9f3e7a",
        "6b2e8a4c1d9f",
    ),
    ("ko", "서버 암호 = Sv5Xq9Lm", "Sv5Xq9Lm"),
    ("ko", "봇 토큰: Tk3Lm8Qz2Wx", "Tk3Lm8Qz2Wx"),
    ("ko", "와이파이 비번 Wf7#Kq2m9", "Wf7#Kq2m9"),
    // Wi-Fi, routers, panels and doors: the everyday shapes, in every language.
    ("ru", "Пароль от роутера у меня дома: Rk5#vB2q", "Rk5#vB2q"),
    ("ru", "Паролем от сервера является Qw7zLp2Vn9", "Qw7zLp2Vn9"),
    (
        "ru",
        "секрет вебхука = whsec_Ab1Cd2Ef3Gh4Ij5Kl6",
        "whsec_Ab1Cd2",
    ),
    ("pl", "Hasło dostępowe do panelu: Pn7!xQ2w", "Pn7!xQ2w"),
    (
        "pl",
        "hasło do Wi-Fi w biurze to Biuro#2024x",
        "Biuro#2024x",
    ),
    ("pl", "Hasłem do serwera jest Hs8!xQ2w", "Hs8!xQ2w"),
    ("cs", "heslo pro přístup k API: Ap8!xQ2w", "Ap8!xQ2w"),
    ("cs", "Heslo do wifi je Kavarna!77", "Kavarna!77"),
    ("fi", "salasana on Qw7zLp2Vn9", "Qw7zLp2Vn9"),
    ("fi", "salasanani Gmailiin: Gm8!xQ2w", "Gm8!xQ2w"),
    ("hu", "Jelszó a routerhez: Rt7!xQ2w", "Rt7!xQ2w"),
    ("ro", "parola pentru wifi este Wifi#2024ro", "Wifi#2024ro"),
    (
        "es",
        "contraseña para el panel de control: Cp7!xQ2w",
        "Cp7!xQ2w",
    ),
    ("es", "La clave de la wifi es Casa#2024es", "Casa#2024es"),
    ("pt", "A palavra-passe do wifi é Casa#2024pt", "Casa#2024pt"),
    (
        "fr",
        "mot de passe pour le panneau d'administration : Pa7!xQ2w",
        "Pa7!xQ2w",
    ),
    ("fr", "Le code d'accès de la porte est 482913", "482913"),
    ("de", "Passwort zum WLAN im Büro: Buero#2024", "Buero#2024"),
    (
        "de",
        "Das Kennwort für das Admin-Panel ist Ap8!xQ2w",
        "Ap8!xQ2w",
    ),
    (
        "nl",
        "Het wachtwoord voor de wifi is Wifi#2024nl",
        "Wifi#2024nl",
    ),
    ("sv", "Lösenord till wifi: Wifi#2024se", "Wifi#2024se"),
    ("no", "Passordet til wifi er Wifi#2024no", "Wifi#2024no"),
    ("da", "Adgangskoden til wifi er Wifi#2024dk", "Wifi#2024dk"),
    ("tr", "Wifi şifresi: Wifi#2024tr", "Wifi#2024tr"),
    ("tr", "Şifrem Qw7zLp2Vn9", "Qw7zLp2Vn9"),
    (
        "id",
        "Kata sandi wifi kantor adalah Wifi#2024id",
        "Wifi#2024id",
    ),
    ("vi", "Mật khẩu wifi là Wifi#2024vn", "Wifi#2024vn"),
    (
        "el",
        "Ο κωδικός πρόσβασης για το wifi είναι Wifi#2024gr",
        "Wifi#2024gr",
    ),
    ("ar", "كلمة السر للواي فاي هي Wifi#2024ar", "Wifi#2024ar"),
    ("fa", "رمز وای فای: Wifi#2024fa", "Wifi#2024fa"),
    ("he", "הסיסמה לוויפי היא Wifi#2024he", "Wifi#2024he"),
    ("hi", "वाईफाई का पासवर्ड है Wifi#2024hi", "Wifi#2024hi"),
    ("th", "รหัสผ่าน wifi คือ Wifi#2024th", "Wifi#2024th"),
    ("zh", "WiFi密码是Wifi#2024cn", "Wifi#2024cn"),
    ("zh", "无线网络的密码：Wifi#2024cn", "Wifi#2024cn"),
    ("ja", "wifiのパスワードは「Wifi#2024jp」です", "Wifi#2024jp"),
    (
        "ko",
        "와이파이 비밀번호는 Wifi#2024kr 입니다",
        "Wifi#2024kr",
    ),
    ("en", "unlock code: 739146", "739146"),
    ("en", "user: deploy, pass: Dp8!xQ2w", "Dp8!xQ2w"),
    ("en", "**Password:** Qw7zLp2Vn9", "Qw7zLp2Vn9"),
    (
        "en",
        "The new staging password will be Qw7zLp2Vn9 from Monday",
        "Qw7zLp2Vn9",
    ),
    ("en", "password was changed to Qw7zLp2Vn9", "Qw7zLp2Vn9"),
    ("de", "Zugangsdaten: admin / Qw7zLp2Vn9", "Qw7zLp2Vn9"),
    ("es", "credenciales: admin / Qw7zLp2Vn9", "Qw7zLp2Vn9"),
    ("ru", "контрольное слово: Qw7zLp2Vn9", "Qw7zLp2Vn9"),
    ("th", "รหัส Wi-Fi: Qw7zLp2Vn9", "Qw7zLp2Vn9"),
    ("vi", "mật khẩu wifi Qw7zLp2Vn9", "Qw7zLp2Vn9"),
    (
        "en",
        "The passphrase for the GPG key: correct-Horse-7-battery",
        "correct-Horse-7",
    ),
    // Service accounts, archives and panels: qualifiers after the label, quotes, copulas.
    (
        "ru",
        "Пароль для подключения к Redis на проде: Rd7!xQ2wLm",
        "Rd7!xQ2wLm",
    ),
    (
        "ru",
        "Токен доступа к API платежей — Tk9Lm4Qx7Wp2",
        "Tk9Lm4Qx7Wp2",
    ),
    ("ru", "пароль от учётки jenkins = Jk8!xQ2w", "Jk8!xQ2w"),
    (
        "ru",
        "ключ API для карт: 4f8a2c6e1b9d3f7a",
        "4f8a2c6e1b9d3f7a",
    ),
    ("ru", "Пароль к архиву: Arch!v3_2024", "Arch!v3_2024"),
    ("ru", "пароль: qwerty123", "qwerty123"),
    (
        "ru",
        "пароль root на сервере db01 такой: Rt8!xQ2w",
        "Rt8!xQ2w",
    ),
    ("sr", "Лозинка за мејл је Ml8!xQ2w", "Ml8!xQ2w"),
    (
        "pl",
        "hasło do konta admina na produkcji: Ad8!xQ2w",
        "Ad8!xQ2w",
    ),
    (
        "cs",
        "heslo k účtu správce na produkci: Sp8!xQ2w",
        "Sp8!xQ2w",
    ),
    ("hu", "A jelszó a fiókhoz: Fk8!xQ2w", "Fk8!xQ2w"),
    (
        "ro",
        "Parola contului de administrator este Ad8!xQ2w",
        "Ad8!xQ2w",
    ),
    (
        "es",
        "la contraseña del usuario de la base de datos de staging: Stg8!xQ2w",
        "Stg8!xQ2w",
    ),
    ("es", "la contraseña es: Qw7zLp2Vn9", "Qw7zLp2Vn9"),
    (
        "pt",
        "A senha de acesso ao banco de dados de homologação: Hm8!xQ2w",
        "Hm8!xQ2w",
    ),
    (
        "fr",
        "Le mot de passe du compte de service est Sv8!xQ2w",
        "Sv8!xQ2w",
    ),
    (
        "it",
        "la password del database di staging: Stg8!xQ2w",
        "Stg8!xQ2w",
    ),
    (
        "de",
        "Das Passwort für den Datenbankbenutzer lautet: Db8!xQ2w",
        "Db8!xQ2w",
    ),
    (
        "nl",
        "Het wachtwoord van het serviceaccount: Sa8!xQ2w",
        "Sa8!xQ2w",
    ),
    (
        "sv",
        "Lösenordet för databasanvändaren: Db8!xQ2w",
        "Db8!xQ2w",
    ),
    (
        "tr",
        "Veritabanı kullanıcısının şifresi Db8!xQ2w",
        "Db8!xQ2w",
    ),
    ("id", "Kata sandi untuk akun layanan: Sa8!xQ2w", "Sa8!xQ2w"),
    ("vi", "Mật khẩu của tài khoản dịch vụ: Sa8!xQ2w", "Sa8!xQ2w"),
    (
        "el",
        "Ο κωδικός του λογαριασμού υπηρεσίας: Sa8!xQ2w",
        "Sa8!xQ2w",
    ),
    ("ar", "كلمة مرور حساب الخدمة: Sa8!xQ2w", "Sa8!xQ2w"),
    ("fa", "رمز عبور حساب سرویس: Sa8!xQ2w", "Sa8!xQ2w"),
    ("he", "סיסמת חשבון השירות: Sa8!xQ2w", "Sa8!xQ2w"),
    ("hi", "सर्विस अकाउंट का पासवर्ड: Sa8!xQ2w", "Sa8!xQ2w"),
    ("th", "รหัสผ่านของบัญชีบริการ: Sa8!xQ2w", "Sa8!xQ2w"),
    ("zh", "服务账号的密码是Sa8!xQ2w", "Sa8!xQ2w"),
    ("ja", "サービスアカウントのパスワード：Sa8!xQ2w", "Sa8!xQ2w"),
    ("ko", "서비스 계정의 비밀번호: Sa8!xQ2w", "Sa8!xQ2w"),
    ("zh", "服務帳號密碼：Sa8!xQ2w", "Sa8!xQ2w"),
    ("zh", "数据库连接口令为 Db8!xQ2w", "Db8!xQ2w"),
    ("zh", "秘钥（生产）：Pr8!xQ2w", "Pr8!xQ2w"),
    ("ja", "パスワードは「Sa8!xQ2w」", "Sa8!xQ2w"),
    ("ko", "비밀번호 = \"Sa8!xQ2w\"", "Sa8!xQ2w"),
    ("ru", "Пароль: \"Sa8!xQ2w\"", "Sa8!xQ2w"),
    ("en", "password => 'Sa8!xQ2w'", "Sa8!xQ2w"),
    ("en", "'password': 'Sa8!xQ2w'", "Sa8!xQ2w"),
    ("en", "PASSWORD: Sa8!xQ2w", "Sa8!xQ2w"),
    ("en", "Password - Sa8!xQ2w", "Sa8!xQ2w"),
    ("de", "Passwort ist Sa8!xQ2w", "Sa8!xQ2w"),
    ("pl", "Hasło: Sa8!xQ2w (nie udostępniać)", "Sa8!xQ2w"),
    ("ru", "Пароль Sa8!xQ2w, логин admin", "Sa8!xQ2w"),
    (
        "en",
        "Token: Sa8xQ2wLm9Pz7Kt (expires Friday)",
        "Sa8xQ2wLm9Pz7Kt",
    ),
    // Kebab-case passwords where nothing but the value follows the label.
    ("en", "password: blue-horse-42", "blue-horse-42"),
    ("ru", "Пароль: sinij-kon-42!", "sinij-kon-42"),
    ("en", "the DB password is Pg-2024-prod!", "Pg-2024-prod"),
    ("en", "token: tk-4f8a2c6e1b9d3f7a", "tk-4f8a2c6e1b9d3f7a"),
    // A long label and a qualifier before an arrow (`→`, `->`, `=>`), in several languages.
    (
        "en",
        "the api token for staging → Qw7zLp2Vn9xK",
        "Qw7zLp2Vn9xK",
    ),
    (
        "en",
        "the api token for staging -> Qw7zLp2Vn9xK",
        "Qw7zLp2Vn9xK",
    ),
    (
        "en",
        "the api token for staging => Qw7zLp2Vn9xK",
        "Qw7zLp2Vn9xK",
    ),
    (
        "en",
        "database password of the billing service → hunter42",
        "hunter42",
    ),
    (
        "en",
        "SMTP password for the mail relay -> relay-2024",
        "relay-2024",
    ),
    (
        "en",
        "deploy key for the docs site => dk-7f3a9c",
        "dk-7f3a9c",
    ),
    ("de", "der API-Schlüssel für Produktion → Kx9#2q", "Kx9#2q"),
    (
        "de",
        "Passwort der Datenbank auf staging -> geheim42",
        "geheim42",
    ),
    (
        "de",
        "Zugangstoken für das Kundenportal => portal-99",
        "portal-99",
    ),
    (
        "ru",
        "пароль администратора для staging → hunter42",
        "hunter42",
    ),
    ("ru", "API-ключ сервиса оплаты -> pay-7731", "pay-7731"),
    ("ru", "токен доступа к продакшену => Kx9#2q", "Kx9#2q"),
    (
        "es",
        "la contraseña de la base de datos de producción → hunter42",
        "hunter42",
    ),
    (
        "es",
        "el token de acceso para staging -> tk-5521",
        "tk-5521",
    ),
    ("es", "la clave de la API de pagos => Kx9#2q", "Kx9#2q"),
    (
        "fr",
        "le mot de passe du serveur de prod → geheim42",
        "geheim42",
    ),
    ("zh", "生产环境的数据库密码 → hunter42", "hunter42"),
    ("zh", "测试服务器的访问令牌 -> tk-5521", "tk-5521"),
    ("zh", "支付接口的API密钥 => Kx9#2q", "Kx9#2q"),
];

/// New harmless lines, tagged with their language: where a password is kept, how it rotates,
/// what a field is called, a reference in place of the value, a policy; with the label words,
/// qualifiers and separators the credential lines use.
const TAGGED_HARMLESS: &[(&str, &str)] = &[
    // English
    ("en", "The password is stored in 1Password."),
    ("en", "password: see vault"),
    ("en", "token: ${GITHUB_TOKEN}"),
    (
        "en",
        "password for the staging database: see the team vault",
    ),
    ("en", "admin password of the router — ask IT"),
    ("en", "The root password on db01 is rotated every 90 days."),
    ("en", "api key for the geocoding service = $GEOCODE_API_KEY"),
    (
        "en",
        "webhook secret for payments = env:STRIPE_WEBHOOK_SECRET",
    ),
    (
        "en",
        "client secret of the OAuth app is kept in AWS Secrets Manager",
    ),
    ("en", "DB password: vault:secret/data/prod/db#password"),
    ("en", "password: %DB_PASSWORD%"),
    ("en", "token = os.getenv(\"SLACK_TOKEN\")"),
    (
        "en",
        "The password field is called password_hash in the users table.",
    ),
    ("en", "password column: password_hash"),
    ("en", "The API token header is X-Api-Key."),
    (
        "en",
        "Tokens rotate weekly; the old one stays valid for a day.",
    ),
    ("en", "password hashing: argon2id"),
    ("en", "token lifetime: 3600s"),
    ("en", "PIN length: 4 digits"),
    ("en", "password: <password>"),
    ("en", "api_key: your-api-key-here"),
    ("en", "secret: changeme"),
    ("en", "secret_key: changeme"),
    ("en", "token = ****"),
    ("en", "password = xxx"),
    ("en", "the token is the one in GITHUB_TOKEN"),
    ("en", "Access token expiry: 2025-01-31"),
    ("en", "API key version: v2.1.0"),
    (
        "en",
        "ghp_XXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX is what a GitHub token looks like",
    ),
    (
        "en",
        "Stripe keys look like sk_live_... and must never be committed.",
    ),
    ("en", "password reset link — expires in 24 hours"),
    (
        "en",
        "The password manager is Bitwarden; the vault is shared with the team.",
    ),
    ("en", "token: read from ~/.config/gh/hosts.yml"),
    ("en", "password file: secrets/db-password.txt"),
    ("en", "credentials: stored in the CI secret store"),
    (
        "en",
        "Set the token with `export GITHUB_TOKEN=...` before running.",
    ),
    (
        "en",
        "The bot token is issued by BotFather and kept in the vault.",
    ),
    (
        "en",
        "secret: projects/acme/secrets/db-password/versions/latest",
    ),
    ("en", "password is managed by Vault (path secret/prod/db)"),
    ("en", "the api key lives in .env.local, which git ignores"),
    ("en", "passcode: the one printed on the router label"),
    ("en", "The session token is a JWT signed with RS256."),
    ("en", "refresh token rotation: enabled"),
    ("en", "| password | stored in 1Password |"),
    ("en", "Use sk-learn-compatible estimators for the pipeline."),
    (
        "en",
        "git commit 3f2a9c1e7b5d8e4a6c0b1d2e3f4a5b6c7d8e9f0a fixed the login bug",
    ),
    (
        "en",
        "The password of the test user is in fixtures/users.json.",
    ),
    ("en", "password policy: at least 12 characters, one digit"),
    ("en", "pin the dependency to 1.26.4"),
    ("en", "Password: required for the admin console"),
    // Russian
    ("ru", "пароль администратора хранится в 1Password"),
    ("ru", "пароль администратора: см. хранилище"),
    ("ru", "токен: ${GITHUB_TOKEN}"),
    ("ru", "пароль базы данных меняется каждые 90 дней"),
    ("ru", "Пароль администратора — спросите у дежурного"),
    (
        "ru",
        "API-ключ сервиса оплаты берётся из переменной STRIPE_API_KEY",
    ),
    ("ru", "поле пароля называется password_hash"),
    ("ru", "Токен бота выдаёт BotFather, он лежит в хранилище."),
    ("ru", "пароль: $DB_PASSWORD"),
    // Ukrainian
    ("uk", "пароль адміністратора зберігається в 1Password"),
    ("uk", "Пароль до пошти — див. сховище команди"),
    ("uk", "токен доступу до API змінюється щотижня"),
    ("uk", "пароль: ${DB_PASSWORD}"),
    // Bulgarian
    ("bg", "паролата на администратора се пази в трезора"),
    ("bg", "Паролата за сървъра е в 1Password."),
    ("bg", "парола: вижте трезора"),
    // Serbian, Croatian
    ("sr", "лозинка администратора се чува у сефу"),
    ("hr", "lozinka za bazu podataka: pogledaj trezor"),
    ("hr", "Lozinka administratora mijenja se svaka tri mjeseca."),
    ("hr", "zaporka: %DB_PASS%"),
    // Polish
    ("pl", "hasło administratora jest w 1Password"),
    ("pl", "token dostępu do API: ${GITHUB_TOKEN}"),
    ("pl", "Hasło do bazy danych zmieniamy co kwartał."),
    ("pl", "hasło: zobacz sejf zespołu"),
    ("pl", "pole hasła nazywa się password_hash"),
    ("pl", "Hasło do serwera to temat na osobne spotkanie."),
    // Czech, Slovak
    ("cs", "heslo k databázi je uloženo v trezoru"),
    ("cs", "heslo správce: viz trezor týmu"),
    ("cs", "Heslo k serveru se mění každých 90 dní."),
    ("cs", "heslo: $DB_PASSWORD"),
    ("sk", "heslo administrátora je v trezore"),
    ("sk", "Heslo k databáze: pozri trezor"),
    // Slovenian, Lithuanian, Latvian, Estonian
    ("sl", "geslo skrbnika je shranjeno v trezorju"),
    ("lt", "administratoriaus slaptažodis saugomas saugykloje"),
    ("lv", "administratora parole ir glabātuvē"),
    ("et", "andmebaasi parool on seifis"),
    // Finnish
    ("fi", "salasana tietokantaan: katso holvi"),
    ("fi", "Pääkäyttäjän salasana on tallessa 1Passwordissa."),
    ("fi", "salasana vaihdetaan 90 päivän välein"),
    // Hungarian
    ("hu", "az adminisztrátor jelszava a széfben van"),
    ("hu", "jelszó: lásd a csapat széfjét"),
    ("hu", "A jelszó legalább 12 karakter."),
    // Romanian
    ("ro", "parola administratorului este în seif"),
    ("ro", "parola bazei de date: vezi seiful echipei"),
    ("ro", "Parola se schimbă la fiecare 90 de zile."),
    // Spanish
    ("es", "La contraseña del administrador está en 1Password."),
    (
        "es",
        "contraseña del administrador: ver el gestor del equipo",
    ),
    ("es", "token de acceso a la API: ${GITHUB_TOKEN}"),
    (
        "es",
        "La contraseña de la base de datos se rota cada 90 días.",
    ),
    ("es", "el campo de la contraseña se llama password_hash"),
    ("es", "clave del wifi de la oficina — pregunta en recepción"),
    ("es", "clave primaria: id_usuario"),
    ("es", "contraseña: %DB_PASSWORD%"),
    // Catalan, Galician
    ("ca", "La contrasenya del servidor és al gestor de l'equip."),
    ("gl", "contrasinal do servidor: ver a caixa forte"),
    // Portuguese
    ("pt", "A senha do administrador fica no 1Password."),
    ("pt", "senha do administrador: ver o cofre"),
    ("pt", "A senha do banco de dados é trocada a cada 90 dias."),
    ("pt", "token do bot = ${BOT_TOKEN}"),
    ("pt", "o campo da senha chama-se password_hash"),
    // French
    ("fr", "Le mot de passe administrateur est dans 1Password."),
    ("fr", "mot de passe administrateur : voir le coffre"),
    (
        "fr",
        "Le mot de passe de la base de production change tous les 90 jours.",
    ),
    ("fr", "jeton d'accès à l'API : ${GITHUB_TOKEN}"),
    ("fr", "le champ du mot de passe s'appelle password_hash"),
    ("fr", "mot de passe : obligatoire pour la console"),
    // Italian
    ("it", "La password dell'amministratore è in 1Password."),
    ("it", "password dell'amministratore: vedi il vault"),
    (
        "it",
        "La password del database di produzione cambia ogni 90 giorni.",
    ),
    (
        "it",
        "chiave API del servizio di pagamento — $STRIPE_API_KEY",
    ),
    ("it", "il campo della password si chiama password_hash"),
    // German
    ("de", "Das Passwort des Administrators liegt in 1Password."),
    ("de", "Passwort des Administrators: siehe Tresor"),
    (
        "de",
        "Das Passwort der Produktionsdatenbank wird alle 90 Tage rotiert.",
    ),
    ("de", "Zugriffstoken der API = ${API_TOKEN}"),
    ("de", "Das Passwortfeld heißt password_hash."),
    ("de", "Kennwort für den Router — steht auf dem Aufkleber"),
    ("de", "Passwortlänge: 12 Zeichen"),
    // Dutch
    ("nl", "Het wachtwoord van de beheerder staat in 1Password."),
    ("nl", "wachtwoord van de beheerder: zie de kluis"),
    ("nl", "Het wachtwoord wordt elke 90 dagen gewijzigd."),
    ("nl", "API-sleutel van de betaaldienst — $STRIPE_API_KEY"),
    // Swedish, Norwegian, Danish, Icelandic
    ("sv", "Lösenordet till servern finns i 1Password."),
    ("sv", "lösenord för databasen: se valvet"),
    ("sv", "Lösenordet byts var 90:e dag."),
    ("no", "Passordet for ruteren står på klistremerket."),
    ("no", "passord til databasen: se hvelvet"),
    ("da", "Adgangskoden til serveren ligger i 1Password."),
    ("da", "adgangskode til databasen: se boksen"),
    ("is", "Lykilorðið er geymt í hvelfingunni."),
    // Turkish, Azerbaijani
    ("tr", "yönetici şifresi 1Password'de saklanıyor"),
    ("tr", "veritabanı şifresi: kasaya bakın"),
    ("tr", "Şifre her 90 günde bir değiştirilir."),
    ("tr", "şifre alanının adı password_hash"),
    ("tr", "API anahtarı: ${API_KEY}"),
    ("az", "açar söz seyfdə saxlanılır"),
    // Indonesian, Malay, Swahili
    ("id", "Kata sandi admin disimpan di 1Password."),
    ("id", "kata sandi database produksi: lihat brankas"),
    ("id", "Kata sandi diganti setiap 90 hari."),
    ("id", "token akses: ${GITHUB_TOKEN}"),
    ("ms", "Kata laluan pentadbir disimpan dalam peti besi."),
    ("sw", "Nenosiri la seva limehifadhiwa kwenye kasha."),
    // Vietnamese
    ("vi", "Mật khẩu quản trị được lưu trong 1Password."),
    ("vi", "mật khẩu quản trị: xem kho bí mật"),
    ("vi", "Mật khẩu được đổi mỗi 90 ngày."),
    ("vi", "mã truy cập = ${ACCESS_TOKEN}"),
    // Greek
    (
        "el",
        "Ο κωδικός πρόσβασης του διαχειριστή φυλάσσεται στο 1Password.",
    ),
    (
        "el",
        "κωδικός πρόσβασης της βάσης δεδομένων: δείτε το θησαυροφυλάκιο",
    ),
    ("el", "Ο κωδικός πρόσβασης αλλάζει κάθε 90 ημέρες."),
    ("el", "κλειδί API: ${API_KEY}"),
    // Arabic
    ("ar", "كلمة مرور المسؤول محفوظة في 1Password."),
    ("ar", "كلمة المرور الخاصة بقاعدة البيانات: راجع الخزنة"),
    ("ar", "تتغير كلمة المرور كل 90 يومًا."),
    ("ar", "مفتاح API: ${API_KEY}"),
    ("ar", "اسم حقل كلمة المرور هو password_hash"),
    // Persian
    ("fa", "رمز عبور مدیر سیستم در 1Password نگهداری می‌شود."),
    ("fa", "رمز عبور پایگاه داده: به گاوصندوق مراجعه کنید"),
    ("fa", "رمز عبور هر ۹۰ روز عوض می‌شود."),
    ("fa", "توکن دسترسی: ${GITHUB_TOKEN}"),
    // Urdu
    ("ur", "ایڈمن کا پاس ورڈ 1Password میں محفوظ ہے"),
    ("ur", "پاس ورڈ: والٹ دیکھیں"),
    // Hebrew
    ("he", "סיסמת המנהל שמורה ב-1Password."),
    ("he", "הסיסמה של מסד הנתונים: ראו את הכספת"),
    ("he", "הסיסמה מוחלפת כל 90 יום."),
    ("he", "טוקן גישה = ${ACCESS_TOKEN}"),
    // Hindi
    ("hi", "एडमिन का पासवर्ड 1Password में रखा है।"),
    ("hi", "डेटाबेस का पासवर्ड: वॉल्ट देखें"),
    ("hi", "पासवर्ड हर 90 दिन में बदला जाता है।"),
    ("hi", "टोकन = ${BOT_TOKEN}"),
    // Bengali
    ("bn", "অ্যাডমিনের পাসওয়ার্ড 1Password-এ রাখা আছে।"),
    ("bn", "পাসওয়ার্ড: ভল্ট দেখুন"),
    // Thai
    ("th", "รหัสผ่านผู้ดูแลระบบเก็บไว้ใน 1Password"),
    ("th", "รหัสผ่านของฐานข้อมูล: ดูในตู้เซฟ"),
    ("th", "รหัสผ่านจะถูกเปลี่ยนทุก 90 วัน"),
    // Chinese
    ("zh", "管理员密码保存在 1Password 中。"),
    ("zh", "管理员密码：见保险库"),
    ("zh", "数据库密码每 90 天轮换一次。"),
    ("zh", "访问令牌：${GITHUB_TOKEN}"),
    ("zh", "密码字段名为 password_hash"),
    ("zh", "口令长度至少 12 位"),
    ("zh", "密钥由 KMS 托管，不在代码里。"),
    ("zh", "秘钥：$API_SECRET"),
    ("zh", "密码是 12 位以上的随机串"),
    ("zh", "令牌有效期为 3600 秒"),
    // Japanese
    ("ja", "管理者のパスワードは 1Password に保管しています。"),
    ("ja", "管理者のパスワード：金庫を参照"),
    ("ja", "パスワードは90日ごとに変更します。"),
    ("ja", "APIキー：${API_KEY}"),
    ("ja", "パスワードの列名は password_hash です。"),
    ("ja", "暗証番号は4桁です。"),
    ("ja", "トークンの有効期限は 3600 秒です。"),
    // Korean
    ("ko", "관리자 비밀번호는 1Password에 보관합니다."),
    ("ko", "관리자 비밀번호: 금고 참고"),
    ("ko", "비밀번호는 90일마다 변경합니다."),
    ("ko", "API 키: ${API_KEY}"),
    ("ko", "비밀번호 필드 이름은 password_hash 입니다."),
    ("ko", "토큰 만료 시간은 3600초입니다."),
    // Where the Wi-Fi password is written, and everyday notes around credentials.
    ("ru", "Пароль от роутера написан на наклейке."),
    ("pl", "Hasło do Wi-Fi jest na tablicy w kuchni."),
    ("cs", "Heslo do wifi najdeš na nástěnce."),
    ("es", "La clave de la wifi está en el router."),
    ("pt", "A palavra-passe do wifi está no router."),
    ("fr", "Le code d'accès de la porte est affiché à l'accueil."),
    (
        "de",
        "Das WLAN-Passwort steht auf der Rückseite des Routers.",
    ),
    (
        "nl",
        "Het wachtwoord voor de wifi hangt bij de koffieautomaat.",
    ),
    ("tr", "Wifi şifresi modemin arkasında yazıyor."),
    ("id", "Kata sandi wifi ada di meja resepsionis."),
    ("vi", "Mật khẩu wifi dán ở quầy lễ tân."),
    ("el", "Ο κωδικός πρόσβασης για το wifi είναι στην ρεσεψιόν."),
    ("ar", "كلمة السر للواي فاي مكتوبة على الراوتر."),
    ("he", "הסיסמה לוויפי כתובה על הראוטר."),
    ("hi", "वाईफाई का पासवर्ड राउटर पर लिखा है।"),
    ("zh", "WiFi密码贴在路由器背面。"),
    ("ja", "wifiのパスワードはルーターの裏に書いてあります。"),
    ("ko", "와이파이 비밀번호는 공유기 뒷면에 있습니다."),
    ("ru", "Пароль: хранится в Vault (secret/prod/db)"),
    ("zh", "密码：存放在 Vault（secret/prod/db）"),
    ("ko", "토큰: 환경 변수 사용"),
    ("ja", "パスワード：環境変数 DB_PASSWORD を使う"),
    ("es", "contraseña: variable de entorno DB_PASSWORD"),
    ("de", "Passwort: Umgebungsvariable DB_PASSWORD"),
    ("fr", "mot de passe : variable d'environnement DB_PASSWORD"),
    ("pl", "hasło: zmienna środowiskowa DB_PASSWORD"),
    ("ru", "пароль: переменная окружения DB_PASSWORD"),
    ("zh", "密码：环境变量 DB_PASSWORD"),
    ("pt", "senha: variável de ambiente DB_PASSWORD"),
    ("de", "API-Schlüssel: in 1Password, Tresor \"Team\""),
    ("ru", "Ключ API: в 1Password"),
    ("ja", "APIキー: 1Password の「開発」保管庫"),
    ("fr", "clé API : dans 1Password"),
    (
        "en",
        "Staging DB: host db-staging.internal, user app, password in Vault",
    ),
    ("en", "password: same as staging"),
    ("en", "API key header: Authorization: Bearer <key>"),
    ("en", "secret: k8s/app-secrets"),
    ("en", "password input: <input type=\"password\">"),
    ("en", "token_type: Bearer"),
    ("en", "secret: see `kubectl get secret app -o yaml`"),
    ("en", "Rotate the token: `gh auth refresh -h github.com`."),
    ("en", "password: !env DB_PASSWORD"),
    (
        "en",
        "password hash format: $argon2id$v=19$m=65536,t=3,p=4$...",
    ),
    ("en", "token bucket: 100 tokens, refill 10/s"),
    ("en", "pass rate: 97.5%"),
    ("en", "pass/fail: 97/3"),
    (
        "en",
        "Pass `template.DefaultPattern` (not nil) to the loader.",
    ),
    (
        "en",
        "a single load pass seeds the env with what — Layer-1 only, or a fixpoint?",
    ),
    ("en", "Commit: 1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b"),
    ("en", "Session ID: 3f2a9c1e-7b5d-4e8a-b6c0-1d2e3f4a5b6c"),
    (
        "en",
        "secret: arn:aws:secretsmanager:us-east-1:123456789012:secret:prod/app-AbCdEf",
    ),
    ("en", "PIN: 0000 is the factory default, change it"),
    // Where those credentials are, what their policy is, how they are sent, and masks.
    (
        "ru",
        "Пароль для подключения к Redis на проде лежит в Vault.",
    ),
    (
        "ru",
        "Токен доступа к API платежей — в переменной PAYMENTS_TOKEN",
    ),
    ("ru", "пароль от учётки jenkins меняется автоматически"),
    ("ru", "Пароль к архиву не нужен."),
    ("ru", "пароль: как обычно, в менеджере паролей"),
    ("pl", "hasło do konta admina na produkcji: w sejfie"),
    ("cs", "heslo k účtu správce: v trezoru (položka „prod“)"),
    (
        "es",
        "la contraseña del usuario de la base de datos: en el gestor de secretos",
    ),
    ("pt", "A senha de acesso ao banco: no cofre do time"),
    (
        "fr",
        "Le mot de passe du compte de service est dans le coffre.",
    ),
    ("it", "la password del database di staging: nel vault"),
    (
        "de",
        "Das Passwort für den Datenbankbenutzer steht im Tresor.",
    ),
    (
        "nl",
        "Het wachtwoord van het serviceaccount staat in de kluis.",
    ),
    ("sv", "Lösenordet för databasanvändaren finns i valvet."),
    ("tr", "Veritabanı kullanıcısının şifresi kasada duruyor."),
    ("id", "Kata sandi untuk akun layanan ada di brankas."),
    ("vi", "Mật khẩu của tài khoản dịch vụ nằm trong kho bí mật."),
    (
        "el",
        "Ο κωδικός του λογαριασμού υπηρεσίας είναι στο θησαυροφυλάκιο.",
    ),
    ("ar", "كلمة مرور حساب الخدمة موجودة في الخزنة."),
    ("he", "רמז: הסיסמה נמצאת בכספת."),
    ("hi", "सर्विस अकाउंट का पासवर्ड वॉल्ट में है।"),
    ("th", "รหัสผ่านของบัญชีบริการอยู่ในตู้เซฟ"),
    ("zh", "服务账号的密码在保险库里。"),
    ("ja", "サービスアカウントのパスワードは金庫にあります。"),
    ("ko", "서비스 계정의 비밀번호는 금고에 있습니다."),
    ("zh", "数据库连接口令由 Vault 动态生成。"),
    ("zh", "秘钥（生产）：见 KMS"),
    ("ru", "Пароль: 8–64 символа"),
    ("ru", "Пароль: от 8 до 64 символов, буквы и цифры"),
    ("pl", "hasło: min. 12 znaków"),
    ("zh", "密码：8-64 位"),
    ("en", "password length: 8–64"),
    ("en", "Token: JWT (HS256), 15 min"),
    ("en", "Token: Bearer, 1h TTL"),
    ("ru", "API-ключ: выдаётся в личном кабинете"),
    ("ru", "Токен: получить через /api/v1/auth"),
    ("ja", "パスワード：管理画面で再発行"),
    ("ru", "Пароль администратора — в KeePass, файл team.kdbx"),
    ("de", "Passwort: wird per E-Mail verschickt"),
    ("fr", "mot de passe : envoyé par SMS"),
    ("pt", "senha: enviada por e-mail"),
    ("zh", "密码：通过短信发送"),
    ("de", "PIN: wird per Post verschickt"),
    ("ru", "Пароль от Wi-Fi: спросите на ресепшене"),
    ("ru", "Wi-Fi: OfficeNet (пароль на ресепшене)"),
    ("en", "password: ••••••••"),
    ("ru", "пароль: ********"),
    ("zh", "密码：******"),
    ("en", "password: [hidden]"),
    ("en", "token: <redacted>"),
    ("en", "password: (stored in vault)"),
    // Model, image and algorithm names, properties of a credential, digests.
    ("en", "token: gpt-4o-mini context is 128k"),
    ("en", "Token limit: gpt-4o has 128k"),
    ("en", "The token budget is gpt-4o-mini's 16k output."),
    ("en", "The API key is for claude-3-5-sonnet-20241022 only."),
    ("en", "password hashing is argon2id-v19 with m=64MiB"),
    ("ru", "Пароль: 2FA включена"),
    ("en", "password: v2 hashing (argon2id)"),
    ("en", "token: node-20-alpine image tag"),
    ("en", "The secret is named db-creds-v2 in the cluster."),
    ("en", "secret name: db-creds-v2"),
    ("en", "The password manager is 1Password 8."),
    ("en", "API key scope: read:org, repo"),
    ("en", "token expiry: 2025-12-31T23:59:59Z"),
    ("en", "password: bcrypt $2b$12$ prefix"),
    ("en", "token: sha256:4f8a2c6e1b9d3f7a (image digest)"),
    ("zh", "密钥：AES-256-GCM"),
    ("ja", "パスワード：bcrypt（コスト12）"),
    ("ko", "비밀번호: SHA-256 해시로 저장"),
    ("ru", "Пароль: хешируется bcrypt, cost 12"),
    ("es", "contraseña: cifrada con AES-256"),
    ("de", "Passwort: PBKDF2 mit 600000 Iterationen"),
    ("fr", "mot de passe : haché avec Argon2id"),
    ("pl", "hasło: hashowane SHA-512"),
    ("en", "API key: v1 deprecated, use v2"),
    ("en", "The token is in the X-Auth-Token header"),
    ("en", "The webhook secret header is Stripe-Signature."),
    ("en", "secret: Opaque (type of the k8s Secret)"),
    (
        "en",
        "Token: ${{ secrets.NPM_TOKEN }} in the release workflow",
    ),
    ("en", "password: use `openssl rand -base64 24`"),
    ("en", "the password is 24 random bytes, base64-encoded"),
    ("en", "tokens: 1.2M per day on average"),
    ("en", "PIN: 6 digits since v3.2"),
    // Arrows after a long label and in flows, with no credential after them.
    ("en", "deploy → staging → prod"),
    ("en", "a -> b"),
    ("en", "the api token for staging → rotated every 90 days"),
    (
        "en",
        "database password of the billing service -> see the team vault",
    ),
    ("en", "token refresh => retry once, then fail"),
    ("en", "SMTP password for the mail relay => $SMTP_PASSWORD"),
    ("de", "der API-Schlüssel für Produktion → siehe Vault"),
    ("de", "Passwortänderung -> Ticket an die IT"),
    ("ru", "пароль администратора для staging -> в хранилище"),
    ("ru", "сборка → тесты → выкладка"),
    (
        "es",
        "la contraseña de la base de datos de producción → en el gestor de secretos",
    ),
    (
        "es",
        "el token de acceso para staging => caduca cada 24 horas",
    ),
    ("zh", "生产环境的数据库密码 → 见保险库"),
    ("zh", "构建 -> 测试 -> 发布"),
    // What follows the arrow is a name followed by prose, not a random value.
    (
        "en",
        "the api token for staging → Jenkins2 reads it from the vault",
    ),
    (
        "de",
        "der API-Schlüssel für Produktion → Jenkins2 liest ihn aus dem Vault",
    ),
    (
        "es",
        "el token de acceso para staging -> python3 lo lee del vault",
    ),
    (
        "ru",
        "пароль администратора для staging -> Jenkins2 берёт его из хранилища",
    ),
];

fn all_credentials() -> impl Iterator<Item = (&'static str, &'static str)> {
    CREDENTIALS
        .iter()
        .chain(CREDENTIALS_OTHER_LANGUAGES)
        .copied()
        .chain(TAGGED_CREDENTIALS.iter().map(|(_, l, s)| (*l, *s)))
}

fn all_harmless() -> impl Iterator<Item = &'static str> {
    HARMLESS
        .iter()
        .chain(HARMLESS_OTHER_LANGUAGES)
        .copied()
        .chain(TAGGED_HARMLESS.iter().map(|(_, l)| *l))
}

/// The corpus sizes: at least 400 credential and 300 harmless lines, at least 40% of each not in
/// English, in at least 20 languages. Prints the counts and how many lines the filter refuses on
/// each side.
#[test]
fn the_corpus_has_400_credentials_and_300_harmless_lines_40_percent_not_in_english() {
    let cred = all_credentials().count();
    let harmless = all_harmless().count();
    let cred_other = CREDENTIALS_OTHER_LANGUAGES.len()
        + TAGGED_CREDENTIALS
            .iter()
            .filter(|(l, _, _)| *l != "en")
            .count();
    let harmless_other =
        HARMLESS_OTHER_LANGUAGES.len() + TAGGED_HARMLESS.iter().filter(|(l, _)| *l != "en").count();
    let languages: BTreeSet<&str> = TAGGED_CREDENTIALS
        .iter()
        .map(|(l, _, _)| *l)
        .chain(TAGGED_HARMLESS.iter().map(|(l, _)| *l))
        .collect();
    let refused = all_credentials()
        .filter(|(l, _)| SecretFilter::find(l).is_some())
        .count();
    let harmless_refused = all_harmless()
        .filter(|l| SecretFilter::find(l).is_some())
        .count();
    let cred_share = cred_other as f64 / cred as f64;
    let harmless_share = harmless_other as f64 / harmless as f64;
    println!(
        "secret corpus: {cred} credential lines, {refused} refused ({:.0}%), {cred_other} not in \
         English ({:.0}%); {harmless} harmless lines, {} kept, {harmless_refused} refused ({:.0}%), \
         {harmless_other} not in English ({:.0}%); {} languages: {}",
        refused as f64 * 100.0 / cred as f64,
        cred_share * 100.0,
        harmless - harmless_refused,
        harmless_refused as f64 * 100.0 / harmless as f64,
        harmless_share * 100.0,
        languages.len(),
        languages.iter().copied().collect::<Vec<_>>().join(" ")
    );
    assert!(cred >= 400 && harmless >= 300, "{cred} / {harmless}");
    assert!(
        cred_share >= 0.4 && harmless_share >= 0.4,
        "{cred_share} / {harmless_share}"
    );
    assert!(languages.len() >= 20, "{languages:?}");
    assert_eq!((refused, harmless_refused), (cred, 0));
}

#[test]
fn every_credential_line_is_refused_without_echoing_it() {
    let mut missed = Vec::new();
    for (line, secret) in all_credentials() {
        match SecretFilter::check(line) {
            Err(SecretFound { pattern }) => {
                let msg = SecretFilter::check(line).unwrap_err().to_string();
                assert!(msg.contains(pattern), "{msg}");
                // Short values ("x", "abc") occur in any English sentence; check the distinctive ones
                // and the line itself.
                assert!(
                    secret.len() < 5 || !msg.contains(secret),
                    "the error leaks `{secret}`: {msg}"
                );
                assert!(!msg.contains(line), "the error echoes the line: {msg}");
            }
            other => missed.push(format!("{line:?} -> {other:?}")),
        }
    }
    assert!(
        missed.is_empty(),
        "accepted credentials ({}):\n{}",
        missed.len(),
        missed.join("\n")
    );
}

/// What the write path refuses, the read path withholds: redaction removes the value of every
/// tagged credential line.
#[test]
fn every_tagged_credential_is_redacted() {
    let mut leaked = Vec::new();
    for (_, line, secret) in TAGGED_CREDENTIALS {
        let (out, n) = redact_secrets(line);
        if n == 0 || out.contains(secret) {
            leaked.push(format!("{line:?} -> {out:?}"));
        }
    }
    assert!(
        leaked.is_empty(),
        "not redacted ({}):\n{}",
        leaked.len(),
        leaked.join("\n")
    );
}

#[test]
fn every_harmless_line_is_accepted() {
    let refused: Vec<String> = all_harmless()
        .filter_map(|line| SecretFilter::find(line).map(|p| format!("{line:?} -> {p}")))
        .collect();
    assert!(
        refused.is_empty(),
        "refused harmless lines ({}):\n{}",
        refused.len(),
        refused.join("\n")
    );
    for line in all_harmless() {
        assert_eq!(redact_secrets(line).1, 0, "{line}");
    }
}

/// No file of the real Claude Code memory dirs in `../shared/data/realmem/` is refused.
#[test]
fn no_real_memory_file_is_refused() {
    let root = memloop_testkit::shared_data().join("realmem");
    if !root.is_dir() {
        assert!(
            std::env::var_os("CI").is_none(),
            "{} is missing under CI",
            root.display()
        );
        eprintln!("SKIP: {} is absent", root.display());
        return;
    }
    let mut stack = vec![root];
    let (mut checked, mut refused) = (0usize, Vec::new());
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "md") {
                let text = String::from_utf8_lossy(&std::fs::read(&path).unwrap()).into_owned();
                checked += 1;
                if let Some(p) = SecretFilter::find(&text) {
                    refused.push(format!("{} -> {p}", path.display()));
                }
            }
        }
    }
    println!("real memory files checked: {checked}");
    assert!(checked >= 100, "{checked} files");
    assert!(refused.is_empty(), "refused:\n{}", refused.join("\n"));
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(512))]
    /// Any text, made of label words, separators, copulas and values of every script: the filter
    /// never panics, its spans are sorted, disjoint and on character boundaries, and redaction
    /// leaves no span's text behind.
    #[test]
    fn any_text_is_judged_without_panicking(parts in proptest::collection::vec(
        proptest::sample::select(vec![
            "password", "пароль", "密码", "口令", "パスワード", "비밀번호", "hasło", "κωδικός πρόσβασης",
            "كلمة المرور", "token", "API-ключ", "pass", ":", "：", "=", "—", " - ", "is", "是", "は",
            "는", " ", " ", "\n", "\t", ",", ".", "!", "**", "`", "\"", "'", "/", "Qw7zLp2Vn9",
            "hunter2", "ghp_", "sk_live_", "xoxb-", "AKIA", "eyJ", "-----BEGIN RSA PRIVATE KEY-----",
            "$X", "${X}", "%X%", "env:X", "1Password", "12", "é", "ё", "🙂", "\u{0301}", "ｐａｓｓ",
            "admin", "for the", "de la", "администратора", "的", "abc", "0", "\r\n", "「", "」", "“",
            "”", "。",
        ]),
        0..24,
    )) {
        let text: String = parts.concat();
        let _ = SecretFilter::find(&text);
        let spans = SecretFilter::spans(&text);
        let mut end = 0;
        for (r, _) in &spans {
            proptest::prop_assert!(r.start >= end && r.start < r.end && r.end <= text.len());
            proptest::prop_assert!(text.is_char_boundary(r.start) && text.is_char_boundary(r.end));
            end = r.end;
        }
        let (out, n) = redact_secrets(&text);
        proptest::prop_assert_eq!(n, spans.len());
        if n == 0 {
            proptest::prop_assert_eq!(out, text);
        }
    }
}
