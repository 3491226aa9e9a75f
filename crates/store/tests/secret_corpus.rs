//! The secret filter against a table of credential lines (every one refused, the error naming
//! the pattern and never the value) and a table of harmless lines that talk about passwords,
//! tokens and secrets (every one accepted), in English and in thirty-eight other languages; and the
//! real memory dirs in `../shared/data/realmem/`, none of whose files is refused.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    clippy::print_stderr
)]

use memloop_store::{MemoryError, SecretFilter};

/// (line, the secret part that must never appear in the error)
const CREDENTIALS: &[(&str, &str)] = &[
    // The plain assignments that used to slip through.
    ("password = hunter", "hunter"),
    ("wifi password: letmein", "letmein"),
    ("password = x", "= x"),
    ("secret_key: changeme", "changeme"),
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

/// The corpus sizes: at least 150 credential and 150 harmless lines, a third of each not in
/// English.
#[test]
fn the_corpus_has_150_lines_of_each_kind_a_third_not_in_english() {
    let cred = CREDENTIALS.len() + CREDENTIALS_OTHER_LANGUAGES.len();
    let harmless = HARMLESS.len() + HARMLESS_OTHER_LANGUAGES.len();
    let cred_share = CREDENTIALS_OTHER_LANGUAGES.len() as f64 / cred as f64;
    let harmless_share = HARMLESS_OTHER_LANGUAGES.len() as f64 / harmless as f64;
    println!(
        "secret corpus: {cred} credential lines ({} not in English, {:.0}%), {harmless} harmless \
         lines ({} not in English, {:.0}%)",
        CREDENTIALS_OTHER_LANGUAGES.len(),
        cred_share * 100.0,
        HARMLESS_OTHER_LANGUAGES.len(),
        harmless_share * 100.0
    );
    assert!(cred >= 150 && harmless >= 150, "{cred} / {harmless}");
    assert!(
        cred_share >= 1.0 / 3.0 && harmless_share >= 1.0 / 3.0,
        "{cred_share} / {harmless_share}"
    );
}

#[test]
fn every_credential_line_is_refused_without_echoing_it() {
    let mut missed = Vec::new();
    for (line, secret) in CREDENTIALS.iter().chain(CREDENTIALS_OTHER_LANGUAGES) {
        match SecretFilter::check(line) {
            Err(MemoryError::SensitiveData { pattern }) => {
                let msg = SecretFilter::check(line).unwrap_err().to_string();
                assert!(msg.contains(&pattern), "{msg}");
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
        "accepted credentials:\n{}",
        missed.join("\n")
    );
}

#[test]
fn every_harmless_line_is_accepted() {
    let refused: Vec<String> = HARMLESS
        .iter()
        .chain(HARMLESS_OTHER_LANGUAGES)
        .filter_map(|line| SecretFilter::find(line).map(|p| format!("{line:?} -> {p}")))
        .collect();
    assert!(
        refused.is_empty(),
        "refused harmless lines:\n{}",
        refused.join("\n")
    );
}

/// No file of the real Claude Code memory dirs in `../shared/data/realmem/` is refused.
#[test]
fn no_real_memory_file_is_refused() {
    let root = memloop_core::testing::shared_data().join("realmem");
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
