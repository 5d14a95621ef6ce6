//! The CLI's error: a message for the user and the exit code it maps to.

/// Exit code for usage and configuration errors.
pub(crate) const EXIT_USAGE: u8 = 2;
/// Exit code for a failed run or command.
pub(crate) const EXIT_FAILED: u8 = 1;

/// An error to print (one line, `error: MESSAGE`) and exit with.
#[derive(Debug)]
pub(crate) struct CliError {
    pub(crate) code: u8,
    pub(crate) message: String,
}

impl CliError {
    /// A usage or configuration error (exit 2).
    pub(crate) fn usage(message: impl std::fmt::Display) -> Self {
        CliError {
            code: EXIT_USAGE,
            message: message.to_string(),
        }
    }

    /// An error that exits with `code`.
    pub(crate) fn new(code: u8, message: impl std::fmt::Display) -> Self {
        CliError {
            code,
            message: message.to_string(),
        }
    }

    /// A failure (exit 1).
    pub(crate) fn failed(message: impl std::fmt::Display) -> Self {
        CliError {
            code: EXIT_FAILED,
            message: message.to_string(),
        }
    }
}
