//! [`MemorySession`]: memloop's memory for an agent that runs on a loop of its own, driving the
//! parts [`MemorySetup::attach`] wires into memloop's loop.

use crate::setup::{MemorySetup, SetupError};
use memloop_compact::Compactor;
use memloop_core::compaction::{CompactionError, CompactionTrigger, ContextCompactor};
use memloop_core::events::{AgentEvent, EventSink, NullSink};
use memloop_core::message::{ContentBlock, Message, Role};
use memloop_core::model::{Model, ModelResponse};
use memloop_core::prompt::SystemSection;
use memloop_core::tokens::{CharEstimator, TokenCounter, estimate_messages};
use memloop_core::tool::{AgentKind, ToolContext, ToolRegistry, ToolSpec};
use memloop_core::window::ContextWindow;
use memloop_core::{BackgroundTasks, CancellationToken, DrainReport, Hook, HookContext};
use memloop_memory::prompt::MemorySection;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

/// Why a [`MemorySession`] call failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SessionError {
    /// [`call_tool`](MemorySession::call_tool) named a tool the session does not have.
    #[error("no memory tool named `{0}`")]
    UnknownTool(String),
    /// The tool's arguments are not JSON.
    #[error("the arguments of `{tool}` are not JSON: {error}")]
    BadArguments {
        /// The tool.
        tool: String,
        /// What the JSON parser said.
        error: String,
    },
    /// The tool ran and failed; the text is for the model, as a tool error.
    #[error("{0}")]
    ToolFailed(String),
    /// Compaction failed; the conversation is unchanged.
    #[error(transparent)]
    Compaction(#[from] CompactionError),
}

/// What [`MemorySession::recall`] surfaced for one user message.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Recalled {
    /// The user's message as the session recorded it: its text, then one text block per
    /// attachment (the memories, and with [`MemorySetup::saved_notice`] the saved-memories
    /// line). Send it to the model in place of the plain message, and pass it back in
    /// [`after_turn`](MemorySession::after_turn) if you pass the user's message at all (same
    /// id: it is recognised, not added twice).
    pub message: Message,
    /// The attachments' text alone, each wrapped as a `<system-reminder>`, for a host that
    /// adds them to its own message instead: empty when nothing surfaced in time.
    pub blocks: Vec<String>,
}

impl Recalled {
    /// Whether anything surfaced.
    pub fn is_empty(&self) -> bool {
        self.blocks.is_empty()
    }
}

/// Memory for one conversation of an agent on a host's own loop (not
/// [`memloop::core::Agent`](crate::core::Agent)). Open one with [`MemorySetup::open_session`].
/// `Send + Sync`; share it with an `Arc`.
///
/// A session is one conversation. It drives the very parts [`MemorySetup::attach`] wires into
/// memloop's loop (the recall hook, the extraction scheduler, the dream, the session notes hook,
/// the compactor, the memory tools and the memory section of the system prompt), built by the
/// same code, at the same points memloop's loop calls them:
///
/// | the host's loop | call | what runs |
/// |---|---|---|
/// | builds the system prompt | [`system_prompt_section`](MemorySession::system_prompt_section) | the memory section (how to use memory, the `MEMORY.md` index) |
/// | declares its tools | [`tools`](MemorySession::tools) | `memory_read`, `memory_write`, `memory_delete` (and `memory_log_append` in daily-log mode) with JSON schemas |
/// | the model calls one | [`call_tool`](MemorySession::call_tool) | the tool; what it wrote is remembered so extraction skips a turn where the agent saved a memory itself |
/// | a user message arrives | [`recall`](MemorySession::recall) | turn start: recall selects memories in the background, within the budgets, never one twice in a session, each with its age |
/// | the turn ended with an answer | [`after_turn`](MemorySession::after_turn) | the session notes update check, then extraction in the background (one run per memory dir at a time, plus one trailing run), and the dream's gates |
/// | the context is too long | [`compact`](MemorySession::compact) | compaction: the session notes as the summary, the newest 10K–40K tokens kept, tool calls kept with their results |
/// | the session ends | [`flush`](MemorySession::flush) / [`shutdown`](MemorySession::shutdown) | waits for the background work |
///
/// Messages are memloop's own ([`Message`]): a host converts its messages to and from them. The
/// session keeps its own record of the conversation (what `recall` and `after_turn` gave it), and
/// recognises a message by its id ([`Message::id`]): keep the `Message` values you exchange with
/// the session (or their ids) rather than converting your own messages anew each turn.
///
/// ## Where a host loop differs from memloop's
///
/// - **Recall has a deadline.** memloop's loop attaches recalled memories at the first check
///   after they are ready, even after its first model call. Here the host waits at most the
///   deadline it gives [`recall`](MemorySession::recall): what is not ready then is dropped (the
///   selection is cancelled), is not counted as surfaced, and may surface at a later turn. It is
///   never delivered late.
/// - **Delivered means shown.** Memories `recall` returns count as surfaced (never shown again
///   this session, their bytes spent from the budget) whether or not the host puts them in front
///   of the model.
/// - **One sampling point per turn.** memloop's loop checks the session notes' thresholds after
///   every model response; here [`after_turn`](MemorySession::after_turn) checks once, after the
///   turn's last response.
/// - **Not wired here:** session transcripts, sub-agents and project instructions, which are parts
///   of memloop's loop rather than of memory; automatic compaction (the host decides when to
///   call [`compact`](MemorySession::compact)).
///
/// Background work (extraction, notes updates, the dream) runs on the tokio runtime the calls
/// are made on; call [`flush`](MemorySession::flush) before the process exits.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use memloop::{MemorySetup, host::env::EnvVars, memory::paths::MemoryDirResolver};
/// use memloop::testkit::{ScriptStep, ScriptedModel};
/// use std::{sync::Arc, time::Duration};
///
/// let tmp = tempfile::tempdir()?;
/// let env = EnvVars::from_pairs([("MEMLOOP_HOME", tmp.path().to_string_lossy())]);
/// let setup = MemorySetup::with_resolver(MemoryDirResolver::new(tmp.path()), env)?;
/// let model = ScriptedModel::new().on_purpose("extractor", |_| Some(ScriptStep::text("Nothing new.")));
/// let memory = setup.open_session(Arc::new(model), "session-1")?;
///
/// let recalled = memory.recall("How do we deploy?", Duration::from_secs(2)).await;
/// // ... the host's model call, with memory.system_prompt_section() and memory.tools() ...
/// memory.after_turn(&[recalled.message, memloop::core::message::Message::assistant("With pnpm.")]).await;
/// assert!(memory.flush(Duration::from_secs(60)).await.completed);
/// # Ok(()) }
/// ```
pub struct MemorySession {
    session_id: String,
    cwd: PathBuf,
    model: Arc<dyn Model>,
    /// The tools the host's model may call.
    tools: ToolRegistry,
    section: Option<Arc<MemorySection>>,
    /// In the order memloop's loop fires them: team pull, recall, extraction, dream, notes.
    hooks: Vec<Arc<dyn Hook>>,
    compactor: Option<Arc<Compactor>>,
    counter: Arc<dyn TokenCounter>,
    window: ContextWindow,
    events: Arc<dyn EventSink>,
    background: BackgroundTasks,
    cancel: CancellationToken,
    state: Mutex<State>,
}

impl std::fmt::Debug for MemorySession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemorySession")
            .field("session_id", &self.session_id)
            .field("tools", &self.tools.names())
            .field("hooks", &self.hooks.len())
            .field("compaction", &self.compactor.is_some())
            .finish_non_exhaustive()
    }
}

/// The session's record of the conversation and its turn.
#[derive(Default)]
struct State {
    messages: Arc<Vec<Message>>,
    turn: u64,
    /// The system prompt the session last rendered (what the extraction fork shares).
    system: Arc<Vec<String>>,
    /// Files the memory tools wrote since the last `after_turn`.
    written: Vec<PathBuf>,
    /// Tools called through the session since the last `after_turn`, and whether one failed.
    tool_log: BTreeMap<String, bool>,
    /// Tools that succeeded and never failed in the previous turn.
    recent_tools: Vec<String>,
}

impl MemorySetup {
    /// Memory for one conversation of an agent on the host's own loop, with the session id
    /// `session_id` (one per conversation; the session notes live under it). `model` runs the
    /// background writers (the extraction fork, the notes updater, a compaction summary when
    /// the notes cannot serve): usually the host's model behind memloop's
    /// [`Model`](crate::core::model::Model) trait.
    ///
    /// The parts are the ones [`attach`](Self::attach) wires, built by the same code, with the
    /// same settings; with memory switched off the session has no tools, no section and recalls
    /// nothing (compaction still works when configured). Token sizes are estimated with
    /// [`CharEstimator`](crate::core::tokens::CharEstimator), as an agent's are by default.
    pub fn open_session(
        &self,
        model: Arc<dyn Model>,
        session_id: impl Into<String>,
    ) -> Result<MemorySession, SetupError> {
        let session_id = session_id.into();
        let counter: Arc<dyn TokenCounter> = Arc::new(CharEstimator);
        let mut tools = ToolRegistry::new();
        let mut hooks = Vec::new();
        let mut section = None;
        if let Some(parts) = self.memory_parts()? {
            for tool in parts.tools {
                tools.register(tool);
            }
            section = Some(parts.section);
            hooks = parts.hooks;
        }
        let mut compactor = None;
        if let Some(parts) = self.compaction_parts(&session_id, counter.clone())? {
            // The notes' edit tool is the notes updater's alone (it binds it itself): it is not
            // offered to the host's model.
            if let Some((_, hook)) = parts.notes {
                hooks.push(hook);
            }
            compactor = Some(parts.compactor);
        }
        let window = compactor
            .as_ref()
            .map(|c| c.window().clone())
            .unwrap_or_else(|| ContextWindow::new(memloop_core::window::DEFAULT_CONTEXT_WINDOW));
        Ok(MemorySession {
            session_id,
            cwd: self.working_dir().to_path_buf(),
            model,
            tools,
            section,
            hooks,
            compactor,
            counter,
            window,
            events: Arc::new(NullSink),
            background: BackgroundTasks::new(),
            cancel: CancellationToken::new(),
            state: Mutex::new(State::default()),
        })
    }
}

impl MemorySession {
    /// Report memloop's events (recall's `MemoriesSurfaced`, extraction's `MemoriesSaved`,
    /// warnings...) to `sink` (builder style; by default they are dropped).
    pub fn with_events(mut self, sink: Arc<dyn EventSink>) -> Self {
        self.events = sink;
        self
    }

    /// The session id.
    pub fn session_id(&self) -> &str {
        &self.session_id
    }

    /// The memory section of the system prompt (how to use memory, the `MEMORY.md` index), read
    /// now; `None` when memory is off. Put it in the system prompt of every request.
    pub async fn system_prompt_section(&self) -> Option<String> {
        let text = self.section.as_ref()?.compute().await;
        self.lock().system = Arc::new(text.iter().cloned().collect());
        text
    }

    /// The memory tools the host's model may call, with their JSON schemas
    /// ([`ToolSpec::input_schema`]); empty when memory is off.
    pub fn tools(&self) -> Vec<ToolSpec> {
        self.tools.specs()
    }

    /// Run the memory tool `name` with `args_json` (the model's tool-call arguments) and return
    /// its text for the model. A tool's own failure is [`SessionError::ToolFailed`], whose text
    /// is for the model too (send it as an error result).
    pub async fn call_tool(&self, name: &str, args_json: &str) -> Result<String, SessionError> {
        let tool = self
            .tools
            .get(name)
            .ok_or_else(|| SessionError::UnknownTool(name.to_owned()))?;
        let input: serde_json::Value =
            serde_json::from_str(args_json).map_err(|e| SessionError::BadArguments {
                tool: name.to_owned(),
                error: e.to_string(),
            })?;
        let ctx = ToolContext {
            session_id: self.session_id.clone(),
            cwd: self.cwd.clone(),
            agent: AgentKind::Main,
            cancel: self.cancel.child_token(),
        };
        let out = tool.call(input, &ctx).await;
        {
            let mut state = self.lock();
            state.written.extend(out.files_written.iter().cloned());
            *state.tool_log.entry(name.to_owned()).or_default() |= out.is_error;
        }
        match out.is_error {
            true => Err(SessionError::ToolFailed(out.content)),
            false => Ok(out.content),
        }
    }

    /// A user message arrived: start the turn. Recall selects the memories relevant to
    /// `user_message` in the background and this waits for it at most `deadline`; what is not
    /// ready by then is dropped (see [`MemorySession`]). The message is
    /// recorded as the turn's user message.
    pub async fn recall(&self, user_message: &str, deadline: Duration) -> Recalled {
        let until = tokio::time::Instant::now() + deadline;
        let user = Message::user(user_message);
        let id = user.id.clone();
        let ctx = {
            let mut state = self.lock();
            state.turn += 1;
            Arc::make_mut(&mut state.messages).push(user.clone());
            self.context(&state, self.cancel.child_token())
        };
        let mut pending = Vec::new();
        for hook in &self.hooks {
            if let Some(p) = hook.on_turn_start(&ctx, user_message).await {
                pending.push(p);
            }
        }
        let mut blocks = Vec::new();
        for p in pending {
            // Dropping an unsettled attachment at the deadline cancels its work, which then
            // records nothing.
            if let Ok(Some(att)) = tokio::time::timeout_at(until, p.wait()).await {
                self.events.emit(AgentEvent::AttachmentAdded {
                    kind: att.kind.clone(),
                    bytes: att.text.len(),
                });
                blocks.push(att.render());
            }
        }
        let mut state = self.lock();
        let messages = Arc::make_mut(&mut state.messages);
        let message = match messages.iter_mut().rev().find(|m| m.id == id) {
            Some(m) => {
                m.content
                    .extend(blocks.iter().cloned().map(ContentBlock::text));
                m.clone()
            }
            None => user,
        };
        Recalled { message, blocks }
    }

    /// The turn ended with the model's answer: `new_messages` are the messages the turn added
    /// (the assistant's answers, tool calls and results; the user's message too when
    /// [`recall`](Self::recall) was not called, or as it was returned). A message whose id
    /// the session holds replaces it; the others are appended. Then the session notes' update
    /// check runs (an update is queued in the background), and extraction is handed the turn in
    /// the background: skipped when the agent saved a memory itself through
    /// [`call_tool`](Self::call_tool) since the last extraction. Returns at once.
    pub async fn after_turn(&self, new_messages: &[Message]) {
        let ctx = {
            let mut state = self.lock();
            let written = std::mem::take(&mut state.written);
            let tool_log = std::mem::take(&mut state.tool_log);
            state.recent_tools = tool_log
                .into_iter()
                .filter(|(_, failed)| !failed)
                .map(|(name, _)| name)
                .collect();
            let messages = Arc::make_mut(&mut state.messages);
            let first_new = messages.len();
            for m in new_messages {
                match messages.iter_mut().rev().find(|held| held.id == m.id) {
                    Some(held) => *held = m.clone(),
                    None => messages.push(m.clone()),
                }
            }
            // The memory tools' writes go on the turn's tool results, as memloop's loop records
            // them (else on its last message): extraction sees the agent saved a memory itself.
            if !written.is_empty() {
                let tail = &mut messages[first_new..];
                let at = tail
                    .iter()
                    .position(|m| m.tool_result_ids().next().is_some())
                    .or_else(|| tail.len().checked_sub(1));
                match at {
                    Some(i) => tail[i].meta.files_written.extend(written),
                    None => {
                        if let Some(last) = messages.last_mut() {
                            last.meta.files_written.extend(written);
                        }
                    }
                }
            }
            self.context(&state, self.cancel.clone())
        };
        let response = new_messages
            .iter()
            .rev()
            .find(|m| m.role == Role::Assistant)
            .map(|m| ModelResponse::from_blocks(m.content.clone()));
        if let Some(response) = response {
            for hook in &self.hooks {
                hook.after_sampling(&ctx, &response).await;
            }
        }
        // As memloop's loop fires its stop hooks: tracked background tasks, never awaited here.
        for (i, hook) in self.hooks.iter().enumerate() {
            let (hook, ctx) = (hook.clone(), ctx.clone());
            self.background.spawn(
                format!("stop-hook-{i}"),
                async move { hook.on_stop(ctx).await },
            );
        }
    }

    /// Compact `messages` (the conversation as the host has it, in memloop messages with the
    /// ids the session knows), whatever its size: the session notes become the summary and the
    /// newest messages are kept (by default 10K–40K tokens, a tool call always with its result);
    /// when the notes cannot serve, a summary written by the model. Returns the new
    /// conversation, which the session records as its own; `messages` unchanged when there was
    /// nothing to compact or no compaction is configured. Recall's per-session bookkeeping
    /// resets (memories may surface again), extraction keeps the messages it has not read yet.
    pub async fn compact(&self, messages: Vec<Message>) -> Result<Vec<Message>, SessionError> {
        let Some(compactor) = &self.compactor else {
            return Ok(messages);
        };
        let before = {
            let mut state = self.lock();
            state.messages = Arc::new(messages.clone());
            self.context(&state, self.cancel.child_token())
        };
        let Some(outcome) = compactor
            .maybe_compact(&before, CompactionTrigger::Manual)
            .await?
        else {
            return Ok(messages);
        };
        for hook in &self.hooks {
            hook.on_compacting(&before).await;
        }
        let after = {
            let mut state = self.lock();
            state.messages = Arc::new(outcome.messages.clone());
            self.context(&state, self.cancel.child_token())
        };
        self.events.emit(AgentEvent::Compacted {
            strategy: outcome.strategy,
            tokens_before: outcome.tokens_before,
            tokens_after: outcome.tokens_after,
            messages_kept: outcome.messages_kept,
        });
        for hook in &self.hooks {
            hook.on_compacted(&after).await;
        }
        Ok(outcome.messages)
    }

    /// Wait for the background work started so far (extraction and its trailing run, notes
    /// updates, the dream) at most `timeout`; the report names what was still running.
    pub async fn flush(&self, timeout: Duration) -> DrainReport {
        self.background.drain(timeout).await
    }

    /// [`flush`](Self::flush), then cancel what is still running: the end of the session.
    pub async fn shutdown(&self, timeout: Duration) -> DrainReport {
        let report = self.flush(timeout).await;
        self.cancel.cancel();
        report
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A poisoned lock only means a panic elsewhere while holding it; the state stays usable.
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The snapshot the hooks see, as memloop's loop builds it.
    fn context(&self, state: &State, cancel: CancellationToken) -> HookContext {
        HookContext {
            session_id: self.session_id.clone(),
            turn: state.turn,
            agent: AgentKind::Main,
            cwd: self.cwd.clone(),
            model: self.model.clone(),
            system: state.system.clone(),
            messages: state.messages.clone(),
            tools: self.tools.clone(),
            context_tokens: estimate_messages(self.counter.as_ref(), &state.messages),
            recent_tools: state.recent_tools.clone(),
            window: self.window.clone(),
            events: self.events.clone(),
            background: self.background.clone(),
            cancel,
            capture: None,
        }
    }
}
