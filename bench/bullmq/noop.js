#!/usr/bin/env node
// noop.js: the baseline of bench/coord_bench. BullMQ processes --jobs no-op jobs with a Worker of
// --concurrency on the Redis at --redis; prints one JSON line {"jobs", "seconds", "jobs_per_s"}.
// The jobs are added (addBulk) before the clock starts; the clock stops when the last completes.
// Usage: node bench/bullmq/noop.js --redis redis://127.0.0.1:56379 --jobs 20000 --concurrency 8
'use strict';
const { Queue, Worker } = require('bullmq');
const IORedis = require('ioredis');

function arg(name, fallback) {
  const i = process.argv.indexOf('--' + name);
  return i > 0 ? process.argv[i + 1] : fallback;
}

async function main() {
  const url = arg('redis', 'redis://127.0.0.1:56379');
  const jobs = Number(arg('jobs', '20000'));
  const concurrency = Number(arg('concurrency', '8'));
  const name = 'gapless-bench-' + process.pid;
  const connection = new IORedis(url, { maxRetriesPerRequest: null });
  const queue = new Queue(name, { connection });
  for (let i = 0; i < jobs; i += 1000) {
    const batch = [];
    for (let j = i; j < Math.min(jobs, i + 1000); j++) {
      batch.push({ name: 'noop', data: { i: j }, opts: { removeOnComplete: true } });
    }
    await queue.addBulk(batch);
  }
  let done = 0;
  let finish;
  const finished = new Promise((resolve) => (finish = resolve));
  const start = process.hrtime.bigint();
  const worker = new Worker(name, async () => {}, {
    connection: new IORedis(url, { maxRetriesPerRequest: null }),
    concurrency,
  });
  worker.on('completed', () => {
    if (++done === jobs) finish();
  });
  await finished;
  const seconds = Number(process.hrtime.bigint() - start) / 1e9;
  await worker.close();
  await queue.obliterate({ force: true });
  await queue.close();
  await connection.quit();
  console.log(JSON.stringify({ jobs, seconds, jobs_per_s: jobs / seconds }));
  process.exit(0);
}

main().catch((e) => {
  console.error('noop.js:', e.message);
  process.exit(1);
});
