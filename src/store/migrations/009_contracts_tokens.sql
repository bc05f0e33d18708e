-- 009_contracts_tokens: the contracts a block created and the tokens' metadata (issue 18).
--
-- contracts: one row per successful creation, written with its block in the range's transaction
-- and deleted with it by a re-org's rollback. From receipts' contractAddress (a deployment
-- transaction; bytecode from eth_getCode at the block) or, with --traces, from every create and
-- create2 trace (factory-made contracts too; bytecode = the trace's output). trace_address is the
-- creating frame's ('{}' for a deployment transaction). function_sighashes, is_erc20 and
-- is_erc721 are derived from the bytecode as ethereum-etl does (decode/contracts.h); NULL
-- bytecode (not known: no RPC to ask) gives '{}' and false. A contract re-created at one address
-- (CREATE2 after a self-destruct) has a row per creation.
CREATE TABLE contracts (
  block_number       BIGINT NOT NULL,
  contract_index     INTEGER NOT NULL,           -- position among the block's creations
  transaction_hash   BYTEA NOT NULL,
  transaction_index  INTEGER NOT NULL,
  trace_address      INTEGER[] NOT NULL,
  address            BYTEA NOT NULL,
  creator_address    BYTEA NOT NULL,            -- the sender, or the factory contract
  creation_type      TEXT NOT NULL,             -- create, create2
  bytecode           BYTEA,
  function_sighashes TEXT[] NOT NULL,
  is_erc20           BOOLEAN NOT NULL,
  is_erc721          BOOLEAN NOT NULL,
  PRIMARY KEY (block_number, contract_index)
);
CREATE INDEX contracts_address_idx ON contracts (address);

-- tokens: one row per token address, read when it first appeared (a transfer of it, or its
-- creation as an ERC-20/721 contract) by eth_call at that block; a method that is missing,
-- reverts or answers garbage is NULL. Writers upsert keeping the lowest block (ranges commit in
-- any order), in the range's transaction; a rollback deletes the rows above its fork point (the
-- token is read again when it appears again).
CREATE TABLE tokens (
  address       BYTEA PRIMARY KEY,
  block_number  BIGINT NOT NULL,               -- where it first appeared
  standard      TEXT NOT NULL,                 -- erc20, erc721, erc1155
  name          TEXT,
  symbol        TEXT,
  decimals      SMALLINT,
  total_supply  NUMERIC(78,0)
);
CREATE INDEX tokens_block_idx ON tokens (block_number);
