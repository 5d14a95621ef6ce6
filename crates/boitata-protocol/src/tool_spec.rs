//! [`ToolSpec`]: a tool as a model sees it.

use serde::{Deserialize, Serialize};

/// What the model may call: a name, a description and a JSON Schema of the arguments.
///
/// The tools make these; the providers send them to the model API in its own shape
/// (OpenAI `tools[].function`, Anthropic `tools[]`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    /// The tool's name (`file_read`, …).
    pub name: String,
    /// What it does, for the model.
    pub description: String,
    /// JSON Schema (an `object` schema) of its arguments.
    pub parameters: serde_json::Value,
}
