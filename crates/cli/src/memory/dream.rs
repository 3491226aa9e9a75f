//! `memory dream`: consolidate now with [`DreamHook::run_now`] (the dream's gates unless
//! `--force`, its cross-process lock always), on the model `--provider` / `--model` name.

use crate::args::ModelArgs;
use crate::context::{Context, Io, write_json};
use anyhow::{Context as _, bail};
use memloop_core::model::Model;
use memloop_memory::dream::{DreamConfig, DreamHook, ManualDream};
use serde_json::json;
use std::sync::Arc;

/// The chat model `args` name, configured from the environment the CLI was given.
pub fn chat_model(ctx: &Context, args: &ModelArgs) -> anyhow::Result<Arc<dyn Model>> {
    let Some(provider) = &args.provider else {
        bail!(
            "this command needs a model: --provider anthropic|openai (or MEMLOOP_PROVIDER), \
             configured by ANTHROPIC_API_KEY / ANTHROPIC_BASE_URL or OPENAI_BASE_URL / \
             OPENAI_API_KEY, with --model NAME (or MEMLOOP_MODEL)"
        );
    };
    memloop_providers::from_env_with(provider, args.model.as_deref(), &ctx.env)
        .with_context(|| format!("cannot configure the {provider} model"))
}

/// Consolidate the memory dir now.
pub async fn dream(
    ctx: &Context,
    io: &mut Io<'_>,
    force: bool,
    args: &ModelArgs,
) -> anyhow::Result<()> {
    let model = chat_model(ctx, args)?;
    let (resolved, store) = ctx.open_existing().await?;
    let hook = DreamHook::with_parts(
        store.clone(),
        DreamConfig::from_env(&ctx.env),
        Arc::new(memloop_memory::dream::SessionRecords::for_memory_dir(
            &store.local_dir_or_temp(memloop_store::LocalPurpose::SessionRecords),
        )),
        memloop_memory::dream::Consolidator::new(store.clone()),
    );
    let outcome = hook.run_now(model, force).await?;
    if ctx.json {
        let v = match &outcome {
            ManualDream::Finished { paths } => json!({"status": "finished", "written": paths}),
            ManualDream::Skipped(gate) => json!({"status": "skipped", "gate": gate.as_str()}),
        };
        return write_json(io.out, &v);
    }
    match outcome {
        ManualDream::Finished { paths } if paths.is_empty() => writeln!(
            io.out,
            "consolidated {}: nothing written",
            resolved.dir.display()
        )?,
        ManualDream::Finished { paths } => {
            writeln!(io.out, "consolidated {}:", resolved.dir.display())?;
            for p in paths {
                writeln!(io.out, "  wrote {p}")?;
            }
        }
        ManualDream::Skipped(gate) => writeln!(
            io.out,
            "not consolidated: the `{}` gate stopped it{}",
            gate.as_str(),
            if gate == memloop_memory::dream::DreamGate::Lock {
                " (another consolidation holds the lock)"
            } else {
                " (--force skips it)"
            }
        )?,
    }
    Ok(())
}
