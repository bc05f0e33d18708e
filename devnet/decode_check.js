#!/usr/bin/env node
// decode_check.js: an independent reading of the contracts mode's tables (issue 36). Decodes the
// logs of the contracts events.js deployed with viem's ABI decoder, straight from the node
// (eth_getLogs), and compares every row with a dump of gapless's decoded tables (--dump, written
// by the test from PostgreSQL): the same rows, the same values, the same logs listed as undecoded.
//
// The reading it expects, as docs/contracts.md states it: integers as decimal text, addresses,
// bytes and the topic hashes of indexed strings, bytes, arrays and tuples as 0x-hex, bools as
// booleans, strings as text, or null (and the log listed as undecoded) when they are not UTF-8 or
// hold a NUL byte; arrays and tuples as JSON with integers of 48 bits or fewer as numbers, wider
// ones as decimal strings, tuples as objects keyed by member name (arg{i} when unnamed). A log
// whose topic count or data does not fit the event is undecoded. An anonymous event takes a log
// of its contract with its topic count that no event's topic 0 claims.
//
// The dump: {"tables": [{"contract", "signature", "rows": [{"block", "log", "values": [...]}]}],
//            "undecoded": [{"block", "log", "contract", "signature"}]}
// Prints one line and exits 0 when everything is equal; lists the differences and exits 1.
//
// Usage: node devnet/decode_check.js --rpc URL --dir DIR --dump FILE [--to BLOCK] [--only a,b]
'use strict';

const fs = require('fs');
const path = require('path');
const { decodeAbiParameters, keccak256, toBytes } = require('viem');

function parseArgs(argv) {
  const out = { rpc: '', dir: '', dump: '', to: null };
  for (let i = 0; i < argv.length; ++i) {
    const a = argv[i];
    const next = () => argv[++i];
    if (a === '--rpc') out.rpc = next();
    else if (a === '--dir') out.dir = next();
    else if (a === '--dump') out.dump = next();
    else if (a === '--to') out.to = Number(next());
    else if (a === '--only') out.only = next().split(',');
    else throw new Error(`unknown option ${a}`);
  }
  if (!out.rpc || !out.dir || !out.dump) throw new Error('usage: --rpc URL --dir DIR --dump FILE');
  return out;
}

async function rpc(url, method, params) {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
  });
  const body = await res.json();
  if (body.error) throw new Error(`${method}: ${JSON.stringify(body.error)}`);
  return body.result;
}

function canonicalType(p) {
  const m = p.type.match(/^tuple(.*)$/);
  if (m) return `(${p.components.map(canonicalType).join(',')})${m[1]}`;
  if (p.type === 'uint') return 'uint256';
  if (p.type === 'int') return 'int256';
  return p.type;
}
const signature = (ev) => `${ev.name}(${ev.inputs.map(canonicalType).join(',')})`;

// The type with every string read as bytes (same encoding), so invalid UTF-8 stays visible.
function asBytes(p) {
  const out = { ...p, type: p.type.replace(/^string/, 'bytes') };
  if (p.components) out.components = p.components.map(asBytes);
  return out;
}

const utf8 = new TextDecoder('utf-8', { fatal: true });
class Unstorable extends Error {}
function text(hex) {
  const bytes = Buffer.from(hex.slice(2), 'hex');
  if (bytes.includes(0)) throw new Unstorable();
  try {
    return utf8.decode(bytes);
  } catch {
    throw new Unstorable();
  }
}

const isDynamicIndexed = (p) =>
  p.type === 'string' || p.type === 'bytes' || p.type.endsWith(']') || p.type.startsWith('tuple');
const intBits = (type) => {
  const m = type.match(/^u?int(\d*)$/);
  return m ? Number(m[1] || 256) : null;
};

// A value inside JSON (arrays and tuples).
function json(p, v) {
  const arr = p.type.match(/^(.*)\[(\d*)\]$/);
  if (arr) return v.map((x) => json({ ...p, type: arr[1] }, x));
  if (p.type === 'tuple') {
    const o = {};
    // viem gives a tuple with named members as an object, otherwise as an array.
    p.components.forEach((c, i) => {
      o[c.name || `arg${i}`] = json(c, Array.isArray(v) ? v[i] : v[c.name]);
    });
    return o;
  }
  const bits = intBits(p.type);
  if (bits !== null) return bits <= 48 ? Number(v) : v.toString();
  if (p.type === 'address') return v.toLowerCase();
  if (p.type === 'bool') return v;
  if (p.type === 'string') return text(v);
  return v.toLowerCase(); // bytes, bytesN (hex)
}

// A column's value.
function column(p, v) {
  if (p.type.endsWith(']') || p.type === 'tuple') return json(p, v);
  if (intBits(p.type) !== null) return v.toString();
  if (p.type === 'address') return v.toLowerCase();
  if (p.type === 'bool') return v;
  if (p.type === 'string') return text(v);
  return v.toLowerCase();
}

// Decodes one log: { values, unstorable } or throws (does not fit).
function decode(ev, log) {
  const topics = ev.anonymous ? log.topics : log.topics.slice(1);
  const indexed = ev.inputs.filter((p) => p.indexed);
  if (topics.length !== indexed.length) throw new Error('topic count');
  const plain = ev.inputs.filter((p) => !p.indexed);
  const data = decodeAbiParameters(plain.map(asBytes), log.data);
  let ti = 0;
  let di = 0;
  let unstorable = false;
  const values = ev.inputs.map((p) => {
    if (p.indexed) {
      const topic = topics[ti++];
      if (isDynamicIndexed(p)) return topic.toLowerCase();
      return column(p, decodeAbiParameters([p], topic)[0]);
    }
    try {
      return column(p, data[di++]);
    } catch (e) {
      if (!(e instanceof Unstorable)) throw e;
      unstorable = true;
      return null;
    }
  });
  return { values, unstorable };
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const manifest = JSON.parse(fs.readFileSync(path.join(args.dir, 'manifest.json'), 'utf8'));
  const abi = (name) =>
    JSON.parse(fs.readFileSync(path.join(args.dir, 'abis', `${name}.json`), 'utf8')).filter(
      (x) => x.type === 'event',
    );
  const contracts = [
    { name: 'events', events: abi('DevEvents'), addresses: [manifest.contracts.events] },
    { name: 'pools', events: abi('DevPool'), addresses: manifest.pools },
    { name: 'PoolFactory', events: abi('DevPoolFactory'), addresses: [manifest.contracts.factory] },
    { name: 'odd_token', events: abi('ERC20'), addresses: [manifest.contracts.token] },
  ];
  // --only: the contracts the config under test names (the others have no tables).
  if (args.only) contracts.splice(0, contracts.length, ...contracts.filter((c) => args.only.includes(c.name)));
  const to = args.to ?? manifest.last;
  const logs = await rpc(args.rpc, 'eth_getLogs', [
    { fromBlock: '0x0', toBlock: `0x${to.toString(16)}`,
      address: contracts.flatMap((c) => c.addresses) },
  ]);
  const expected = new Map(); // "contract|signature" -> rows
  const undecoded = [];
  for (const log of logs) {
    const address = log.address.toLowerCase();
    const block = Number(log.blockNumber);
    const index = Number(log.logIndex);
    for (const c of contracts) {
      if (!c.addresses.includes(address)) continue;
      const named = c.events.filter((e) => !e.anonymous);
      const claimed = named.filter(
        (e) => log.topics.length > 0 && keccak256(toBytes(signature(e))) === log.topics[0],
      );
      const candidates = claimed.length > 0 ? claimed
        : c.events.filter((e) => e.anonymous && e.inputs.filter((p) => p.indexed).length === log.topics.length);
      let fitted = false;
      for (const ev of candidates) {
        const key = `${c.name}|${signature(ev)}`;
        try {
          const { values, unstorable } = decode(ev, log);
          if (!expected.has(key)) expected.set(key, []);
          expected.get(key).push({ block, log: index, values });
          if (unstorable) undecoded.push({ block, log: index, contract: c.name, signature: signature(ev) });
          fitted = true;
          if (ev.anonymous) break;
        } catch (e) {
          if (process.env.DECODE_CHECK_VERBOSE) process.stderr.write(`${signature(ev)}: ${e.message}\n`);
          if (!ev.anonymous) undecoded.push({ block, log: index, contract: c.name, signature: signature(ev) });
        }
      }
      if (!fitted && claimed.length === 0 && candidates.length > 0) {
        undecoded.push({ block, log: index, contract: c.name, signature: signature(candidates[0]) });
      }
    }
  }

  const dump = JSON.parse(fs.readFileSync(args.dump, 'utf8'));
  const problems = [];
  const same = (a, b) => JSON.stringify(sortKeys(a)) === JSON.stringify(sortKeys(b));
  let rows = 0;
  const seen = new Set();
  for (const t of dump.tables) {
    const key = `${t.contract}|${t.signature}`;
    seen.add(key);
    const want = (expected.get(key) || []).sort((a, b) => a.block - b.block || a.log - b.log);
    const got = (t.rows || []).sort((a, b) => a.block - b.block || a.log - b.log);
    if (want.length !== got.length) {
      problems.push(`${key}: ${got.length} rows, the node's logs give ${want.length}`);
    }
    for (let i = 0; i < Math.min(want.length, got.length); ++i) {
      rows += 1;
      if (!same(want[i], got[i])) {
        problems.push(`${key} block ${got[i].block} log ${got[i].log}: got ${JSON.stringify(got[i].values)}, want ${JSON.stringify(want[i].values)}`);
      }
    }
  }
  for (const key of expected.keys()) {
    if (!seen.has(key)) problems.push(`${key}: no table in the dump, ${expected.get(key).length} logs`);
  }
  const order = (a, b) => a.block - b.block || a.log - b.log || a.signature.localeCompare(b.signature);
  const wantUndecoded = undecoded.sort(order);
  const gotUndecoded = (dump.undecoded || []).sort(order);
  if (!same(wantUndecoded, gotUndecoded)) {
    problems.push(`undecoded: got ${JSON.stringify(gotUndecoded)}, want ${JSON.stringify(wantUndecoded)}`);
  }
  if (problems.length > 0) {
    for (const p of problems.slice(0, 40)) process.stdout.write(`${p}\n`);
    process.stdout.write(`decode_check: ${problems.length} difference(s)\n`);
    process.exit(1);
  }
  process.stdout.write(
    `decode_check: ${rows} rows in ${dump.tables.length} tables and ${gotUndecoded.length} ` +
      `undecoded logs equal viem's reading of ${logs.length} logs\n`,
  );
}

function sortKeys(v) {
  if (Array.isArray(v)) return v.map(sortKeys);
  if (v && typeof v === 'object') {
    const o = {};
    for (const k of Object.keys(v).sort()) o[k] = sortKeys(v[k]);
    return o;
  }
  return v;
}

main().catch((e) => {
  process.stderr.write(`decode_check: ${e.stack || e.message}\n`);
  process.exit(2);
});
