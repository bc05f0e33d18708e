#!/usr/bin/env node
// contracts_chain.js: the peer comparison chain for the contracts mode's benchmark (issue 36):
// --blocks blocks, each holding one DevToken20.transferMany of --per-block transfers (so about
// blocks x per-block ERC-20 Transfer logs), on a node with unlocked dev accounts (anvil). Writes
// into --dir: abis/ERC20.json (the Transfer event), transfers.yaml (a contracts config: the token,
// its Transfer event only, name: bench) and manifest.json (token address, first and last block,
// transfers). Prints one line.
//
// Usage: node bench/contracts_chain.js --rpc URL --dir DIR [--blocks 2000] [--per-block 50]
'use strict';

const fs = require('fs');
const path = require('path');
const { encodeFunctionData, encodeDeployData, toHex } = require('viem');
const { ensureBuilt } = require('../devnet/compile.js');

async function main() {
  const args = { rpc: '', dir: '', blocks: 2000, perBlock: 50 };
  const argv = process.argv.slice(2);
  for (let i = 0; i < argv.length; i += 2) {
    const [k, v] = [argv[i], argv[i + 1]];
    if (k === '--rpc') args.rpc = v;
    else if (k === '--dir') args.dir = v;
    else if (k === '--blocks') args.blocks = Number(v);
    else if (k === '--per-block') args.perBlock = Number(v);
    else throw new Error(`unknown option ${k}`);
  }
  if (!args.rpc || !args.dir) throw new Error('usage: --rpc URL --dir DIR');
  ensureBuilt({ quiet: true });
  const token = JSON.parse(
    fs.readFileSync(path.join(__dirname, '..', 'devnet', 'build', 'DevToken20.json'), 'utf8'),
  );
  let id = 1;
  const rpc = async (method, params) => {
    const res = await fetch(args.rpc, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ jsonrpc: '2.0', id: id++, method, params }),
    });
    const body = await res.json();
    if (body.error) throw new Error(`${method}: ${JSON.stringify(body.error)}`);
    return body.result;
  };
  const accounts = await rpc('eth_accounts', []);
  const from = accounts[0];
  const receiptOf = async (hash) => {
    for (let i = 0; i < 200; ++i) {
      const r = await rpc('eth_getTransactionReceipt', [hash]);
      if (r) return r;
      await new Promise((ok) => setTimeout(ok, 25));
    }
    return null;
  };
  const send = async (tx) => {
    const hash = await rpc('eth_sendTransaction', [{ from, gas: toHex(15_000_000), ...tx }]);
    const receipt = await receiptOf(hash);
    if (!receipt || receipt.status !== '0x1') throw new Error(`failed: ${hash}`);
    return receipt;
  };
  const deployed = await send({
    data: encodeDeployData({ abi: token.abi, bytecode: token.bytecode, args: [] }),
  });
  const address = deployed.contractAddress.toLowerCase();
  const first = Number(deployed.blockNumber);
  await send({
    to: address,
    data: encodeFunctionData({ abi: token.abi, functionName: 'mint', args: [from, 10n ** 30n] }),
  });
  const recipients = Array.from({ length: args.perBlock }, (_, i) => accounts[1 + (i % 9)]);
  const values = Array.from({ length: args.perBlock }, (_, i) => BigInt(i + 1));
  const data = encodeFunctionData({
    abi: token.abi,
    functionName: 'transferMany',
    args: [recipients, values],
  });
  // One transferMany a block: automine off, each transaction sealed by its own evm_mine.
  await rpc('evm_setAutomine', [false]);
  for (let b = 0; b < args.blocks; ++b) {
    await rpc('eth_sendTransaction', [{ from, to: address, data, gas: toHex(15_000_000) }]);
    await rpc('evm_mine', []);
  }
  await rpc('evm_setAutomine', [true]);
  // The deployment, the mint, then one block per transferMany.
  const want = first + 1 + args.blocks;
  let lastBlock = Number(await rpc('eth_blockNumber', []));
  for (let i = 0; i < 400 && lastBlock < want; ++i) {
    await new Promise((ok) => setTimeout(ok, 25));
    lastBlock = Number(await rpc('eth_blockNumber', []));
  }
  if (lastBlock < want) throw new Error(`only ${lastBlock - first - 1} blocks mined`);
  fs.mkdirSync(path.join(args.dir, 'abis'), { recursive: true });
  fs.writeFileSync(
    path.join(args.dir, 'abis', 'ERC20.json'),
    JSON.stringify(token.abi.filter((x) => x.type === 'event' && x.name === 'Transfer')),
  );
  fs.writeFileSync(
    path.join(args.dir, 'transfers.yaml'),
    `name: bench\ncontracts:\n  - name: token\n    abi: abis/ERC20.json\n` +
      `    address: "${address}"\n    events: [Transfer]\n`,
  );
  const transfers = args.blocks * args.perBlock + 1;
  fs.writeFileSync(
    path.join(args.dir, 'manifest.json'),
    JSON.stringify({ token: address, first, last: lastBlock, transfers }),
  );
  process.stdout.write(
    `contracts_chain.js: blocks ${first}..${lastBlock}, ${transfers} transfers of ${address}\n`,
  );
}

main().catch((e) => {
  process.stderr.write(`contracts_chain.js: ${e.message}\n`);
  process.exit(1);
});
