//! `anthropic` provider (placeholder: filled in by the providers work).
