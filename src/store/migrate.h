// migrate: versioned schema migrations, embedded in the binary and applied at start.
//
// The SQL files are src/store/migrations/NNN_name.sql (NNN = the version, applied in increasing
// order). Migrate() applies the versions the database lacks, all in one transaction, and records
// each in schema_migrations. Concurrent starters are safe: the transaction first takes a
// transaction-scoped advisory lock, so a second process waits and then finds nothing to do.
// A database whose schema is newer than this binary knows (or whose recorded migration names
// differ from ours) is refused with FailedPrecondition: an old binary must not write into a schema
// it does not understand. Thread-safety: as for the PgConn passed in.
#pragma once

#include <limits>
#include <string>
#include <vector>

#include "core/status.h"
#include "store/pg.h"

namespace gapless {

struct MigrationInfo {
  int version = 0;
  std::string name;  // "initial" for 001_initial.sql
};

// The migrations compiled into this binary, in version order.
const std::vector<MigrationInfo>& KnownMigrations();
// The highest version this binary knows.
int LatestSchemaVersion();

// Applies pending migrations. Returns OK when the schema is current (also when nothing was to do).
// `up_to` stops after that version (tests of a migration over data an older schema held).
Status Migrate(PgConn& conn, int up_to = std::numeric_limits<int>::max());

// For the commands that only read (verify, export): OK when the database holds this binary's whole
// schema; FailedPrecondition otherwise (no gapless tables at all: the wrong database; an older
// schema: `index` or `run` upgrades it; a newer or different one, as for Migrate). Writes nothing.
Status CheckSchemaCurrent(PgConn& conn);

// The versions recorded in schema_migrations (empty for a fresh database).
Result<std::vector<int>> AppliedMigrations(PgConn& conn);

}  // namespace gapless
