#!/usr/bin/env node
// events.js: a devnet workload for the contracts mode (issue 36): deploys DevEvents,
// DevPoolFactory (which makes DevPool children) and DevIndexedValueToken (contracts/DevEvents.sol),
// sends --rounds rounds of calls that emit every kind of event those contracts have, a few logs
// that do not fit their ABI (a truncated data part, a topic too many) and swaps in every pool, a
// few transactions per block, and writes into --dir:
//   abis/<Contract>.json   each contract's ABI, and ERC20.json (the standard Transfer event)
//   contracts.yaml         a contracts config naming them all (name: zoo), the pools through
//                          their factory
//   contracts-by-address.yaml  the same with the pools' addresses listed instead
//   manifest.json          addresses, the first and last block, the block of the last pool's
//                          creation, and counts of what was sent
// Talks to a node with unlocked dev accounts (anvil); calls are encoded with viem. The same
// --seed on a fresh node sends the same transactions.
//
// Usage: node devnet/events.js --rpc URL --dir DIR [--rounds N] [--seed S] [--pools N]
'use strict';

const fs = require('fs');
const path = require('path');
const { encodeFunctionData, encodeDeployData, toHex, keccak256, toBytes } = require('viem');
const { ensureBuilt } = require('./compile.js');

function parseArgs(argv) {
  const out = { rpc: '', dir: '', rounds: 20, seed: 1, pools: 3 };
  for (let i = 0; i < argv.length; ++i) {
    const a = argv[i];
    const next = () => {
      if (i + 1 >= argv.length) throw new Error(`${a} needs a value`);
      return argv[++i];
    };
    if (a === '--rpc') out.rpc = next();
    else if (a === '--dir') out.dir = next();
    else if (a === '--rounds') out.rounds = Number(next());
    else if (a === '--seed') out.seed = Number(next());
    else if (a === '--pools') out.pools = Number(next());
    else throw new Error(`unknown option ${a}`);
  }
  if (!out.rpc || !out.dir) throw new Error('usage: events.js --rpc URL --dir DIR [--rounds N]');
  return out;
}

let nextId = 1;
async function rpc(url, method, params) {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ jsonrpc: '2.0', id: nextId++, method, params }),
  });
  const body = await res.json();
  if (body.error) throw new Error(`${method}: ${JSON.stringify(body.error)}`);
  return body.result;
}

// A small deterministic generator (mulberry32), so a seed gives the same calls.
function rng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const ERC20_TRANSFER_ABI = [
  {
    type: 'event',
    name: 'Transfer',
    anonymous: false,
    inputs: [
      { name: 'from', type: 'address', indexed: true },
      { name: 'to', type: 'address', indexed: true },
      { name: 'value', type: 'uint256', indexed: false },
    ],
  },
];

async function main() {
  const args = parseArgs(process.argv.slice(2));
  ensureBuilt({ quiet: true });
  const build = (name) =>
    JSON.parse(fs.readFileSync(path.join(__dirname, 'build', `${name}.json`), 'utf8'));
  const events = build('DevEvents');
  const pool = build('DevPool');
  const factory = build('DevPoolFactory');
  const token = build('DevIndexedValueToken');
  const url = args.rpc;
  const [from, other] = await rpc(url, 'eth_accounts', []);
  const rand = rng(args.seed);
  const big = (bits) => {
    let v = 0n;
    for (let i = 0; i < bits; i += 16) v = (v << 16n) | BigInt(Math.floor(rand() * 65536));
    return v & ((1n << BigInt(bits)) - 1n);
  };
  const signed = (bits) => {
    const v = big(bits);
    return v >= 1n << BigInt(bits - 1) ? v - (1n << BigInt(bits)) : v;
  };

  const counts = { transactions: 0, blocks: 0, misfits: 0 };
  const pending = [];
  // At most 50 transactions a block (of 1,000,000 gas at most each): a round over many pools
  // spans several blocks.
  const send = async (to, data) => {
    if (pending.length >= 50) await mine();
    const hash = await rpc(url, 'eth_sendTransaction', [{ from, to, data, gas: toHex(1_000_000) }]);
    pending.push(hash);
    return hash;
  };
  const mine = async () => {
    counts.transactions += pending.length;
    counts.blocks += 1;
    await rpc(url, 'evm_mine', []);
    const receipts = await Promise.all(
      pending.map((h) => rpc(url, 'eth_getTransactionReceipt', [h])),
    );
    pending.length = 0;
    for (const r of receipts) {
      if (!r || r.status !== '0x1') throw new Error(`transaction failed: ${JSON.stringify(r)}`);
    }
    return receipts;
  };
  const deploy = async (artifact, abiArgs) => {
    const data = encodeDeployData({ abi: artifact.abi, bytecode: artifact.bytecode, args: abiArgs });
    const hash = await rpc(url, 'eth_sendTransaction', [{ from, data, gas: toHex(5_000_000) }]);
    pending.push(hash);
    const [receipt] = await mine();
    return receipt.contractAddress.toLowerCase();
  };

  await rpc(url, 'evm_setAutomine', [false]);
  const first = Number(await rpc(url, 'eth_blockNumber', [])) + 1;
  const addr = {
    events: await deploy(events, []),
    factory: await deploy(factory, []),
    token: await deploy(token, []),
  };
  const call = (artifact, to, fn, fnArgs) =>
    send(to, encodeFunctionData({ abi: artifact.abi, functionName: fn, args: fnArgs }));

  // The pools: made by the factory, one per block, so their creation blocks differ.
  const pools = [];
  for (let i = 0; i < args.pools; ++i) {
    await call(factory, addr.factory, 'create', [other]);
    const [receipt] = await mine();
    const created = receipt.logs.find((l) => l.address.toLowerCase() === addr.factory);
    pools.push(`0x${created.data.slice(2 + 24, 2 + 64)}`.toLowerCase());
  }
  const poolsCreatedBy = Number(await rpc(url, 'eth_blockNumber', []));

  const oddStrings = ['0xff00fe', '0x68656c6c6f00776f726c64', '0xc328'];
  const intsTopic = keccak256(
    toBytes('Ints(int256,int24,uint160,uint8,int64,uint64,int128,uint256,uint48,int8)'),
  );
  const overloadedTopic = keccak256(toBytes('Overloaded(uint256)'));
  for (let round = 0; round < args.rounds; ++round) {
    const e = (fn, fnArgs) => call(events, addr.events, fn, fnArgs);
    await e('emitInts', [
      signed(256), Number(signed(24)), big(160), Number(big(8)), signed(64), big(64), signed(128),
      big(256), Number(big(48)), Number(signed(8)),
    ]);
    // The extremes too, every few rounds.
    if (round % 5 === 0) {
      await e('emitInts', [
        -(1n << 255n), -(1 << 23), (1n << 160n) - 1n, 255, -(1n << 63n), (1n << 64n) - 1n,
        -(1n << 127n), (1n << 256n) - 1n, 2 ** 48 - 1, -128,
      ]);
    }
    await e('emitBytes', [
      toHex(big(8), { size: 1 }), toHex(big(256), { size: 32 }),
      toHex(big(8 * (round % 70)), { size: round % 70 }), other, round % 2 === 0,
      toHex(big(32), { size: 4 }),
    ]);
    const raw = round % 4 === 0 ? oddStrings[(round / 4) % oddStrings.length]
                                : toHex(`round ${round}: ünïcødé\ttab\\slash "q"`);
    await e('emitStrings', [raw, `topic ${round}`, toHex(big(256), { size: 32 })]);
    await e('emitArrays', [
      Array.from({ length: round % 4 }, () => big(256)),
      [other, from, addr.events],
      Array.from({ length: round % 3 }, (_, i) => `w${i}${round % 4 === 1 ? '\u0000' : ''}`),
      Array.from({ length: round % 3 }, () => [big(64), big(256)]),
      Array.from({ length: (round % 5) + 1 }, () => Number(signed(16))),
    ]);
    await e('emitTuples', [signed(200), Number(big(7)), `tuple ${round}`, big(32)]);
    await e('emitIndexedArray', [[big(32), big(32)]]);
    await e('emitAnon', [big(64)]);
    await e('emitOverloaded', [big(128)]);
    await e('emitUnnamed', [big(16)]);
    await call(token, addr.token, 'transfer', [other, big(64)]);
    for (const p of pools) {
      await call(pool, p, 'swap', [signed(100), signed(100), Number(signed(24))]);
      if (round % 3 === 0) await call(pool, p, 'mint', [big(128)]);
    }
    if (round % 4 === 2) {
      // Logs that do not fit their ABI: Ints with a truncated data part; Overloaded(uint256)
      // with a topic too many.
      await e('emitRaw', [[intsTopic, toHex(big(256), { size: 32 })], toHex(big(64 * 8), { size: 64 })]);
      await e('emitRaw', [[overloadedTopic, toHex(big(256), { size: 32 })], toHex(big(256), { size: 32 })]);
      counts.misfits += 2;
    }
    await mine();
  }
  const last = Number(await rpc(url, 'eth_blockNumber', []));
  await rpc(url, 'evm_setAutomine', [true]);

  fs.mkdirSync(path.join(args.dir, 'abis'), { recursive: true });
  const writeAbi = (name, abi) =>
    fs.writeFileSync(path.join(args.dir, 'abis', `${name}.json`), JSON.stringify(abi, null, 1));
  writeAbi('DevEvents', events.abi);
  writeAbi('DevPool', pool.abi);
  writeAbi('DevPoolFactory', factory.abi);
  writeAbi('ERC20', ERC20_TRANSFER_ABI);
  const config = (poolsEntry) =>
    `# Written by devnet/events.js: the contracts of contracts/DevEvents.sol.\n` +
    `name: zoo\n` +
    `contracts:\n` +
    `  - name: events\n    abi: abis/DevEvents.json\n    address: "${addr.events}"\n` +
    `  - name: pools\n    abi: abis/DevPool.json\n` + poolsEntry +
    `  - name: PoolFactory\n    abi: abis/DevPoolFactory.json\n    address: "${addr.factory}"\n` +
    `  - name: odd_token\n    abi: abis/ERC20.json\n    address: "${addr.token}"\n` +
    `    events: [Transfer]\n`;
  fs.writeFileSync(
    path.join(args.dir, 'contracts.yaml'),
    config(`    factory: {address: "${addr.factory}", event: PoolCreated, parameter: pool, ` +
           `abi: abis/DevPoolFactory.json}\n`),
  );
  fs.writeFileSync(
    path.join(args.dir, 'contracts-by-address.yaml'),
    config(`    address: [${pools.map((p) => `"${p}"`).join(', ')}]\n`),
  );
  const manifest = { rpc: url, first, last, contracts: addr, pools, poolsCreatedBy, counts };
  fs.writeFileSync(path.join(args.dir, 'manifest.json'), JSON.stringify(manifest, null, 1));
  process.stdout.write(
    `events.js: blocks ${first}..${last}, ${counts.transactions} transactions, ` +
      `${pools.length} pools, ${counts.misfits} misfit logs\n`,
  );
}

main().catch((e) => {
  process.stderr.write(`events.js: ${e.message}\n`);
  process.exit(1);
});
