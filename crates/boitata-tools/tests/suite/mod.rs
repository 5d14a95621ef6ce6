mod tool_execute_command;
mod tool_files;
mod tool_git;
mod tool_search;
mod tool_support;
mod workspace_confinement;
