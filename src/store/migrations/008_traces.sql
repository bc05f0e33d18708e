-- 008_traces: every transaction's call tree (issue 18, decode/traces.h), with `--traces`.
--
-- ethereum-etl's trace columns and meanings: trace_type call, create, create2, suicide or
-- reward; call_type call, callcode, delegatecall or staticcall; reward_type block or uncle (only
-- trace_block reports rewards); trace_address the path of child indexes from the transaction's
-- top frame ('{}' for the top frame); status 1, or 0 when the trace or an ancestor failed;
-- trace_id "<type>_<tx hash>_<path joined by _>" (rewards "<type>_<block>_<i>"). trace_index is
-- the trace's position in the block's answer. Written in the range's one transaction with its
-- block, deleted with it by a re-org's rollback.
CREATE TABLE traces (
  block_number      BIGINT NOT NULL,
  trace_index       INTEGER NOT NULL,
  transaction_hash  BYTEA,                    -- NULL for rewards
  transaction_index INTEGER,
  from_address      BYTEA,
  to_address        BYTEA,
  value             NUMERIC(78,0),
  input             BYTEA,
  output            BYTEA,
  trace_type        TEXT NOT NULL,
  call_type         TEXT,
  reward_type       TEXT,
  gas               BIGINT,
  gas_used          BIGINT,
  subtraces         INTEGER NOT NULL,
  trace_address     INTEGER[] NOT NULL,
  error             TEXT,
  status            SMALLINT,
  trace_id          TEXT,
  PRIMARY KEY (block_number, trace_index)
);
-- "Internal transactions of this transaction" and "of this address" (an explorer's tab).
CREATE INDEX traces_transaction_idx ON traces (transaction_hash);
CREATE INDEX traces_to_idx ON traces (to_address, block_number);
CREATE INDEX traces_from_idx ON traces (from_address, block_number);
