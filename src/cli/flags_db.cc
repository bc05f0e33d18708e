// flags_db.cc: the flags of reconcile, verify and export (cli/flags.h), the tools that work on
// the database (reconcile rebuilds the coordination Redis from it; verify and export only read).
#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "cli/flags.h"

namespace gapless::cli {

void DefineDbSubcommands(CLI::App* app, Args* a, Subcommands* out) {
  Subcommands& s = *out;
  s.reconcile = app->add_subcommand(
      "reconcile",
      "Rebuild the Redis queue, fencing counter and frontier of FROM..TO from "
      "PostgreSQL (after Redis lost its data; also done automatically at start)");
  AddCommon(s.reconcile, &a->common);
  s.reconcile->add_option("--redis", a->reconcile.redis, "Coordination Redis URL")->required();
  s.reconcile->add_option("--from", a->reconcile.from, "First block")->capture_default_str();
  s.reconcile->add_option("--to", a->reconcile.to, "Last block")->required();
  s.reconcile->add_option("--range-size", a->reconcile.range_size, "Blocks per range task")
      ->capture_default_str();
  DocumentEnv(s.reconcile);

  s.verify = app->add_subcommand(
      "verify",
      "Check blocks FROM..TO in PostgreSQL: each present once, parent hashes chain, "
      "counts consistent; with --deep also prove each block against its own header. Exits 1 "
      "and lists the problems otherwise");
  AddCommon(s.verify, &a->common);
  s.verify->add_option("--from", a->verify.from, "First block")->capture_default_str();
  s.verify->add_option("--to", a->verify.to, "Last block (max: the highest indexed block)")
      ->capture_default_str();
  s.verify->add_flag("--deep", a->verify.deep,
                     "Also rebuild every stored block's transactions, receipts and withdrawals "
                     "roots, logs blooms, transaction and block hashes from its rows and compare "
                     "them with its stored header, plus gas used, effective gas price and token "
                     "transfers (docs/verify.md); reads every row of the interval");
  s.verify->add_flag("--verify-senders", a->verify.verify_senders,
                     "With --deep (implies it): also recover each transaction's sender from its "
                     "signature and compare it with the stored from_address (costly)");
  s.verify->add_flag("--anvil-blob-roots", a->verify.anvil_blob_roots,
                     "With --deep: the database holds an anvil devnet, whose blocks with blob "
                     "transactions have a non-standard transactionsRoot; skip that one "
                     "comparison for them (docs/verify.md)");
  DocumentEnv(s.verify);

  s.exp = app->add_subcommand("export",
                              "Write a table as CSV with ethereum-etl's columns and formatting, "
                              "or a contracts-mode decoded table (SCHEMA.TABLE) in the same CSV");
  AddCommon(s.exp, &a->common);
  // A name with a dot is a decoded table, checked against the database's registry by the
  // command (store/export.h); the others are ethereum-etl's, checked here.
  s.exp
      ->add_option(
          "--table", a->exp.table,
          "blocks|transactions|logs|token_transfers|receipts|traces|contracts|tokens, or "
          "SCHEMA.TABLE: a table of the contracts mode (its events' tables, SCHEMA.undecoded, "
          "SCHEMA.children), its own columns, rows by block and log index; integers exact, "
          "bytes 0x-hex, booleans true/false (not Python's True/False of --table "
          "contracts), JSONB compact, NULL empty")
      ->required()
      ->check(CLI::Validator(
          [](std::string& name) -> std::string {
            static constexpr std::array<std::string_view, 8> kTables = {
                "blocks",   "transactions", "logs",      "token_transfers",
                "receipts", "traces",       "contracts", "tokens"};
            if (name.find('.') != std::string::npos) return "";
            if (std::find(kTables.begin(), kTables.end(), name) != kTables.end()) return "";
            return name +
                   " not in {blocks,transactions,logs,token_transfers,receipts,traces,contracts,"
                   "tokens} nor SCHEMA.TABLE, a decoded table";
          },
          "", "export table"));
  s.exp->add_option("--from", a->exp.from, "First block")->capture_default_str();
  s.exp->add_option("--to", a->exp.to, "Last block (max: the highest indexed block)")
      ->capture_default_str();
  s.exp->add_option("--format", a->exp.format, "Output format (csv)")->capture_default_str();
  s.exp->add_option("--output", a->exp.output, "Output file (- for stdout)")->capture_default_str();
  s.exp
      ->add_option("--token-standards", a->exp.token_standards,
                   "For token_transfers: comma-separated subset of erc20,erc721,erc1155 "
                   "(ethereum-etl knows only erc20 and erc721)")
      ->capture_default_str();
  DocumentEnv(s.exp);
}

}  // namespace gapless::cli
