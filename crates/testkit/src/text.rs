//! Text for tests and benches of the credential filter and of the stores that run it.

/// Ordinary memory text of `len` bytes (cut at a char boundary): prose in several languages
/// that talks about passwords, tokens and API keys without giving one, so every rule of the
/// secret filter runs to the end and none refuses it. Its lines are cycled until the length is
/// reached.
///
/// ```
/// let text = memloop_testkit::harmless_text(1024);
/// assert!(text.len() <= 1024 && text.len() > 1000);
/// assert!(text.contains("password"));
/// ```
pub fn harmless_text(len: usize) -> String {
    const LINES: &[&str] = &[
        "The user prefers small commits and runs the tests before pushing.",
        "Passwords are stored in 1Password; the token is read from GITHUB_TOKEN.",
        "password: see the team vault entry for staging",
        "Пароль хранится в хранилище секретов, его меняют раз в квартал.",
        "密码存放在团队保险库中，每季度轮换一次。",
        "La contraseña debe tener al menos 12 caracteres.",
        "API key: ${ANTHROPIC_API_KEY} (set by the CI job)",
        "Deploys go through the staging cluster first; ask Maria before a rollback.",
        "Der API-Schlüssel kommt aus der Umgebungsvariable.",
        "パスワードは12文字以上にしてください。",
    ];
    let mut out = String::with_capacity(len + 128);
    let mut i = 0;
    while out.len() < len {
        out.push_str(LINES[i % LINES.len()]);
        out.push('\n');
        i += 1;
    }
    let mut cut = len;
    while !out.is_char_boundary(cut) {
        cut -= 1;
    }
    out.truncate(cut);
    out
}
