#!/usr/bin/env node
// getlogs_floor.js: the fetch half of the contracts mode benchmark's floor (issue 36): the least a
// client must ask a node for to index one contract's events, asked as cheaply as the node allows:
// eth_getLogs of the address over the whole range in one request (falling back to chunks of
// --chunk blocks if the node refuses), then the headers of the blocks holding the logs in batches
// of --batch eth_getBlockByNumber(n, false), every answer parsed. Prints
// "seconds logs blocks" on one line.
//
// Usage: node bench/getlogs_floor.js --rpc URL --address 0x.. --from A --to B [--batch 100]
//          [--chunk 500]
'use strict';

async function main() {
  const a = { rpc: '', address: '', from: 0, to: 0, batch: 100, chunk: 500 };
  const argv = process.argv.slice(2);
  for (let i = 0; i < argv.length; i += 2) a[argv[i].slice(2)] = argv[i + 1];
  const from = Number(a.from);
  const to = Number(a.to);
  const batch = Number(a.batch);
  let id = 1;
  const post = async (body) => {
    const res = await fetch(a.rpc, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    return res.json();
  };
  const getLogs = (f, t) =>
    post({
      jsonrpc: '2.0', id: id++, method: 'eth_getLogs',
      params: [{ fromBlock: `0x${f.toString(16)}`, toBlock: `0x${t.toString(16)}`, address: a.address }],
    });
  const start = process.hrtime.bigint();
  let logs = [];
  const whole = await getLogs(from, to);
  if (whole.error) {
    for (let f = from; f <= to; f += Number(a.chunk)) {
      const t = Math.min(to, f + Number(a.chunk) - 1);
      const part = await getLogs(f, t);
      if (part.error) throw new Error(JSON.stringify(part.error));
      logs = logs.concat(part.result);
    }
  } else {
    logs = whole.result;
  }
  const blocks = [...new Set(logs.map((l) => Number(l.blockNumber)))];
  let headers = 0;
  for (let i = 0; i < blocks.length; i += batch) {
    const calls = blocks.slice(i, i + batch).map((n) => ({
      jsonrpc: '2.0', id: id++, method: 'eth_getBlockByNumber', params: [`0x${n.toString(16)}`, false],
    }));
    const answers = await post(calls);
    for (const x of answers) {
      if (!x.result) throw new Error(`no header: ${JSON.stringify(x)}`);
      headers += 1;
    }
  }
  const seconds = Number(process.hrtime.bigint() - start) / 1e9;
  process.stdout.write(`${seconds.toFixed(3)} ${logs.length} ${headers}\n`);
}

main().catch((e) => {
  process.stderr.write(`getlogs_floor.js: ${e.message}\n`);
  process.exit(1);
});
