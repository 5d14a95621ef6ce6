mod run_local;
