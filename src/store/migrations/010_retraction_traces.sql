-- 010_retraction_traces: the internal transfers of a rolled-back block (issue 18), kept with its
-- retraction (migration 005) so its block.reverted names their trace.internal_transfer ids after
-- the traces rows are gone: the orphaned block's traces that moved value below the top frame
-- (core/model.h IsInternalTransfer), column for column.
CREATE TABLE event_retraction_traces (
  seq               BIGINT NOT NULL REFERENCES event_retractions (seq) ON DELETE CASCADE,
  transaction_hash  BYTEA NOT NULL,
  transaction_index INTEGER NOT NULL,
  trace_address     INTEGER[] NOT NULL,
  trace_type        TEXT NOT NULL,
  call_type         TEXT,
  from_address      BYTEA,
  to_address        BYTEA,
  value             NUMERIC(78,0) NOT NULL,
  PRIMARY KEY (seq, transaction_hash, trace_address)
);
