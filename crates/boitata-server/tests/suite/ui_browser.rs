//! The web UI in a real headless browser (written next).
