// flags_db.cc: the flags of reconcile, verify and export (cli/flags.h), the tools that work on
// the database (reconcile rebuilds the coordination Redis from it; verify and export only read).
#include <cstdint>

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
                              "Write a table as CSV with ethereum-etl's columns and formatting");
  AddCommon(s.exp, &a->common);
  s.exp
      ->add_option("--table", a->exp.table,
                   "blocks|transactions|logs|token_transfers|receipts|traces|contracts|tokens")
      ->required()
      ->check(CLI::IsMember({"blocks", "transactions", "logs", "token_transfers", "receipts",
                             "traces", "contracts", "tokens"}));
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
