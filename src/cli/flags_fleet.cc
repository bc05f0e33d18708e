// flags_fleet.cc: the flags of status and dlq (cli/flags.h), which read (and dlq retry re-queues
// in) a fleet's coordination state: the Redis, the lock nodes, the chain and, for status, the
// head, a replica to read from and the event buses' groups.
#include "cli/flags.h"

namespace gapless::cli {
namespace {

// status and dlq.
void AddFleetOptions(CLI::App* sub, Args* a) {
  AddCommon(sub, &a->common);
  sub->add_option("--redis", a->fleet.redis,
                  "Coordination Redis URL, e.g. redis://127.0.0.1:6379; a primary and its "
                  "replicas as redis://h1:6379,h2:6379 (the primary is found by ROLE); TLS: "
                  "rediss://host:port?cacertfile=PATH")
      ->required();
  sub->add_option("--chain-id", a->fleet.chain_id,
                  "Chain whose coordination state to use (0: the one recorded in the database)")
      ->capture_default_str();
}

}  // namespace

void DefineFleetSubcommands(CLI::App* app, Args* a, Subcommands* out) {
  Subcommands& s = *out;
  s.status = app->add_subcommand(
      "status",
      "Show the fleet at a glance: the leader and each lock node's view, the head log, the "
      "coordination Redis (keys, memory, each replica's lag, a warning when the key count keeps "
      "growing), "
      "frontier, queue depths, leases, dead letters, live workers with their ranges and rates, "
      "lag to the chain head, and the events: outbox backlog, each bus's cursor, group lag");
  AddFleetOptions(s.status, a);
  AddElectionOptions(s.status, a, /*with_lease=*/false);
  s.status
      ->add_option("--rpc", a->fleet.rpc, "JSON-RPC URL (or pool), to show the head and the lag")
      ->check(RpcListCheck());
  s.status->add_flag("--json", a->fleet.json,
                     "Print one JSON object (the /status.json of --metrics-addr) instead of text");
  s.status->add_option(
      "--redis-replica", a->fleet.redis_replica,
      "A replica of the coordination Redis, e.g. redis://replica:6379: the display data (keys, "
      "memory, Redis frontier, queue, leases, workers) is read there, with a line giving its lag; "
      "status only (coordination reads and writes always go to the --redis primary)");
  s.status->add_option("--bus", a->events.bus,
                       "Event bus URLs, comma-separated: show the lag of --group's groups there");
  s.status->add_option("--group", a->events.groups,
                       "Consumer groups (comma-separated) whose lag to show on each --bus");
  DocumentEnv(s.status);
  s.dlq = app->add_subcommand(
      "dlq", "Dead-lettered ranges: `dlq list`, or `dlq retry FROM-TO|all` to re-queue them");
  AddFleetOptions(s.dlq, a);
  s.dlq->add_option("action", a->fleet.dlq_action, "list or retry")
      ->required()
      ->check(CLI::IsMember({"list", "retry"}));
  s.dlq->add_option("task", a->fleet.dlq_task, "with retry: the range FROM-TO, or all");
  DocumentEnv(s.dlq);
}

}  // namespace gapless::cli
