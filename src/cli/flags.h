// flags: the options of every subcommand, with their help texts, bound to an Args (cli/args.h).
// One file per family of subcommands, in the order --help lists them:
//   flags.cc         what several families share: --config, --log-level, --log-format, --db,
//                    --metrics-addr, --rpc's help and check, the [env: ...] notes;
//                    DefineSubcommands
//   flags_node.cc    index, run, leader, worker: the data path, the fleet process, the HA
//                    election's lock nodes (also status's), the block source (--source, Kafka)
//   flags_db.cc      reconcile, verify, export: tools over the database
//   flags_fleet.cc   status, dlq: the fleet's coordination state
//   flags_events.cc  the event relay (--events: index, run, leader), events tail|replay|publish,
//                    produce, consume balances
// A check CLI11 can make alone (a range, a set of values, an --rpc list) is attached to its option
// here, so a typo stops the command before anything starts. Defining flags touches nothing but the
// CLI::App; not thread-safe (neither is CLI11).
#pragma once

#include <CLI/CLI.hpp>

#include "cli/args.h"

namespace gapless::cli {

// Every subcommand with its flags, bound to *a, in the order --help lists them.
Subcommands DefineSubcommands(CLI::App* app, Args* a);

// One family's subcommands, added to app (in --help's order) and recorded in *s.
void DefineNodeSubcommands(CLI::App* app, Args* a, Subcommands* s);    // flags_node.cc
void DefineDbSubcommands(CLI::App* app, Args* a, Subcommands* s);      // flags_db.cc
void DefineFleetSubcommands(CLI::App* app, Args* a, Subcommands* s);   // flags_fleet.cc
void DefineEventsSubcommands(CLI::App* app, Args* a, Subcommands* s);  // flags_events.cc

// --rpc: one URL, or a pool of endpoints (rpc/endpoint_pool.h): its help, and its check.
extern const char* const kRpcHelp;
CLI::Validator RpcListCheck();

// --config, --log-level, --log-format: every subcommand (AddCommon adds --db to them).
void AddConfigAndLogging(CLI::App* sub, CommonArgs* common);

// --metrics-addr: every long-running command (index, run, leader, worker, consume balances).
void AddMetricsAddr(CLI::App* sub, CommonArgs* common);

// AddConfigAndLogging and --db (required): every subcommand that reads or writes the database.
void AddCommon(CLI::App* sub, CommonArgs* common);

// Appends "[env: GAPLESS_X]" to every option's help so --help documents the environment too; call
// it last, once a subcommand has all its options.
void DocumentEnv(CLI::App* sub);

// The lock nodes of the HA leader: run, leader, worker, status (flags_node.cc).
void AddElectionOptions(CLI::App* sub, Args* a, bool with_lease);

// The event relay of a leader: index, run, leader (flags_events.cc).
void AddEventsOptions(CLI::App* sub, Args* a);

}  // namespace gapless::cli
