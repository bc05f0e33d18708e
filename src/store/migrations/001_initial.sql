-- 001_initial: the indexed chain data, the range records, and the indexer's key/value state.
--
-- One database holds one chain (indexer_state.chain_id), so no table carries a chain column.
-- Types: hashes, addresses and hex data are BYTEA (the export prints them as lower-case 0x-hex,
-- "0x" for empty data); 256-bit quantities are NUMERIC(78,0); quantities that fit 64 bits by
-- protocol are BIGINT (the writer refuses values above 2^63-1). NULL means the node did not send
-- the field. The signature quantities v, r, s are BYTEA holding the big-endian value with an even
-- number of hex digits (a leading 0 nibble added when the quantity has an odd count): r and s are
-- 32-byte words that a node prints without leading zeros.
--
-- Indexes: each primary key is also the key of ON CONFLICT and of every range query
-- (block_number first, so "rows of blocks a..b" is an index range scan). Secondary indexes exist
-- only where a query needs them, each documented where it is created. Deliberately absent:
-- blocks.hash, transactions.from_address/to_address, logs.topic0..3 — add them in a later
-- migration together with the query that needs them.

CREATE TABLE indexer_state (
  key        TEXT PRIMARY KEY,
  value      TEXT NOT NULL,
  updated_at TIMESTAMPTZ NOT NULL DEFAULT now()
);

CREATE TABLE blocks (
  number                   BIGINT PRIMARY KEY,
  hash                     BYTEA NOT NULL,
  parent_hash              BYTEA NOT NULL,
  nonce                    BYTEA NOT NULL,       -- 8-byte data, not a quantity
  sha3_uncles              BYTEA NOT NULL,
  logs_bloom               BYTEA NOT NULL,
  transactions_root        BYTEA NOT NULL,
  state_root               BYTEA NOT NULL,
  receipts_root            BYTEA NOT NULL,
  miner                    BYTEA NOT NULL,
  mix_hash                 BYTEA,
  difficulty               NUMERIC(78,0) NOT NULL,
  total_difficulty         NUMERIC(78,0),        -- current nodes omit it
  size                     BIGINT NOT NULL,
  extra_data               BYTEA NOT NULL,
  gas_limit                BIGINT NOT NULL,
  gas_used                 BIGINT NOT NULL,
  timestamp                BIGINT NOT NULL,      -- unix seconds
  transaction_count        INTEGER NOT NULL,     -- len(transactions) as the node sent it
  base_fee_per_gas         NUMERIC(78,0),        -- London
  withdrawals_root         BYTEA,                -- Shanghai
  blob_gas_used            BIGINT,               -- Cancun
  excess_blob_gas          BIGINT,               -- Cancun
  parent_beacon_block_root BYTEA,                -- Cancun
  requests_hash            BYTEA                 -- Prague
);

-- Validator withdrawals (Shanghai). withdrawal_index is the consensus layer's global, increasing
-- index, so ordering a block's rows by it gives the node's list order.
CREATE TABLE withdrawals (
  block_number     BIGINT NOT NULL,
  withdrawal_index BIGINT NOT NULL,
  validator_index  BIGINT NOT NULL,
  address          BYTEA NOT NULL,
  amount_gwei      BIGINT NOT NULL,
  PRIMARY KEY (block_number, withdrawal_index)
);

-- A transaction with its receipt's fields.
CREATE TABLE transactions (
  block_number             BIGINT NOT NULL,
  transaction_index        INTEGER NOT NULL,
  hash                     BYTEA NOT NULL,
  block_hash               BYTEA NOT NULL,
  nonce                    BIGINT NOT NULL,
  from_address             BYTEA NOT NULL,
  to_address               BYTEA,                -- NULL for contract creation
  value                    NUMERIC(78,0) NOT NULL,
  gas                      BIGINT NOT NULL,
  gas_price                NUMERIC(78,0),
  input                    BYTEA NOT NULL,
  transaction_type         SMALLINT,             -- NULL if the node omits "type"
  max_fee_per_gas          NUMERIC(78,0),        -- type 2, 3, 4
  max_priority_fee_per_gas NUMERIC(78,0),        -- type 2, 3, 4
  max_fee_per_blob_gas     NUMERIC(78,0),        -- type 3
  blob_versioned_hashes    BYTEA[],              -- type 3; NULL when there are none
  access_list              JSON,                 -- the node's JSON text, kept verbatim
  authorization_list       JSON,                 -- type 4, the node's JSON text
  chain_id                 BIGINT,
  v                        BYTEA,
  r                        BYTEA,
  s                        BYTEA,
  y_parity                 SMALLINT,
  -- receipt
  cumulative_gas_used      BIGINT NOT NULL,
  gas_used                 BIGINT NOT NULL,
  contract_address         BYTEA,
  root                     BYTEA,                -- pre-Byzantium post-state root
  status                   SMALLINT,             -- NULL pre-Byzantium
  effective_gas_price      NUMERIC(78,0),
  logs_bloom               BYTEA NOT NULL,
  blob_gas_used            BIGINT,
  blob_gas_price           NUMERIC(78,0),
  log_count                INTEGER NOT NULL,
  PRIMARY KEY (block_number, transaction_index)
);
-- Lookup of a transaction by hash (the most common explorer query, and how receipts and logs are
-- joined to a hash the user gives). Not unique: a hash that appears in two blocks (a re-org, or
-- the two historic duplicate coinbase-style hashes) must not make a write fail.
CREATE INDEX transactions_hash_idx ON transactions (hash);

CREATE TABLE logs (
  block_number      BIGINT NOT NULL,
  log_index         INTEGER NOT NULL,            -- block-wide
  transaction_index INTEGER NOT NULL,
  transaction_hash  BYTEA NOT NULL,
  block_hash        BYTEA NOT NULL,
  address           BYTEA NOT NULL,
  data              BYTEA NOT NULL,
  topic0            BYTEA,
  topic1            BYTEA,
  topic2            BYTEA,
  topic3            BYTEA,
  removed           BOOLEAN NOT NULL,
  PRIMARY KEY (block_number, log_index)
);
-- "Events of contract X in blocks a..b" (eth_getLogs with an address filter).
CREATE INDEX logs_address_idx ON logs (address, block_number);

-- Token movements. ERC-1155 TransferBatch gives one row per id (batch_index 0..n-1); every other
-- kind has batch_index 0. token_standard is 20, 721 or 1155.
CREATE TABLE token_transfers (
  block_number     BIGINT NOT NULL,
  log_index        INTEGER NOT NULL,
  batch_index      INTEGER NOT NULL,
  transaction_hash BYTEA NOT NULL,
  token_address    BYTEA NOT NULL,
  from_address     BYTEA NOT NULL,
  to_address       BYTEA NOT NULL,
  operator_address BYTEA,                        -- ERC-1155 only
  token_id         NUMERIC(78,0),                -- ERC-721 and ERC-1155
  value            NUMERIC(78,0) NOT NULL,       -- ERC-20 amount, 1 for ERC-721, ERC-1155 amount
  token_standard   SMALLINT NOT NULL CHECK (token_standard IN (20, 721, 1155)),
  PRIMARY KEY (block_number, log_index, batch_index)
);
-- "Transfers of token X in blocks a..b" (a token's history page, holder balances).
CREATE INDEX token_transfers_token_idx ON token_transfers (token_address, block_number);

-- One row per committed range write: the range [from_block, to_block] is in the tables, written
-- under fence_token (NULL for an unfenced single-process write). Rewriting a range updates its
-- row. A write whose token is lower than one recorded for an overlapping range is refused.
CREATE TABLE indexed_ranges (
  from_block   BIGINT PRIMARY KEY,
  to_block     BIGINT NOT NULL CHECK (to_block >= from_block),
  fence_token  BIGINT,
  committed_at TIMESTAMPTZ NOT NULL DEFAULT now(),
  blocks       INT8RANGE GENERATED ALWAYS AS (int8range(from_block, to_block, '[]')) STORED
);
-- Overlap queries (the fence check and CommittedRanges) find the ranges touching [a, b] through
-- `blocks && int8range(a, b, '[]')` in O(log n), whatever the lengths of the recorded ranges.
CREATE INDEX indexed_ranges_blocks_idx ON indexed_ranges USING gist (blocks);
