//! boitata-orchestrator
