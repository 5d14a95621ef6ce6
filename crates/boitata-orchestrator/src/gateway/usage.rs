//! The provider's own usage report, read from its answer as the gateway passes it on.
//!
//! - OpenAI Chat Completions: `usage.prompt_tokens` and `usage.completion_tokens` of
//!   the answer, or, streamed, of the last chunk (`choices: []`) that
//!   `stream_options.include_usage` asks for.
//! - Anthropic Messages: `usage.input_tokens` (plus the cache's
//!   `cache_creation_input_tokens` and `cache_read_input_tokens`) and
//!   `usage.output_tokens`; streamed, from `message_start` and the cumulative
//!   `message_delta`.

use serde_json::Value;

use super::UpstreamApi;

/// The longest SSE line kept while looking for usage, in bytes; a longer line (a huge
/// text delta) cannot hold the usage report and is skipped.
const MAX_LINE_BYTES: usize = 1 << 20;

/// Tokens one answer used.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Usage {
    pub(super) input_tokens: u64,
    pub(super) output_tokens: u64,
}

impl Usage {
    /// The usage of a whole (non-streamed) JSON answer, if it reports one.
    pub(super) fn from_json(api: UpstreamApi, body: &[u8]) -> Option<Usage> {
        let answer: Value = serde_json::from_slice(body).ok()?;
        let usage = answer.get("usage")?;
        Some(match api {
            UpstreamApi::OpenAi => Usage {
                input_tokens: number(usage, "prompt_tokens"),
                output_tokens: number(usage, "completion_tokens"),
            },
            UpstreamApi::Anthropic => Usage {
                input_tokens: anthropic_input(usage),
                output_tokens: number(usage, "output_tokens"),
            },
        })
    }
}

/// Reads usage out of a Server-Sent Events answer fed to it chunk by chunk, however
/// the chunks cut its lines.
#[derive(Debug)]
pub(super) struct SseUsage {
    api: UpstreamApi,
    line: Vec<u8>,
    /// The current line is over [`MAX_LINE_BYTES`] and is being skipped.
    skipping: bool,
    seen: Option<Usage>,
}

impl SseUsage {
    pub(super) fn new(api: UpstreamApi) -> Self {
        SseUsage {
            api,
            line: Vec::new(),
            skipping: false,
            seen: None,
        }
    }

    /// Takes the next piece of the stream.
    pub(super) fn feed(&mut self, mut chunk: &[u8]) {
        while let Some(end) = chunk.iter().position(|b| *b == b'\n') {
            if !self.skipping {
                self.line.extend_from_slice(&chunk[..end]);
                let line = std::mem::take(&mut self.line);
                self.line_done(&line);
            }
            self.line.clear();
            self.skipping = false;
            chunk = &chunk[end + 1..];
        }
        if !self.skipping {
            self.line.extend_from_slice(chunk);
            if self.line.len() > MAX_LINE_BYTES {
                self.line.clear();
                self.skipping = true;
            }
        }
    }

    /// The usage reported so far (the stream's last line included), if any.
    pub(super) fn total(&mut self) -> Option<Usage> {
        if !self.skipping && !self.line.is_empty() {
            let line = std::mem::take(&mut self.line);
            self.line_done(&line);
        }
        self.seen
    }

    fn line_done(&mut self, line: &[u8]) {
        let Some(data) = line.strip_prefix(b"data:") else {
            return;
        };
        // Only the few events that carry a usage report are parsed.
        if !contains(data, b"\"usage\"") {
            return;
        }
        let Ok(event) = serde_json::from_slice::<Value>(data) else {
            return;
        };
        match self.api {
            UpstreamApi::OpenAi => {
                if let Some(usage) = event.get("usage").filter(|u| u.is_object()) {
                    self.seen = Some(Usage {
                        input_tokens: number(usage, "prompt_tokens"),
                        output_tokens: number(usage, "completion_tokens"),
                    });
                }
            }
            UpstreamApi::Anthropic => {
                let seen = self.seen.get_or_insert_with(Usage::default);
                match event.get("type").and_then(Value::as_str) {
                    Some("message_start") => {
                        if let Some(usage) = event.pointer("/message/usage") {
                            seen.input_tokens = anthropic_input(usage);
                            seen.output_tokens = number(usage, "output_tokens");
                        }
                    }
                    Some("message_delta") => {
                        if let Some(usage) = event.get("usage") {
                            // Cumulative counts; input only when the API restates it.
                            if usage.get("input_tokens").is_some() {
                                seen.input_tokens = anthropic_input(usage);
                            }
                            seen.output_tokens = number(usage, "output_tokens");
                        }
                    }
                    _ => {}
                }
            }
        }
    }
}

fn number(usage: &Value, field: &str) -> u64 {
    usage.get(field).and_then(Value::as_u64).unwrap_or(0)
}

fn anthropic_input(usage: &Value) -> u64 {
    number(usage, "input_tokens")
        .saturating_add(number(usage, "cache_creation_input_tokens"))
        .saturating_add(number(usage, "cache_read_input_tokens"))
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fed_in_pieces(api: UpstreamApi, stream: &str, piece: usize) -> Option<Usage> {
        let mut usage = SseUsage::new(api);
        for chunk in stream.as_bytes().chunks(piece) {
            usage.feed(chunk);
        }
        usage.total()
    }

    #[test]
    fn openai_stream_usage_is_the_last_chunk_whatever_the_cuts() {
        let stream = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi \\\"usage\\\"\"}}]}\n\n\
                      data: {\"choices\":[],\"usage\":{\"prompt_tokens\":120000,\"completion_tokens\":34}}\n\n\
                      data: [DONE]\n\n";
        for piece in [1, 3, 7, 64, 4096] {
            assert_eq!(
                fed_in_pieces(UpstreamApi::OpenAi, stream, piece),
                Some(Usage {
                    input_tokens: 120_000,
                    output_tokens: 34
                }),
                "pieces of {piece}"
            );
        }
        assert_eq!(
            fed_in_pieces(UpstreamApi::OpenAi, "data: [DONE]\n\n", 5),
            None
        );
    }

    #[test]
    fn anthropic_stream_usage_adds_start_and_delta() {
        let stream = "event: message_start\n\
             data: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":20,\"cache_read_input_tokens\":5,\"output_tokens\":1}}}\n\n\
             event: message_delta\n\
             data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":9}}\n\n\
             event: message_stop\n\
             data: {\"type\":\"message_stop\"}";
        assert_eq!(
            fed_in_pieces(UpstreamApi::Anthropic, stream, 11),
            Some(Usage {
                input_tokens: 25,
                output_tokens: 9
            })
        );
    }

    #[test]
    fn whole_answers_report_their_usage() {
        let openai = br#"{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":4}}"#;
        assert_eq!(
            Usage::from_json(UpstreamApi::OpenAi, openai),
            Some(Usage {
                input_tokens: 3,
                output_tokens: 4
            })
        );
        let anthropic = br#"{"content":[],"usage":{"input_tokens":7,"output_tokens":2}}"#;
        assert_eq!(
            Usage::from_json(UpstreamApi::Anthropic, anthropic),
            Some(Usage {
                input_tokens: 7,
                output_tokens: 2
            })
        );
        assert_eq!(Usage::from_json(UpstreamApi::OpenAi, b"{}"), None);
    }

    #[test]
    fn an_overlong_line_is_skipped_not_kept() {
        let mut usage = SseUsage::new(UpstreamApi::OpenAi);
        usage.feed(b"data: ");
        usage.feed(&vec![b'x'; MAX_LINE_BYTES + 10]);
        assert!(usage.line.is_empty());
        usage.feed(
            b"xx\ndata: {\"choices\":[],\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":2}}\n",
        );
        assert_eq!(
            usage.total(),
            Some(Usage {
                input_tokens: 1,
                output_tokens: 2
            })
        );
    }
}
