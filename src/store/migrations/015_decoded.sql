-- 015_decoded: the registry of the contracts mode's typed tables (issue 36, store/decoded.h).
--
-- The tables themselves come from the contracts config (--contracts) and are made at start, under
-- the migration lock, in the config's own schema: one per configured event, partitioned by block
-- like the data tables, and one `undecoded` per schema. This registry lists each with the
-- definition it was made for (its event's signature, input names, types and indexed flags), so a
-- config whose ABI changed an existing table's event is refused instead of writing rows of another
-- shape, and so partitions and rollbacks reach every decoded table, configured or not.
CREATE TABLE decoded_tables (
  schema_name     TEXT NOT NULL,
  table_name      TEXT NOT NULL,
  contract        TEXT NOT NULL,  -- '' for undecoded
  event_signature TEXT NOT NULL,  -- '' for undecoded
  definition      TEXT NOT NULL,
  created_at      TIMESTAMPTZ NOT NULL DEFAULT now(),
  PRIMARY KEY (schema_name, table_name)
);
