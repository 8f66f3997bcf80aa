// What a cached prompt() costs in Node: one fetch, then N calls served from memory.
// `LOADOUT_URL=... LOADOUT_API_KEY=... node bench/prompt.mjs [N]` (build first: npm run build).
// Prints ns per call for the cache hit with tracing off, and with @opentelemetry/api loaded
// but no span recording (what an app with tracing installed and idle pays).

import { Client } from '../dist/index.js';

const N = Number(process.argv[2] ?? 1_000_000);

async function measure(tracing) {
  const client = new Client({ ttl: 3600, tracing });
  await client.prompt('assistant', 'web');
  let last;
  for (let i = 0; i < 10_000; i += 1) last = await client.prompt('assistant', 'web'); // warm up
  const best = [];
  for (let round = 0; round < 5; round += 1) {
    const t0 = process.hrtime.bigint();
    for (let i = 0; i < N; i += 1) last = await client.prompt('assistant', 'web');
    best.push(Number(process.hrtime.bigint() - t0) / N);
  }
  if (last.source !== 'cached') throw new Error(`not a cache hit: ${last.source}`);
  best.sort((a, b) => a - b);
  return best;
}

for (const tracing of [false, true]) {
  const rounds = await measure(tracing);
  const median = rounds[2];
  console.log(`cached prompt(), tracing ${tracing ? 'on (no span recording)' : 'off'}: ` +
    `median ${median.toFixed(0)} ns/call (best ${rounds[0].toFixed(0)}, worst ${rounds[4].toFixed(0)}), ` +
    `${(1e9 / median / 1e6).toFixed(2)} M calls/s, N=${N} x 5 rounds, node ${process.version}`);
}
