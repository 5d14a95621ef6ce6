mod blueprint_run;
mod blueprint_validate;
mod run_local;
