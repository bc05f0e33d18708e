#!/usr/bin/env node
// traffic.js: deterministic test traffic for a local anvil devnet, plus a manifest of what it sent.
//
// Talks plain JSON-RPC (built-in fetch, no ethers/web3) to a node with unlocked dev accounts
// (eth_accounts + eth_sendTransaction). It deploys the devnet contracts (compile.js), mints
// starting balances, then produces --blocks blocks: automine is switched off, several transactions
// are sent and evm_mine seals them into one block. The mix: ETH transfers as legacy (type 0),
// access-list (type 1) and EIP-1559 (type 2) transactions; ERC-20 mint/transfer/transferFrom/
// transferMany; ERC-721 mint/transferFrom/safeTransferFrom; ERC-1155 mint/mintBatch/
// safeTransferFrom/safeBatchTransferFrom; plain non-token logs; reverting calls (status 0); EIP-7702
// (type 4) calls whose signed authorization delegates a key of our own to DevReverter; EIP-4844
// blob transactions (type 3) carrying one all-zero blob; and empty blocks. Contract calls also use
// types 0, 1 and 2. Internal transactions: DevForwarder passes ETH on through other contracts (call
// frames with value at trace depth 1, 2 and 3) or into a call that reverts while the transaction
// succeeds; DevFactory creates DevChild contracts with CREATE and CREATE2 (with and without value)
// and makes them self-destruct, in the creating transaction (EIP-6780: the contract is deleted) or
// later (only the balance moves). Two ERC-20s with odd metadata (bytes32 name and symbol; no
// decimals and a reverting name) emit standard Transfer events.
//
// Types 3 and 4 need keys of our own: anvil's eth_sendTransaction cannot build a blob transaction
// ("Failed to decode transaction" in anvil 1.7.1, and eth_signTransaction of one even crashes it),
// and an authorization must be signed by its authority. So traffic.js derives two keys from the
// seed, signs with a small secp256k1 in BigInt (keccak256 from the node's web3_sha3), funds the
// blob sender from a dev account and sends blob transactions with eth_sendRawTransaction. An
// all-zero blob needs no KZG library: its commitment and proof are both the point at infinity
// (0xc0 followed by 47 zero bytes).
//
// On a fresh node the same --seed gives the same transactions, hashes and block numbers, so a
// byte-identical manifest (block hashes differ: timestamps are real). On a node that already has
// history it still sends the same mix, with other nonces and addresses.
// Every transaction's success or failure and every token-transfer log is checked against what
// was sent, from eth_getBlockReceipts, before the manifest (--out) is written, so the manifest is
// what an indexer must find. Transactions expected to create contracts or to move value below the
// top level, and all calls to the forwarders and the factory, are also traced (debug_traceTransaction with callTracer, and trace_transaction where
// the node has it): the created contracts and the value-carrying sub-frames must be exactly the
// expected ones. Token metadata (name, symbol, decimals, totalSupply) is read back with eth_call.
// Which transaction succeeds never depends on the order of transactions within a block: tokens
// received become spendable only once the receiving transaction is mined. (The addresses of
// factory-made contracts do: they are predicted from the factory's nonce in sending order, which
// anvil's --order fifo keeps.)
//
// --follow keeps sending about --rate transactions per second (mining a block every --block-ms,
// or leaving that to the node when it runs with interval mining) until SIGINT/SIGTERM, then
// writes the manifest. Prints one summary line on stdout; --verbose logs each block on stderr.
// The first blob transaction costs anvil about 4.5 s once per process (it loads its KZG trusted
// setup); --no-blobs avoids that where speed matters more than type-3 coverage.
//
// Usage: node devnet/traffic.js [--rpc URL] [--blocks N] [--seed S] [--out FILE] [--min-txs N]
//          [--max-txs N] [--empty RATIO] [--pad N] [--no-7702] [--no-blobs] [--follow] [--rate R]
//          [--block-ms MS] [--verbose]
'use strict';

const crypto = require('crypto');
const fs = require('fs');
const path = require('path');
const { ensureBuilt } = require('./compile.js');

const USAGE = `usage: node devnet/traffic.js [options]
  --rpc URL        JSON-RPC endpoint (default $GAPLESS_RPC_URL or http://127.0.0.1:$GAPLESS_ANVIL_PORT|8545)
  --blocks N       traffic blocks after the 2 set-up blocks (default 200)
  --seed S         seed of the deterministic random choices (default 1)
  --out FILE       write the manifest (JSON) here
  --min-txs N      fewest transactions in a non-empty block (default 2)
  --max-txs N      most transactions in a block (default 12)
  --empty RATIO    share of empty blocks, 0..1 (default 0.1)
  --pad N          mine N more empty blocks at the end, e.g. 64 so anvil's "finalized" tag
                   (latest - 2 * slots-in-an-epoch) reaches the last traffic block (default 0)
  --no-7702        send no EIP-7702 (type 4) transactions
  --no-blobs       send no EIP-4844 blob (type 3) transactions
  --follow         after the blocks, keep sending traffic until SIGINT/SIGTERM
  --rate R         transactions per second in --follow mode (default 5)
  --block-ms MS    block interval in --follow mode when we mine ourselves (default 1000)
  --verbose        one line per block
`;

// ----------------------------------------------------------------------------------------------
// Options

function parseArgs(argv) {
  const port = process.env.GAPLESS_ANVIL_PORT || '8545';
  const o = {
    rpc: process.env.GAPLESS_RPC_URL || `http://127.0.0.1:${port}`,
    blocks: 200,
    seed: '1',
    out: null,
    minTxs: 2,
    maxTxs: 12,
    empty: 0.1,
    pad: 0,
    eip7702: true,
    blobs: true,
    follow: false,
    rate: 5,
    blockMs: 1000,
    verbose: false,
  };
  const num = (name, v, min) => {
    const n = Number(v);
    if (v === undefined || !Number.isFinite(n) || n < min) throw new Error(`${name} needs a number >= ${min}`);
    return n;
  };
  for (let i = 0; i < argv.length; ++i) {
    const a = argv[i];
    const next = () => argv[++i];
    switch (a) {
      case '--rpc': o.rpc = next(); break;
      case '--blocks': o.blocks = Math.floor(num(a, next(), 0)); break;
      case '--seed': o.seed = String(next()); break;
      case '--out': o.out = next(); break;
      case '--min-txs': o.minTxs = Math.floor(num(a, next(), 1)); break;
      case '--max-txs': o.maxTxs = Math.floor(num(a, next(), 1)); break;
      case '--empty': o.empty = num(a, next(), 0); break;
      case '--pad': o.pad = Math.floor(num(a, next(), 0)); break;
      case '--no-7702': o.eip7702 = false; break;
      case '--no-blobs': o.blobs = false; break;
      case '--follow': o.follow = true; break;
      case '--rate': o.rate = num(a, next(), 0); break;
      case '--block-ms': o.blockMs = Math.floor(num(a, next(), 10)); break;
      case '--verbose': o.verbose = true; break;
      case '-h': case '--help': process.stdout.write(USAGE); process.exit(0); break;
      default: throw new Error(`unknown option ${a}\n${USAGE}`);
    }
  }
  if (o.maxTxs < o.minTxs) throw new Error('--max-txs must be >= --min-txs');
  if (o.empty > 1) throw new Error('--empty is a ratio between 0 and 1');
  return o;
}

// ----------------------------------------------------------------------------------------------
// Deterministic randomness: sfc32 seeded from sha256(seed).

class Rng {
  constructor(seed) {
    const h = crypto.createHash('sha256').update(`gapless-devnet:${seed}`).digest();
    this.s = [h.readUInt32LE(0), h.readUInt32LE(4), h.readUInt32LE(8), h.readUInt32LE(12)];
    for (let i = 0; i < 16; ++i) this.u32();
  }
  u32() {
    const s = this.s;
    const t = (((s[0] + s[1]) >>> 0) + s[3]) >>> 0;
    s[3] = (s[3] + 1) >>> 0;
    s[0] = s[1] ^ (s[1] >>> 9);
    s[1] = (s[2] + (s[2] << 3)) >>> 0;
    s[2] = ((s[2] << 21) | (s[2] >>> 11)) >>> 0;
    s[2] = (s[2] + t) >>> 0;
    return t;
  }
  float() { return this.u32() / 4294967296; }
  int(lo, hi) { return lo + Math.floor(this.float() * (hi - lo + 1)); } // inclusive
  chance(p) { return this.float() < p; }
  pick(arr) { return arr[Math.floor(this.float() * arr.length)]; }
  big(lo, hi) { // inclusive, BigInt
    const span = hi - lo + 1n;
    let r = 0n;
    for (let i = 0; i < 4; ++i) r = (r << 32n) | BigInt(this.u32());
    return lo + (r % span);
  }
  weighted(table) { // [[weight, value], ...]
    const total = table.reduce((t, [w]) => t + w, 0);
    let x = this.float() * total;
    for (const [w, v] of table) {
      if ((x -= w) < 0) return v;
    }
    return table[table.length - 1][1];
  }
}

// ----------------------------------------------------------------------------------------------
// JSON-RPC

class Rpc {
  constructor(url) {
    this.url = url;
    this.id = 0;
  }
  async call(method, params = []) {
    let res;
    try {
      res = await fetch(this.url, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ jsonrpc: '2.0', id: ++this.id, method, params }),
      });
    } catch (e) {
      throw new Error(`${method}: cannot reach ${this.url}: ${e.cause ? e.cause.message : e.message}`);
    }
    const text = await res.text();
    let body;
    try {
      body = JSON.parse(text);
    } catch {
      throw new Error(`${method}: HTTP ${res.status}, not JSON: ${text.slice(0, 200)}`);
    }
    if (body.error) {
      const err = new Error(`${method}: ${body.error.message} (code ${body.error.code})`);
      err.rpcCode = body.error.code;
      throw err;
    }
    return body.result;
  }
}

// ----------------------------------------------------------------------------------------------
// Hex and ABI encoding (the few static and dynamic types our calls use)

const hex = (n) => '0x' + BigInt(n).toString(16);
const word = (n) => BigInt.asUintN(256, BigInt(n)).toString(16).padStart(64, '0');
const strip = (h) => (h.startsWith('0x') ? h.slice(2) : h);

function encodeArgs(types, values) {
  const heads = [];
  const tails = [];
  let tailSize = types.length * 32;
  const encodeOne = (type, v) => {
    if (type === 'address') return word(BigInt(v));
    if (type === 'uint256' || type === 'uint8' || type === 'bytes32') return word(v);
    if (type === 'bool') return word(v ? 1 : 0);
    throw new Error(`abi: unsupported type ${type}`);
  };
  types.forEach((type, i) => {
    const v = values[i];
    if (type.endsWith('[]')) {
      const inner = type.slice(0, -2);
      const tail = word(v.length) + v.map((x) => encodeOne(inner, x)).join('');
      heads.push(word(tailSize));
      tails.push(tail);
      tailSize += tail.length / 2;
    } else if (type === 'bytes') {
      const b = strip(v);
      const padded = b.padEnd(Math.ceil(b.length / 64) * 64, '0');
      const tail = word(b.length / 2) + padded;
      heads.push(word(tailSize));
      tails.push(tail);
      tailSize += tail.length / 2;
    } else {
      heads.push(encodeOne(type, v));
    }
  });
  return heads.join('') + tails.join('');
}

// Calldata for signature "name(type,...)" of a compiled contract, selector from solc's output.
function calldata(artifact, signature, ...values) {
  const selector = artifact.methodIdentifiers[signature];
  if (!selector) throw new Error(`${artifact.contractName} has no function ${signature}`);
  const inner = signature.slice(signature.indexOf('(') + 1, -1);
  const types = inner === '' ? [] : inner.split(',');
  return '0x' + selector + encodeArgs(types, values);
}

const wordAt = (data, i) => BigInt('0x' + (strip(data).slice(i * 64, i * 64 + 64) || '0'));
const topicAddress = (t) => '0x' + strip(t).slice(24).toLowerCase();
function uintArrayAt(data, offsetWord) {
  const start = Number(wordAt(data, offsetWord)) / 32;
  const len = Number(wordAt(data, start));
  return Array.from({ length: len }, (_, i) => wordAt(data, start + 1 + i));
}

// ----------------------------------------------------------------------------------------------
// RLP (enough for an EIP-7702 authorization tuple) and secp256k1 signing in BigInt.
// Only used to sign authorizations with a key of our own; keccak256 comes from the node
// (web3_sha3), so no crypto package is needed.

function rlpBytes(b) { // b: hex without 0x
  const len = b.length / 2;
  if (len === 1 && parseInt(b, 16) < 0x80) return b;
  return rlpLength(len, 0x80) + b;
}
function rlpLength(len, offset) {
  if (len < 56) return (offset + len).toString(16).padStart(2, '0');
  let l = len.toString(16);
  if (l.length % 2) l = '0' + l;
  return (offset + 55 + l.length / 2).toString(16) + l;
}
function rlpUint(n) {
  if (BigInt(n) === 0n) return '80';
  let h = BigInt(n).toString(16);
  if (h.length % 2) h = '0' + h;
  return rlpBytes(h);
}
function rlpList(items) {
  const body = items.join('');
  return rlpLength(body.length / 2, 0xc0) + body;
}

const SECP_P = 2n ** 256n - 2n ** 32n - 977n;
const SECP_N = 0xfffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141n;
const SECP_G = [
  0x79be667ef9dcbbac55a06295ce870b07029bfcdb2dce28d959f2815b16f81798n,
  0x483ada7726a3c4655da4fbfc0e1108a8fd17b448a68554199c47d08ffb10d4b8n,
];
const mod = (a, m) => ((a % m) + m) % m;
function modInv(a, m) {
  let [r0, r1, s0, s1] = [mod(a, m), m, 1n, 0n];
  while (r1 !== 0n) {
    const q = r0 / r1;
    [r0, r1] = [r1, r0 - q * r1];
    [s0, s1] = [s1, s0 - q * s1];
  }
  return mod(s0, m);
}
// Jacobian coordinates [X, Y, Z] (x = X/Z^2, y = Y/Z^3): one inversion per multiplication.
function jacDouble([X, Y, Z]) {
  if (Y === 0n) return [0n, 1n, 0n];
  const S = mod(4n * X * Y * Y, SECP_P);
  const M = mod(3n * X * X, SECP_P);
  const X3 = mod(M * M - 2n * S, SECP_P);
  return [X3, mod(M * (S - X3) - 8n * Y ** 4n, SECP_P), mod(2n * Y * Z, SECP_P)];
}
function jacAdd(p, q) {
  if (p[2] === 0n) return q;
  if (q[2] === 0n) return p;
  const z1z1 = mod(p[2] * p[2], SECP_P);
  const z2z2 = mod(q[2] * q[2], SECP_P);
  const U1 = mod(p[0] * z2z2, SECP_P);
  const U2 = mod(q[0] * z1z1, SECP_P);
  const S1 = mod(p[1] * q[2] * z2z2, SECP_P);
  const S2 = mod(q[1] * p[2] * z1z1, SECP_P);
  if (U1 === U2) return S1 === S2 ? jacDouble(p) : [0n, 1n, 0n];
  const H = mod(U2 - U1, SECP_P);
  const R = mod(S2 - S1, SECP_P);
  const H2 = mod(H * H, SECP_P);
  const H3 = mod(H * H2, SECP_P);
  const X3 = mod(R * R - H3 - 2n * U1 * H2, SECP_P);
  return [X3, mod(R * (U1 * H2 - X3) - S1 * H3, SECP_P), mod(H * p[2] * q[2], SECP_P)];
}
// k * p for an affine point p; returns an affine point, or null for the point at infinity.
function pointMul(k, p) {
  let r = [0n, 1n, 0n];
  for (let a = [p[0], p[1], 1n]; k > 0n; k >>= 1n, a = jacDouble(a)) if (k & 1n) r = jacAdd(r, a);
  if (r[2] === 0n) return null;
  const zi = modInv(r[2], SECP_P);
  return [mod(r[0] * zi * zi, SECP_P), mod(r[1] * zi * zi * zi, SECP_P)];
}
// Deterministic nonce from HMAC(key, digest, counter): not RFC 6979, but never reused for two digests.
function secpSign(digest, key) {
  const z = BigInt(digest);
  for (let ctr = 0; ; ++ctr) {
    const k = mod(BigInt('0x' + crypto.createHmac('sha256', Buffer.from(word(key), 'hex'))
      .update(Buffer.from(strip(digest) + word(ctr), 'hex')).digest('hex')), SECP_N);
    if (k === 0n) continue;
    const R = pointMul(k, SECP_G);
    const r = mod(R[0], SECP_N);
    if (r === 0n) continue;
    let s = mod(modInv(k, SECP_N) * (z + r * key), SECP_N);
    if (s === 0n) continue;
    let yParity = Number(R[1] & 1n);
    if (s > SECP_N / 2n) { s = SECP_N - s; yParity ^= 1; }
    return { r, s, yParity };
  }
}

// ----------------------------------------------------------------------------------------------
// Token-event topics (keccak256 of the event signatures, asked from the node once)

const EVENTS = {
  Transfer: 'Transfer(address,address,uint256)',
  TransferSingle: 'TransferSingle(address,address,address,uint256,uint256)',
  TransferBatch: 'TransferBatch(address,address,address,uint256[],uint256[])',
  Ping: 'Ping(address,uint256)',
};

// ----------------------------------------------------------------------------------------------
// Call traces, flattened in execution order (pre-order) into frames
// {depth, type, from, to, value (bigint), reverted}: type is "call", "create", "create2",
// "selfdestruct" (or "staticcall", "delegatecall", "callcode"); reverted is true when the frame or
// an ancestor failed, so its value did not move. depth 0 is the transaction itself.

// debug_traceTransaction(hash, {tracer: "callTracer"}): nested {type, from, to, value, error, calls}.
// anvil reports SELFDESTRUCT as a child frame of the self-destructing call (from: the contract,
// to: the beneficiary, value: the balance sent); only the failing frame carries "error".
function callTracerFrames(root) {
  const frames = [];
  const walk = (f, depth, parentReverted) => {
    const reverted = parentReverted || f.error !== undefined;
    frames.push({ depth, type: String(f.type).toLowerCase(), from: String(f.from).toLowerCase(),
      to: f.to ? String(f.to).toLowerCase() : null, value: f.value === undefined ? 0n : BigInt(f.value), reverted });
    for (const c of f.calls || []) walk(c, depth + 1, reverted);
  };
  walk(root, 0, false);
  return frames;
}

// trace_transaction(hash) (Parity/OpenEthereum style): a flat list with traceAddress; "suicide"
// actions carry {address, refundAddress, balance}; create actions name creationMethod.
function parityFrames(traces) {
  const failed = new Set();
  return traces.map((t) => {
    const path = t.traceAddress.join(',');
    let reverted = t.error !== undefined;
    for (let k = 0; k < t.traceAddress.length && !reverted; ++k) reverted = failed.has(t.traceAddress.slice(0, k).join(','));
    if (t.error !== undefined) failed.add(path);
    const a = t.action;
    const depth = t.traceAddress.length;
    if (t.type === 'suicide') {
      return { depth, type: 'selfdestruct', from: a.address.toLowerCase(), to: a.refundAddress.toLowerCase(), value: BigInt(a.balance), reverted };
    }
    if (t.type === 'create') {
      return { depth, type: a.creationMethod || 'create', from: a.from.toLowerCase(),
        to: t.result && t.result.address ? t.result.address.toLowerCase() : null, value: BigInt(a.value || 0), reverted };
    }
    return { depth, type: a.callType || t.type, from: a.from.toLowerCase(), to: a.to ? a.to.toLowerCase() : null,
      value: BigInt(a.value || 0), reverted };
  });
}

// Frames below the top level that carry value, as the manifest lists them. A DELEGATECALL or
// STATICCALL moves no value, whatever a tracer prints as its value.
const valueFrames = (frames) => frames.filter((f) => f.depth >= 1 && f.value > 0n && f.type !== 'delegatecall' && f.type !== 'staticcall');

// Metadata of the tokens (what their sources return); null: no such function, or it reverts.
const TOKEN_META = {
  erc20: { name: 'Gapless Dev Token', symbol: 'GDT', decimals: 18, totalSupply: true },
  erc721: { name: 'Gapless Dev NFT', symbol: 'GDN', decimals: null, totalSupply: false },
  erc1155: { name: null, symbol: null, decimals: null, totalSupply: false },
  oddBytes32Token: { name: 'Gapless Bytes32 Token', symbol: 'GB32', decimals: 9, totalSupply: true },
  oddNoDecimalsToken: { name: null, symbol: 'GNODEC', decimals: null, totalSupply: true },
};

// A string from an eth_call result: ABI string, or bytes32 (exactly one word) with the trailing
// NUL bytes removed.
function decodeText(data) {
  const b = Buffer.from(strip(data), 'hex');
  if (b.length === 32) {
    let n = 32;
    while (n > 0 && b[n - 1] === 0) --n;
    return b.subarray(0, n).toString('utf8');
  }
  const off = Number(wordAt(data, 0));
  const len = Number(wordAt(data, off / 32));
  return b.subarray(off + 32, off + 32 + len).toString('utf8');
}

// ----------------------------------------------------------------------------------------------
// The traffic generator

const GWEI = 10n ** 9n;
const ETHER = 10n ** 18n;
const ZERO = '0x0000000000000000000000000000000000000000';
const N1155_IDS = 8; // ERC-1155 token ids 1..8
// The kinds with internal transactions, created contracts or odd tokens: weight 1.5 each (about
// 1.4% of the random mix), and each once in the first traffic block.
const FIRST_BLOCK_KINDS = ['forwarder.forward', 'forwarder.attempt', 'factory.deploy', 'factory.deploy2', 'factory.deployAndDestroy',
  'factory.destroyChild', 'oddBytes32Token.transfer', 'oddNoDecimalsToken.transfer'];

class Traffic {
  constructor(opts) {
    this.o = opts;
    this.rpc = new Rpc(opts.rpc);
    this.rng = new Rng(opts.seed);
    this.pending = []; // sent, not yet seen in a block: {hash, kind, type, from, to, status, transfers, credit, internal, created}
    this.txs = []; // settled, for the manifest
    this.transfers = []; // settled token transfers, for the manifest
    this.created = []; // settled contract creations (createdContracts), for the manifest
    this.internal = []; // settled value-carrying sub-frames (internalTransfers), for the manifest
    this.tokensSeen = new Map(); // token address -> standard, in order of first transfer
    this.supply = new Map(); // token address -> minted so far (bigint)
    this.blocks = { first: null, last: null, empty: 0, count: 0 };
    this.lastSeen = null; // highest block number whose receipts were read
    this.nonces = new Map();
    this.keepRecords = true; // false: count, but keep no per-transaction records
    this.stats = { txs: 0, failed: 0, byType: {}, transfers: 0, byStandard: {},
      created: 0, createdVia: {}, destroyedInSameTx: 0, internal: 0, internalByType: {}, internalReverted: 0, traced: 0 };
    // Spendable state: what may be spent without depending on another transaction of the same
    // block. Sends debit at once; receipts credit only when their transaction is mined.
    this.erc20 = new Map(); // addr -> bigint
    this.erc721 = new Map(); // tokenId (bigint) -> owner addr, absent while moving
    this.nextNft = 1n;
    this.erc1155 = new Map(); // `${addr}:${id}` -> bigint
    this.odd20 = { oddBytes32Token: new Map(), oddNoDecimalsToken: new Map() }; // token key -> (addr -> bigint)
    this.children = []; // DevFactory children not yet told to self-destruct: {address, balance (bigint), busy}
    this.factoryNonce = 1n; // the factory's account nonce: CREATE and CREATE2 both increment it
    this.salt = 0n; // last CREATE2 salt used
    this.parityTraces = true; // trace_transaction answered (or not tried yet)
    this.authNonce = 0n; // nonce of the EIP-7702 authority key
    this.eip7702 = opts.eip7702;
    this.blobTxs = opts.blobs;
    this.stopping = false;
  }

  log(msg) {
    if (this.o.verbose) process.stderr.write(msg + '\n');
  }

  async init() {
    const rpc = this.rpc;
    this.chainId = BigInt(await rpc.call('eth_chainId'));
    this.accounts = (await rpc.call('eth_accounts')).map((a) => a.toLowerCase());
    if (this.accounts.length < 4) throw new Error(`the node has ${this.accounts.length} unlocked accounts; 4 or more needed`);
    for (const a of this.accounts) {
      this.nonces.set(a, BigInt(await rpc.call('eth_getTransactionCount', [a, 'pending'])));
    }
    this.topics = {};
    for (const [name, sig] of Object.entries(EVENTS)) {
      this.topics[name] = await rpc.call('web3_sha3', ['0x' + Buffer.from(sig).toString('hex')]);
    }
    this.wasAutomine = await rpc.call('anvil_getAutomine').catch(() => null);
    this.intervalMining = await rpc.call('anvil_getIntervalMining').catch(() => null);
    if (this.wasAutomine === null) throw new Error('the node does not answer anvil_getAutomine: is it anvil?');
    await rpc.call('evm_setAutomine', [false]);
    this.lastSeen = Number(await rpc.call('eth_blockNumber'));
    this.artifacts = ensureBuilt();
    this.childInitHash = await this.keccak(this.artifacts.DevChild.bytecode); // DevChild takes no constructor arguments

    const address = async (key) => {
      const P = pointMul(key, SECP_G);
      const h = await rpc.call('web3_sha3', ['0x' + word(P[0]) + word(P[1])]);
      return '0x' + strip(h).slice(24);
    };
    if ((this.eip7702 || this.blobTxs) && (await address(1n)) !== '0x7e5f4552091a69125d5dfcb7b8c2659029395bdf') {
      throw new Error('secp256k1 self-test failed');
    }
    if (this.blobTxs) {
      this.blobKey = mod(BigInt('0x' + crypto.createHash('sha256').update(`gapless-blob:${this.o.seed}`).digest('hex')), SECP_N);
      this.blobSender = await address(this.blobKey);
      this.nonces.set(this.blobSender, BigInt(await rpc.call('eth_getTransactionCount', [this.blobSender, 'pending'])));
    }
    if (this.eip7702) {
      // The authority: a key of our own (from the seed), never funded. Its address is
      // keccak256(pubkey)[12:], checked above against a known vector (key 1).
      this.authKey = mod(BigInt('0x' + crypto.createHash('sha256').update(`gapless-7702:${this.o.seed}`).digest('hex')), SECP_N);
      this.authority = await address(this.authKey);
      this.authNonce = BigInt(await rpc.call('eth_getTransactionCount', [this.authority, 'latest']));
    }
  }

  async keccak(data) {
    return this.rpc.call('web3_sha3', ['0x' + strip(data)]);
  }

  // Address of what `creator` creates with CREATE at account nonce `nonce`.
  async createAddress(creator, nonce) {
    return '0x' + strip(await this.keccak(rlpList([rlpBytes(strip(creator)), rlpUint(nonce)]))).slice(24);
  }

  // Address of a DevChild that `creator` creates with CREATE2 and `salt`.
  async create2Address(creator, salt) {
    return '0x' + strip(await this.keccak('ff' + strip(creator) + word(salt) + strip(this.childInitHash))).slice(24);
  }

  async restore() {
    if (this.wasAutomine) await this.rpc.call('evm_setAutomine', [true]).catch(() => {});
  }

  // --- sending ------------------------------------------------------------------------------

  // Fee fields and envelope for a random or given type.
  envelope(type, to) {
    const rng = this.rng;
    if (type === 0) return { type: '0x0', gasPrice: hex(BigInt(rng.int(2, 20)) * GWEI) };
    if (type === 1) {
      const keys = Array.from({ length: rng.int(0, 2) }, () => '0x' + word(rng.int(0, 9)));
      return {
        type: '0x1',
        gasPrice: hex(BigInt(rng.int(2, 20)) * GWEI),
        accessList: [{ address: to || this.accounts[0], storageKeys: keys }],
      };
    }
    return {
      type: type === 4 ? '0x4' : '0x2',
      maxFeePerGas: hex(BigInt(rng.int(30, 60)) * GWEI),
      maxPriorityFeePerGas: hex(BigInt(rng.int(0, 2000)) * (GWEI / 1000n)),
    };
  }

  // internal: the expected value-carrying sub-frames {depth, type, from, to, value, reverted}, in
  // execution order; created: the expected contract creations {address, creator, via,
  // destroyedInSameTx} (a deployment's address comes from its receipt).
  async send({ kind, from, to, value = 0n, data = '0x', gas, type, status = 1, transfers = [], credit = () => {}, extra = {},
    internal = [], created = [] }) {
    if (type === undefined) type = this.rng.weighted([[2, 0], [1, 1], [4, 2]]);
    const env = this.envelope(type, to);
    const nonce = this.nonces.get(from);
    const req = { from, nonce: hex(nonce), gas: hex(gas), value: hex(value), input: data, chainId: hex(this.chainId), ...env, ...extra };
    if (to) req.to = to;
    if (env.accessList) req.gas = hex(BigInt(gas) + 2400n + 1900n * BigInt(env.accessList[0].storageKeys.length));
    const hash = await this.rpc.call('eth_sendTransaction', [req]);
    this.nonces.set(from, nonce + 1n);
    if (!to) created = [{ address: null, creator: from, via: 'transaction', destroyedInSameTx: false }];
    this.pending.push({ hash, kind, type, from, to: to || null, status, transfers, credit, internal, created });
    return hash;
  }

  // Picks and sends one random transaction (or one of the given kind); returns false when the
  // chosen kind had nothing to do or is not supported by the node.
  async randomTx(forced, { value: forcedValue } = {}) {
    const rng = this.rng;
    const acc = this.accounts;
    const c = this.contracts;
    const other = (a) => { let b; do { b = rng.pick(acc); } while (b === a); return b; };
    const kinds = [
      [10, 'eth0'], [6, 'eth1'], [10, 'eth2'],
      [12, 'erc20.transfer'], [5, 'erc20.transferFrom'], [4, 'erc20.transferMany'], [3, 'erc20.mint'],
      [6, 'erc721.mint'], [5, 'erc721.transferFrom'], [4, 'erc721.safeTransferFrom'],
      [4, 'erc1155.mint'], [2, 'erc1155.mintBatch'], [6, 'erc1155.safeTransferFrom'], [5, 'erc1155.safeBatchTransferFrom'],
      [3, 'ping'], [3, 'revert.fail'], [1, 'revert.failSilently'], [2, 'revert.erc20'],
      ...FIRST_BLOCK_KINDS.map((k) => [1.5, k]),
    ];
    if (this.eip7702 && !this.pending.some((p) => p.kind === 'eip7702')) kinds.push([2, 'eip7702']);
    if (this.blobTxs && this.blobFunded && !this.pending.some((p) => p.kind === 'blob')) kinds.push([1, 'blob']);
    const kind = forced || rng.weighted(kinds);
    const from = rng.pick(acc);
    const T20 = this.artifacts.DevToken20;
    const T721 = this.artifacts.DevNFT721;
    const T1155 = this.artifacts.DevMulti1155;
    const REV = this.artifacts.DevReverter;
    const erc20 = (f, t, v) => ({ token: c.erc20, standard: 'erc20', operator: null, from: f, to: t, tokenId: null, value: v });
    const erc721 = (f, t, id) => ({ token: c.erc721, standard: 'erc721', operator: null, from: f, to: t, tokenId: id, value: 1n });
    const erc1155 = (op, f, t, id, v, batch) => ({ token: c.erc1155, standard: 'erc1155', operator: op, from: f, to: t, tokenId: id, value: v, batch });
    const bal20 = (a) => this.erc20.get(a) || 0n;
    const add20 = (a, v) => this.erc20.set(a, bal20(a) + v);
    const key1155 = (a, id) => `${a}:${id}`;
    const bal1155 = (a, id) => this.erc1155.get(key1155(a, id)) || 0n;
    const add1155 = (a, id, v) => this.erc1155.set(key1155(a, id), bal1155(a, id) + v);
    const ownedBy = (a) => [...this.erc721].filter(([, o]) => o === a).map(([id]) => id);

    switch (kind) {
      case 'eth0': case 'eth1': case 'eth2': {
        const to = other(from);
        const value = rng.big(1n, 1000n) * (ETHER / 1000n);
        await this.send({ kind: 'eth', from, to, value, gas: 21000, type: Number(kind[3]) });
        return true;
      }
      case 'erc20.mint': {
        const to = rng.pick(acc);
        const v = rng.big(1n, 10000n) * ETHER;
        await this.send({ kind, from, to: c.erc20, data: calldata(T20, 'mint(address,uint256)', to, v), gas: 120000,
          transfers: [erc20(ZERO, to, v)], credit: () => add20(to, v) });
        return true;
      }
      case 'erc20.transfer': {
        const to = other(from);
        const v = rng.big(0n, bal20(from) / 4n); // zero-value transfers happen too
        this.erc20.set(from, bal20(from) - v);
        await this.send({ kind, from, to: c.erc20, data: calldata(T20, 'transfer(address,uint256)', to, v), gas: 120000,
          transfers: [erc20(from, to, v)], credit: () => add20(to, v) });
        return true;
      }
      case 'erc20.transferFrom': {
        // Set-up approved accounts[i+1] to spend for accounts[i] without limit.
        const i = acc.indexOf(from);
        const owner = acc[(i + acc.length - 1) % acc.length];
        const to = other(owner);
        const v = rng.big(1n, bal20(owner) / 4n + 1n);
        if (v > bal20(owner)) return false;
        this.erc20.set(owner, bal20(owner) - v);
        await this.send({ kind, from, to: c.erc20, data: calldata(T20, 'transferFrom(address,address,uint256)', owner, to, v), gas: 120000,
          transfers: [erc20(owner, to, v)], credit: () => add20(to, v) });
        return true;
      }
      case 'erc20.transferMany': {
        const n = rng.int(2, 4);
        const tos = Array.from({ length: n }, () => other(from));
        const vs = tos.map(() => rng.big(1n, bal20(from) / 16n + 1n));
        const total = vs.reduce((a, b) => a + b, 0n);
        if (total > bal20(from)) return false;
        this.erc20.set(from, bal20(from) - total);
        await this.send({ kind, from, to: c.erc20, data: calldata(T20, 'transferMany(address[],uint256[])', tos, vs), gas: 60000 + 40000 * n,
          transfers: tos.map((t, k) => erc20(from, t, vs[k])), credit: () => tos.forEach((t, k) => add20(t, vs[k])) });
        return true;
      }
      case 'erc721.mint': {
        const to = rng.pick(acc);
        const id = this.nextNft++;
        await this.send({ kind, from, to: c.erc721, data: calldata(T721, 'mint(address,uint256)', to, id), gas: 120000,
          transfers: [erc721(ZERO, to, id)], credit: () => this.erc721.set(id, to) });
        return true;
      }
      case 'erc721.transferFrom': case 'erc721.safeTransferFrom': {
        const ids = ownedBy(from);
        if (ids.length === 0) return false;
        const id = rng.pick(ids);
        const to = other(from);
        this.erc721.delete(id);
        const sig = kind === 'erc721.transferFrom' ? 'transferFrom(address,address,uint256)' : 'safeTransferFrom(address,address,uint256)';
        await this.send({ kind, from, to: c.erc721, data: calldata(T721, sig, from, to, id), gas: 120000,
          transfers: [erc721(from, to, id)], credit: () => this.erc721.set(id, to) });
        return true;
      }
      case 'erc1155.mint': {
        const to = rng.pick(acc);
        const id = BigInt(rng.int(1, N1155_IDS));
        const v = rng.big(1n, 500n);
        await this.send({ kind, from, to: c.erc1155, data: calldata(T1155, 'mint(address,uint256,uint256)', to, id, v), gas: 120000,
          transfers: [erc1155(from, ZERO, to, id, v, 0)], credit: () => add1155(to, id, v) });
        return true;
      }
      case 'erc1155.mintBatch': {
        const to = rng.pick(acc);
        const ids = this.distinctIds(rng.int(1, 4));
        const vs = ids.map(() => rng.big(1n, 500n));
        await this.send({ kind, from, to: c.erc1155, data: calldata(T1155, 'mintBatch(address,uint256[],uint256[])', to, ids, vs), gas: 80000 + 50000 * ids.length,
          transfers: ids.map((id, k) => erc1155(from, ZERO, to, id, vs[k], k)), credit: () => ids.forEach((id, k) => add1155(to, id, vs[k])) });
        return true;
      }
      case 'erc1155.safeTransferFrom': {
        const id = BigInt(rng.int(1, N1155_IDS));
        const have = bal1155(from, id);
        if (have === 0n) return false;
        const to = other(from);
        const v = rng.big(1n, have);
        add1155(from, id, -v);
        await this.send({ kind, from, to: c.erc1155, data: calldata(T1155, 'safeTransferFrom(address,address,uint256,uint256,bytes)', from, to, id, v, '0x'), gas: 120000,
          transfers: [erc1155(from, from, to, id, v, 0)], credit: () => add1155(to, id, v) });
        return true;
      }
      case 'erc1155.safeBatchTransferFrom': {
        const ids = this.distinctIds(rng.int(1, 4)).filter((id) => bal1155(from, id) > 0n);
        if (ids.length === 0) return false;
        const to = other(from);
        const vs = ids.map((id) => rng.big(1n, bal1155(from, id)));
        ids.forEach((id, k) => add1155(from, id, -vs[k]));
        await this.send({ kind, from, to: c.erc1155,
          data: calldata(T1155, 'safeBatchTransferFrom(address,address,uint256[],uint256[],bytes)', from, to, ids, vs, '0x'), gas: 80000 + 50000 * ids.length,
          transfers: ids.map((id, k) => erc1155(from, from, to, id, vs[k], k)), credit: () => ids.forEach((id, k) => add1155(to, id, vs[k])) });
        return true;
      }
      case 'ping':
        await this.send({ kind, from, to: c.reverter, data: calldata(REV, 'ping(uint256)', rng.big(0n, 1000000n)), gas: 80000 });
        return true;
      case 'revert.fail':
        await this.send({ kind, from, to: c.reverter, data: calldata(REV, 'fail(uint256)', rng.big(0n, 1000000n)), gas: 80000, status: 0 });
        return true;
      case 'revert.failSilently':
        await this.send({ kind, from, to: c.reverter, data: calldata(REV, 'failSilently()'), gas: 50000, status: 0 });
        return true;
      case 'revert.erc20': {
        // More than could ever exist: fails whatever else the block holds. No Transfer log.
        const to = other(from);
        await this.send({ kind, from, to: c.erc20, data: calldata(T20, 'transfer(address,uint256)', to, 2n ** 255n), gas: 120000, status: 0 });
        return true;
      }
      case 'forwarder.forward': {
        // A third of the value to an EOA at each hop, the rest on along the route; the route
        // alternates between the two forwarders and ends at the vault: depth 1, 2 or 3.
        const [start, alt] = rng.chance(0.5) ? [c.forwarder, c.forwarder2] : [c.forwarder2, c.forwarder];
        const hops = rng.int(1, 3);
        const route = [...Array.from({ length: hops - 1 }, (_, k) => (k % 2 === 0 ? alt : start)), c.vault];
        const eoa = other(from);
        const value = rng.big(1n, 1000n) * (ETHER / 1000n);
        const internal = [];
        const expect = (self, depth, v, rest) => {
          const share = v / 3n;
          internal.push({ depth, type: 'call', from: self, to: eoa, value: share, reverted: false });
          internal.push({ depth, type: 'call', from: self, to: rest[0], value: v - share, reverted: false });
          if (rest.length > 1) expect(rest[0], depth + 1, v - share, rest.slice(1));
        };
        expect(start, 1, value, route);
        await this.send({ kind, from, to: start, value, data: calldata(this.artifacts.DevForwarder, 'forward(address,address[])', eoa, route),
          gas: 50000 + 40000 * hops, internal });
        return true;
      }
      case 'forwarder.attempt': {
        // Half the value into forwardAndRevert on the other forwarder, which pays half of that to
        // the EOA and reverts (both frames reverted); the other half to the EOA.
        const [start, alt] = rng.chance(0.5) ? [c.forwarder, c.forwarder2] : [c.forwarder2, c.forwarder];
        const eoa = other(from);
        const value = rng.big(1n, 1000n) * (ETHER / 1000n);
        const half = value / 2n;
        const internal = [
          { depth: 1, type: 'call', from: start, to: alt, value: half, reverted: true },
          { depth: 2, type: 'call', from: alt, to: eoa, value: half / 2n, reverted: true },
          { depth: 1, type: 'call', from: start, to: eoa, value: value - half, reverted: false },
        ];
        await this.send({ kind, from, to: start, value, data: calldata(this.artifacts.DevForwarder, 'attempt(address,address)', eoa, alt),
          gas: 110000, internal });
        return true;
      }
      case 'factory.deploy': case 'factory.deploy2': {
        const create2 = kind === 'factory.deploy2';
        const value = forcedValue !== undefined ? forcedValue : rng.chance(0.5) ? rng.big(1n, 1000n) * GWEI : 0n;
        const salt = create2 ? ++this.salt : null;
        const address = create2 ? await this.create2Address(c.factory, salt) : await this.createAddress(c.factory, this.factoryNonce);
        this.factoryNonce += 1n;
        const via = create2 ? 'create2' : 'create';
        const child = { address, balance: value, busy: true };
        this.children.push(child);
        await this.send({ kind, from, to: c.factory, value, gas: 200000,
          data: create2 ? calldata(this.artifacts.DevFactory, 'deploy2(bytes32)', salt) : calldata(this.artifacts.DevFactory, 'deploy()'),
          internal: value > 0n ? [{ depth: 1, type: via, from: c.factory, to: address, value, reverted: false }] : [],
          created: [{ address, creator: c.factory, via, destroyedInSameTx: false }], credit: () => { child.busy = false; } });
        return true;
      }
      case 'factory.deployAndDestroy': {
        // Created and self-destructed in one transaction: deleted (EIP-6780), its value goes on.
        const create2 = rng.chance(0.5);
        const value = rng.big(1n, 1000n) * GWEI;
        const beneficiary = rng.pick(acc);
        const salt = ++this.salt; // unused by CREATE, but always a fresh one
        const address = create2 ? await this.create2Address(c.factory, salt) : await this.createAddress(c.factory, this.factoryNonce);
        this.factoryNonce += 1n;
        const via = create2 ? 'create2' : 'create';
        await this.send({ kind, from, to: c.factory, value, gas: 230000,
          data: calldata(this.artifacts.DevFactory, 'deployAndDestroy(bytes32,bool,address)', salt, create2, beneficiary),
          internal: [
            { depth: 1, type: via, from: c.factory, to: address, value, reverted: false },
            { depth: 2, type: 'selfdestruct', from: address, to: beneficiary, value, reverted: false },
          ],
          created: [{ address, creator: c.factory, via, destroyedInSameTx: true }] });
        return true;
      }
      case 'factory.destroyChild': {
        // An older child self-destructs: only its balance (plus what this call brings) moves.
        const idle = this.children.filter((ch) => !ch.busy);
        if (idle.length === 0) return false;
        const child = rng.pick(idle);
        // Each child only once: before Cancun (--hardfork shanghai) the child is deleted, and
        // a call to it would fail.
        const value = child.balance > 0n && rng.chance(0.5) ? 0n : rng.big(1n, 1000n) * GWEI;
        const beneficiary = rng.pick(acc);
        const internal = [];
        if (value > 0n) internal.push({ depth: 1, type: 'call', from: c.factory, to: child.address, value, reverted: false });
        internal.push({ depth: 2, type: 'selfdestruct', from: child.address, to: beneficiary, value: child.balance + value, reverted: false });
        this.children.splice(this.children.indexOf(child), 1);
        await this.send({ kind, from, to: c.factory, value, gas: 80000,
          data: calldata(this.artifacts.DevFactory, 'destroyChild(address,address)', child.address, beneficiary), internal });
        return true;
      }
      case 'oddBytes32Token.transfer': case 'oddNoDecimalsToken.transfer': {
        const key = kind.slice(0, kind.indexOf('.'));
        const token = c[key];
        const bal = this.odd20[key];
        const to = other(from);
        const v = rng.big(0n, (bal.get(from) || 0n) / 4n);
        bal.set(from, (bal.get(from) || 0n) - v);
        const art = key === 'oddBytes32Token' ? this.artifacts.DevBytes32Token : this.artifacts.DevNoDecimalsToken;
        await this.send({ kind, from, to: token, data: calldata(art, 'transfer(address,uint256)', to, v), gas: 120000,
          transfers: [{ token, standard: 'erc20', operator: null, from, to, tokenId: null, value: v }],
          credit: () => bal.set(to, (bal.get(to) || 0n) + v) });
        return true;
      }
      case 'eip7702': {
        // Delegate the authority's code to DevReverter and call ping() on the authority in the
        // same transaction: the Ping log then comes from the authority's address.
        const auth = await this.authorization(c.reverter, this.authNonce);
        try {
          await this.send({ kind, from, to: this.authority, data: calldata(REV, 'ping(uint256)', rng.big(0n, 1000000n)), gas: 100000,
            type: 4, extra: { authorizationList: [auth] }, credit: () => {} });
        } catch (e) {
          this.eip7702 = false; // e.g. a pre-Prague hardfork
          this.unsupported7702 = e.message;
          this.log(`eip7702: disabled: ${e.message}`);
          return false;
        }
        this.authNonce += 1n;
        return true;
      }
      case 'blob': {
        const to = rng.pick(acc);
        try {
          await this.sendBlob(to, rng.big(1n, 1000n) * GWEI);
        } catch (e) {
          this.blobTxs = false; // e.g. a pre-Cancun hardfork
          this.unsupportedBlobs = e.message;
          this.log(`blobs: disabled: ${e.message}`);
          return false;
        }
        return true;
      }
      default:
        throw new Error(`unknown kind ${kind}`);
    }
  }

  distinctIds(n) {
    const ids = new Set();
    while (ids.size < n) ids.add(BigInt(this.rng.int(1, N1155_IDS)));
    return [...ids];
  }

  // A type-3 transaction from the blob sender with one all-zero blob, signed here and sent with
  // eth_sendRawTransaction in the (pre-Osaka) network form rlp([tx, blobs, commitments, proofs]),
  // which anvil 1.7.1 accepts on every hardfork since Cancun.
  async sendBlob(to, value) {
    const rng = this.rng;
    const infinity = 'c0' + '00'.repeat(47);
    const versionedHash = '01' + crypto.createHash('sha256').update(Buffer.from(infinity, 'hex')).digest('hex').slice(2);
    const nonce = this.nonces.get(this.blobSender);
    const fields = [
      rlpUint(this.chainId), rlpUint(nonce),
      rlpUint(BigInt(rng.int(0, 2000)) * (GWEI / 1000n)), rlpUint(BigInt(rng.int(30, 60)) * GWEI), // tip, max fee
      rlpUint(21000n), rlpBytes(strip(to)), rlpUint(value), rlpBytes(''), rlpList([]),
      rlpUint(BigInt(rng.int(1, 10)) * GWEI), rlpList([rlpBytes(versionedHash)]), // max blob fee, hashes
    ];
    const digest = await this.rpc.call('web3_sha3', ['0x03' + rlpList(fields)]);
    const { r, s, yParity } = secpSign(digest, this.blobKey);
    const tx = rlpList([...fields, rlpUint(yParity), rlpUint(r), rlpUint(s)]);
    const blob = '00'.repeat(131072);
    const wrapped = rlpList([tx, rlpList([rlpBytes(blob)]), rlpList([rlpBytes(infinity)]), rlpList([rlpBytes(infinity)])]);
    const hash = await this.rpc.call('eth_sendRawTransaction', ['0x03' + wrapped]);
    this.nonces.set(this.blobSender, nonce + 1n);
    this.pending.push({ hash, kind: 'blob', type: 3, from: this.blobSender, to, status: 1, transfers: [], credit: () => {}, internal: [], created: [] });
    return hash;
  }

  async authorization(address, nonce) {
    const payload = '05' + rlpList([rlpUint(this.chainId), rlpBytes(strip(address)), rlpUint(nonce)]);
    const digest = await this.rpc.call('web3_sha3', ['0x' + payload]);
    const { r, s, yParity } = secpSign(digest, this.authKey);
    return { chainId: hex(this.chainId), address, nonce: hex(nonce), yParity: hex(yParity), r: hex(r), s: hex(s) };
  }

  // --- mining and checking ------------------------------------------------------------------

  async mine() {
    await this.rpc.call('evm_mine');
  }

  // Reads the receipts of every block since the last call, checks each pending transaction
  // found there against what was expected, and moves it to the manifest lists.
  async settle() {
    const head = Number(await this.rpc.call('eth_blockNumber'));
    const byHash = new Map(this.pending.map((p) => [p.hash, p]));
    for (let b = this.lastSeen + 1; b <= head; ++b) {
      const receipts = await this.rpc.call('eth_getBlockReceipts', [hex(b)]);
      if (!Array.isArray(receipts)) throw new Error(`eth_getBlockReceipts(${b}) returned ${JSON.stringify(receipts)}`);
      if (this.blocks.first === null) this.blocks.first = b;
      this.blocks.last = b;
      this.blocks.count += 1;
      if (receipts.length === 0) this.blocks.empty += 1;
      let mine = 0;
      for (const rc of receipts) {
        const p = byHash.get(rc.transactionHash);
        if (!p) continue;
        byHash.delete(rc.transactionHash);
        await this.check(p, rc);
        mine += 1;
      }
      this.log(`block ${b}: ${receipts.length} txs (${mine} ours)`);
      this.lastSeen = b;
    }
    this.pending = this.pending.filter((p) => byHash.has(p.hash));
  }

  async check(p, rc) {
    const status = Number(rc.status);
    const where = `tx ${p.hash} (${p.kind}, block ${Number(rc.blockNumber)})`;
    if (status !== p.status) {
      throw new Error(`${where}: status ${status}, expected ${p.status}; if the node reorders transactions, ` +
        'this is a bug in traffic.js: please report it');
    }
    if (Number(rc.type) !== p.type) throw new Error(`${where}: type ${rc.type}, expected ${p.type}`);
    const tokenAddrs = new Set(Object.keys(TOKEN_META).map((k) => this.contracts[k]));
    const tokenLogs = rc.logs.filter((l) => tokenAddrs.has(l.address.toLowerCase()) &&
      [this.topics.Transfer, this.topics.TransferSingle, this.topics.TransferBatch].includes(l.topics[0]));
    // Expand logs into one row per transferred (token id, value), in log order.
    const rows = [];
    for (const l of tokenLogs) {
      const logIndex = Number(l.logIndex);
      const t = l.topics;
      if (t[0] === this.topics.Transfer && t.length === 3) {
        rows.push({ logIndex, batchIndex: 0, token: l.address.toLowerCase(), standard: 'erc20', operator: null,
          from: topicAddress(t[1]), to: topicAddress(t[2]), tokenId: null, value: wordAt(l.data, 0) });
      } else if (t[0] === this.topics.Transfer && t.length === 4) {
        rows.push({ logIndex, batchIndex: 0, token: l.address.toLowerCase(), standard: 'erc721', operator: null,
          from: topicAddress(t[1]), to: topicAddress(t[2]), tokenId: BigInt(t[3]), value: 1n });
      } else if (t[0] === this.topics.TransferSingle) {
        rows.push({ logIndex, batchIndex: 0, token: l.address.toLowerCase(), standard: 'erc1155', operator: topicAddress(t[1]),
          from: topicAddress(t[2]), to: topicAddress(t[3]), tokenId: wordAt(l.data, 0), value: wordAt(l.data, 1) });
      } else {
        const ids = uintArrayAt(l.data, 0);
        const vs = uintArrayAt(l.data, 1);
        ids.forEach((id, k) => rows.push({ logIndex, batchIndex: k, token: l.address.toLowerCase(), standard: 'erc1155',
          operator: topicAddress(t[1]), from: topicAddress(t[2]), to: topicAddress(t[3]), tokenId: id, value: vs[k] }));
      }
    }
    if (rows.length !== p.transfers.length) {
      throw new Error(`${where}: ${rows.length} token transfers in the receipt, expected ${p.transfers.length}`);
    }
    rows.forEach((row, k) => {
      const want = p.transfers[k];
      for (const f of ['token', 'standard', 'operator', 'from', 'to', 'tokenId', 'value']) {
        if (String(row[f]) !== String(want[f])) {
          throw new Error(`${where}: transfer ${k}: ${f} is ${row[f]}, expected ${want[f]}`);
        }
      }
      if (want.batch !== undefined && row.batchIndex !== want.batch) throw new Error(`${where}: transfer ${k}: batch index ${row.batchIndex}`);
    });
    if (p.kind === 'eip7702') {
      const pings = rc.logs.filter((l) => l.topics[0] === this.topics.Ping && l.address.toLowerCase() === this.authority);
      if (pings.length !== 1) throw new Error(`${where}: the authorization was not applied (no Ping log from ${this.authority})`);
    }
    if (p.kind === 'blob' && BigInt(rc.blobGasUsed || 0) !== 131072n) {
      throw new Error(`${where}: blobGasUsed ${rc.blobGasUsed}, expected 0x20000`);
    }
    if (status === 1) p.credit();
    const block = Number(rc.blockNumber);
    const txIndex = Number(rc.transactionIndex);
    const created = status === 1 ? p.created.map((cc) => ({ ...cc, address: cc.address || (rc.contractAddress || '').toLowerCase() })) : [];
    const internal = status === 1 ? p.internal : [];
    // Traced: what should create contracts or move value below the top level, and whatever goes
    // to a contract that can (so that a value transfer that should not be there is found too).
    const c = this.contracts;
    if (created.length > 0 || internal.length > 0 || [c.forwarder, c.forwarder2, c.factory].includes(p.to)) {
      await this.checkTrace(p, where, created, internal);
    }
    for (const row of rows) {
      if (!this.tokensSeen.has(row.token)) this.tokensSeen.set(row.token, row.standard);
      if (row.from === ZERO) this.supply.set(row.token, (this.supply.get(row.token) || 0n) + row.value);
    }
    const st = this.stats;
    st.txs += 1;
    st.failed += status === 0 ? 1 : 0;
    st.byType[p.type] = (st.byType[p.type] || 0) + 1;
    st.transfers += rows.length;
    for (const row of rows) st.byStandard[row.standard] = (st.byStandard[row.standard] || 0) + 1;
    st.created += created.length;
    for (const cc of created) {
      st.createdVia[cc.via] = (st.createdVia[cc.via] || 0) + 1;
      if (cc.destroyedInSameTx) st.destroyedInSameTx += 1;
    }
    st.internal += internal.length;
    for (const f of internal) {
      st.internalByType[f.type] = (st.internalByType[f.type] || 0) + 1;
      if (f.reverted) st.internalReverted += 1;
    }
    if (!this.keepRecords) return;
    for (const cc of created) {
      this.created.push({ address: cc.address, block, txHash: p.hash, txIndex, creator: cc.creator, via: cc.via,
        destroyedInSameTx: cc.destroyedInSameTx });
    }
    for (const f of internal) {
      this.internal.push({ block, txHash: p.hash, txIndex, depth: f.depth, from: f.from, to: f.to, value: f.value.toString(),
        type: f.type, reverted: f.reverted });
    }
    this.txs.push({ hash: p.hash, block, index: txIndex, type: p.type, kind: p.kind, from: p.from, to: p.to,
      contractAddress: rc.contractAddress ? rc.contractAddress.toLowerCase() : null, status, logs: rc.logs.length });
    for (const row of rows) {
      this.transfers.push({ txHash: p.hash, block, txIndex, logIndex: row.logIndex, batchIndex: row.batchIndex,
        token: row.token, standard: row.standard, operator: row.operator, from: row.from, to: row.to,
        tokenId: row.tokenId === null ? null : row.tokenId.toString(), value: row.value.toString() });
    }
  }

  // Traces a transaction that creates contracts or moves value below the top level: its
  // value-carrying sub-frames must be exactly `internal` (same order, depth, type, from, to,
  // value, reverted), and its successful CREATE/CREATE2 frames (the top-level one of a deployment
  // included) exactly `created`, a contract counting as destroyed when it self-destructs in the
  // same transaction. Checked with callTracer and, where the node has it, trace_transaction.
  async checkTrace(p, where, created, internal) {
    const compare = (frames, tracer) => {
      const fail = (msg) => { throw new Error(`${where}: ${tracer}: ${msg}`); };
      const show = (f) => `${f.type} ${f.from} -> ${f.to} value ${f.value}${f.reverted ? ' (reverted)' : ''} at depth ${f.depth}`;
      const moved = valueFrames(frames);
      const n = Math.max(moved.length, internal.length);
      for (let k = 0; k < n; ++k) {
        const got = moved[k];
        const want = internal[k];
        if (!got) fail(`value-carrying sub-frame ${k} missing: expected ${show(want)}`);
        if (!want) fail(`unexpected value-carrying sub-frame ${k}: ${show(got)}`);
        for (const f of ['depth', 'type', 'from', 'to', 'value', 'reverted']) {
          if (String(got[f]) !== String(want[f])) fail(`value-carrying sub-frame ${k} is ${show(got)}, expected ${show(want)}`);
        }
      }
      const creations = frames.filter((f) => (f.type === 'create' || f.type === 'create2') && !f.reverted);
      if (creations.length !== created.length) fail(`${creations.length} contracts created, expected ${created.length}`);
      creations.forEach((f, k) => {
        const want = created[k];
        const via = f.depth === 0 ? 'transaction' : f.type;
        const destroyed = frames.some((d) => d.type === 'selfdestruct' && d.from === f.to && !d.reverted);
        if (f.to !== want.address || f.from !== want.creator || via !== want.via || destroyed !== want.destroyedInSameTx) {
          fail(`created contract ${k} is ${f.to} by ${f.from} via ${via} (destroyed: ${destroyed}), expected ${want.address} by ` +
            `${want.creator} via ${want.via} (destroyed: ${want.destroyedInSameTx})`);
        }
      });
    };
    compare(callTracerFrames(await this.rpc.call('debug_traceTransaction', [p.hash, { tracer: 'callTracer' }])), 'debug_traceTransaction');
    if (this.parityTraces) {
      let traces = null;
      try {
        traces = await this.rpc.call('trace_transaction', [p.hash]);
      } catch (e) {
        if (e.rpcCode !== -32601) throw e; // only "method not found" means the node lacks it
        this.parityTraces = false;
        this.unsupportedParityTraces = e.message;
        this.log(`trace_transaction: not supported: ${e.message}`);
      }
      if (traces) compare(parityFrames(traces), 'trace_transaction');
    }
    this.stats.traced += 1;
  }

  // Reads name(), symbol(), decimals() and totalSupply() of every token that moved and checks them
  // against what the sources say (TOKEN_META) and what was minted; returns the manifest's tokens.
  // On a hardfork older than the bytecode's (--hardfork shanghai: no MCOPY, which e.g. DevToken20's
  // name() uses) such a call fails with "NotActivated": the manifest then says null, as an
  // indexer finds it, and the log says so.
  async checkTokens() {
    const keyOf = new Map(Object.keys(TOKEN_META).map((k) => [this.contracts[k], k]));
    const selectors = { 'name()': '0x06fdde03', 'symbol()': '0x95d89b41', 'decimals()': '0x313ce567', 'totalSupply()': '0x18160ddd' };
    const read = async (token, signature) => {
      try {
        return await this.rpc.call('eth_call', [{ to: token, input: selectors[signature] }, 'latest']);
      } catch (e) {
        if (e.rpcCode === 3 || /revert/i.test(e.message)) return null; // no such function, or it reverts
        if (/NotActivated/.test(e.message)) {
          this.log(`token ${token}: ${signature} fails on this hardfork: ${e.message}`);
          return undefined;
        }
        throw e;
      }
    };
    const tokens = [];
    for (const [address, standard] of this.tokensSeen) {
      const meta = TOKEN_META[keyOf.get(address)];
      if (!meta) throw new Error(`token ${address}: not one of ours`);
      const [name, symbol, decimals, supply] = await Promise.all(['name()', 'symbol()', 'decimals()', 'totalSupply()'].map((sig) => read(address, sig)));
      const got = {
        name: name == null ? name : decodeText(name),
        symbol: symbol == null ? symbol : decodeText(symbol),
        decimals: decimals == null ? decimals : Number(wordAt(decimals, 0)),
        totalSupply: supply == null ? supply : wordAt(supply, 0).toString(),
      };
      const want = { name: meta.name, symbol: meta.symbol, decimals: meta.decimals,
        totalSupply: meta.totalSupply ? (this.supply.get(address) || 0n).toString() : null };
      for (const f of Object.keys(want)) {
        if (got[f] === undefined) want[f] = null; // the call fails on this hardfork (see above)
        else if (got[f] !== want[f]) throw new Error(`token ${address} (${keyOf.get(address)}): ${f} is ${JSON.stringify(got[f])}, expected ${JSON.stringify(want[f])}`);
      }
      tokens.push({ address, standard, ...want });
    }
    return tokens;
  }

  // Mines until nothing we sent is pending (a node with interval mining may have sealed some
  // of them already, or may seal them in a later block).
  async mineAndSettle() {
    await this.mine();
    await this.settle();
    for (let i = 0; this.pending.length > 0; ++i) {
      if (i === 5) throw new Error(`${this.pending.length} transactions stay pending, e.g. ${this.pending[0].hash}`);
      await this.mine();
      await this.settle();
    }
  }

  // --- phases ---------------------------------------------------------------------------------

  async deploy() {
    const a = this.artifacts;
    const deployer = this.accounts[0];
    const order = [['erc20', a.DevToken20], ['erc721', a.DevNFT721], ['erc1155', a.DevMulti1155], ['reverter', a.DevReverter],
      ['forwarder', a.DevForwarder], ['forwarder2', a.DevForwarder], ['vault', a.DevVault], ['factory', a.DevFactory],
      ['oddBytes32Token', a.DevBytes32Token], ['oddNoDecimalsToken', a.DevNoDecimalsToken]];
    const hashes = {};
    for (const [name, art] of order) {
      const est = BigInt(await this.rpc.call('eth_estimateGas', [{ from: deployer, input: art.bytecode }]));
      hashes[name] = await this.send({ kind: `deploy.${name}`, from: deployer, data: art.bytecode, gas: (est * 5n) / 4n, type: 2 });
    }
    // check() filters logs by these addresses; none of the deployments moves a token.
    this.contracts = Object.fromEntries(order.map(([name]) => [name, '']));
    await this.mineAndSettle();
    for (const [name] of order) {
      const rc = await this.rpc.call('eth_getTransactionReceipt', [hashes[name]]);
      if (!rc || !rc.contractAddress) throw new Error(`deploying ${name} failed: ${JSON.stringify(rc)}`);
      this.contracts[name] = rc.contractAddress.toLowerCase();
    }
  }

  // Starting balances: ERC-20 for everyone, each account approves the next one without limit,
  // some ERC-1155 ids, a few NFTs each. All in one block.
  async setup() {
    const { DevToken20: T20, DevMulti1155: T1155 } = this.artifacts;
    const c = this.contracts;
    const acc = this.accounts;
    const ids = Array.from({ length: N1155_IDS }, (_, i) => BigInt(i + 1));
    for (let i = 0; i < acc.length; ++i) {
      const a = acc[i];
      const v = 1000000n * ETHER;
      await this.send({ kind: 'erc20.mint', from: a, to: c.erc20, data: calldata(T20, 'mint(address,uint256)', a, v), gas: 120000,
        transfers: [{ token: c.erc20, standard: 'erc20', operator: null, from: ZERO, to: a, tokenId: null, value: v }],
        credit: () => this.erc20.set(a, (this.erc20.get(a) || 0n) + v) });
      const spender = acc[(i + 1) % acc.length];
      await this.send({ kind: 'erc20.approve', from: a, to: c.erc20, data: calldata(T20, 'approve(address,uint256)', spender, 2n ** 256n - 1n), gas: 80000 });
      const vs = ids.map(() => 1000n);
      await this.send({ kind: 'erc1155.mintBatch', from: a, to: c.erc1155, data: calldata(T1155, 'mintBatch(address,uint256[],uint256[])', a, ids, vs),
        gas: 80000 + 50000 * ids.length,
        transfers: ids.map((id, k) => ({ token: c.erc1155, standard: 'erc1155', operator: a, from: ZERO, to: a, tokenId: id, value: vs[k], batch: k })),
        credit: () => ids.forEach((id) => this.erc1155.set(`${a}:${id}`, (this.erc1155.get(`${a}:${id}`) || 0n) + 1000n)) });
    }
    if (this.blobTxs) {
      await this.send({ kind: 'eth', from: acc[0], to: this.blobSender, value: 100n * ETHER, gas: 21000, type: 2,
        credit: () => { this.blobFunded = true; } });
    }
    for (let k = 0; k < 2 * acc.length; ++k) {
      const to = acc[k % acc.length];
      const id = this.nextNft++;
      await this.send({ kind: 'erc721.mint', from: to, to: c.erc721, data: calldata(this.artifacts.DevNFT721, 'mint(address,uint256)', to, id), gas: 120000,
        transfers: [{ token: c.erc721, standard: 'erc721', operator: null, from: ZERO, to, tokenId: id, value: 1n }],
        credit: () => this.erc721.set(id, to) });
    }
    // The odd ERC-20s for everyone, and one DevChild (with value) that the first traffic block
    // can make self-destruct.
    for (const [key, art, v] of [['oddBytes32Token', this.artifacts.DevBytes32Token, 1000000n * 10n ** 9n],
      ['oddNoDecimalsToken', this.artifacts.DevNoDecimalsToken, 1000000n]]) {
      for (const a of acc) {
        const bal = this.odd20[key];
        await this.send({ kind: `${key}.mint`, from: a, to: c[key], data: calldata(art, 'mint(address,uint256)', a, v), gas: 120000,
          transfers: [{ token: c[key], standard: 'erc20', operator: null, from: ZERO, to: a, tokenId: null, value: v }],
          credit: () => bal.set(a, (bal.get(a) || 0n) + v) });
      }
    }
    await this.randomTx('factory.deploy', { value: ETHER / 100n });
    await this.mineAndSettle();
  }

  async trafficBlock(first) {
    if (first) {
      // Every run has at least one transaction of types 3 and 4 (when the node supports them).
      if (this.blobTxs) await this.randomTx('blob');
      if (this.eip7702) await this.randomTx('eip7702');
      // ... and one of each kind with internal transactions, created contracts or odd tokens.
      for (const kind of FIRST_BLOCK_KINDS) await this.randomTx(kind);
    } else if (this.rng.chance(this.o.empty)) {
      await this.mineAndSettle();
      return;
    }
    const n = this.rng.int(this.o.minTxs, this.o.maxTxs);
    for (let sent = 0, tries = 0; sent < n && tries < 4 * n; ++tries) {
      if (await this.randomTx()) ++sent;
    }
    await this.mineAndSettle();
  }

  async follow() {
    const selfMining = !this.intervalMining;
    let budget = 0;
    let next = Date.now();
    if (!this.o.out) this.keepRecords = false; // nothing to write: do not grow without bound
    while (!this.stopping) {
      next += this.o.blockMs;
      budget += (this.o.rate * this.o.blockMs) / 1000;
      for (let tries = 0; budget >= 1 && tries < 20; ++tries) {
        if (await this.randomTx()) budget -= 1;
      }
      if (budget > 1) budget = 1; // do not accumulate a backlog
      const wait = next - Date.now();
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
      else next = Date.now();
      if (selfMining) await this.mine();
      await this.settle();
    }
    if (this.pending.length > 0) await this.mineAndSettle();
  }

  manifest(tokens) {
    const st = this.stats;
    return {
      version: 1,
      generator: 'devnet/traffic.js',
      seed: this.o.seed,
      chainId: Number(this.chainId),
      rpc: this.o.rpc,
      firstBlock: this.blocks.first,
      lastBlock: this.blocks.last,
      contracts: this.contracts,
      eip7702Authority: this.authority || null,
      eip7702Unsupported: this.unsupported7702 || null,
      blobSender: this.blobSender || null,
      blobsUnsupported: this.unsupportedBlobs || null,
      counts: {
        blocks: this.blocks.count,
        emptyBlocks: this.blocks.empty,
        transactions: st.txs,
        failed: st.failed,
        byType: st.byType,
        tokenTransfers: st.transfers,
        byStandard: st.byStandard,
        createdContracts: st.created,
        createdVia: st.createdVia,
        destroyedInSameTx: st.destroyedInSameTx,
        internalTransfers: st.internal,
        internalByType: st.internalByType,
        internalReverted: st.internalReverted,
        tracedTransactions: st.traced,
        tokens: tokens.length,
      },
      traceTransactionUnsupported: this.unsupportedParityTraces || null,
      transactions: this.txs,
      tokenTransfers: this.transfers,
      tokens,
      createdContracts: this.created,
      internalTransfers: this.internal,
    };
  }
}

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  const started = Date.now();
  const t = new Traffic(opts);
  const onSignal = () => {
    if (t.stopping) process.exit(130);
    t.stopping = true;
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  try {
    await t.init();
    await t.deploy();
    await t.setup();
    for (let b = 0; b < opts.blocks && !t.stopping; ++b) await t.trafficBlock(b === 0);
    if (opts.follow) await t.follow();
    for (let b = 0; b < opts.pad; ++b) await t.mine();
    await t.settle();
  } finally {
    await t.restore();
  }
  const m = t.manifest(await t.checkTokens());
  if (opts.out) {
    fs.mkdirSync(path.dirname(path.resolve(opts.out)), { recursive: true });
    const tmp = `${opts.out}.tmp`;
    fs.writeFileSync(tmp, JSON.stringify(m, null, 1) + '\n');
    fs.renameSync(tmp, opts.out);
  }
  const types = Object.entries(m.counts.byType).map(([k, v]) => `${k}:${v}`).join(' ');
  const std = Object.entries(m.counts.byStandard).map(([k, v]) => `${k} ${v}`).join(', ');
  console.log(`traffic: chain ${m.chainId} blocks ${m.firstBlock}..${m.lastBlock} (${m.counts.blocks}, ${m.counts.emptyBlocks} empty), ` +
    `${m.counts.transactions} txs (types ${types}; ${m.counts.failed} failed), ${m.counts.tokenTransfers} token transfers (${std}), ` +
    `${m.counts.createdContracts} contracts created, ${m.counts.internalTransfers} internal transfers (${m.counts.tracedTransactions} txs traced) ` +
    `in ${((Date.now() - started) / 1000).toFixed(1)} s${opts.out ? `; manifest ${opts.out}` : ''}`);
}

module.exports = { main, Traffic, Rpc, Rng, encodeArgs, calldata, rlpBytes, rlpUint, rlpList, secpSign, pointMul, SECP_G, word, hex, strip };

if (require.main === module) {
  main().catch((e) => {
    console.error(`traffic.js: ${e.message}`);
    process.exit(1);
  });
}
