//! End-to-end tests: each starts the real `taskexec` binary against a fresh PostgreSQL database
//! or SQLite file and drives it over HTTP. Behavioural tests run once per backend
//! (`both_backends!`); a test that runs on one backend says why.

mod support;

mod e2e_access;
mod e2e_callbacks;
mod e2e_chaos;
mod e2e_cli;
mod e2e_concurrency;
mod e2e_dashboard;
mod e2e_endpoints;
mod e2e_faults;
mod e2e_jobs;
mod e2e_plugins;
mod e2e_processes;
mod e2e_recovery;
mod e2e_requests;
mod e2e_resources;
mod e2e_schedules;
mod e2e_secrets;
mod e2e_security;
mod e2e_service;
mod e2e_signing;
mod e2e_tenants;
mod e2e_traces;
