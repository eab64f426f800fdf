// graphile-worker draining N jobs, each an HTTP POST to the benchmark's receiver: the peer
// the engine benchmark's side-by-side scenario (host/benches/engine.rs) measures taskexec
// against, on the same PostgreSQL and the same receiver.
//
//   DATABASE_URL=postgres://… RECEIVER_URL=http://127.0.0.1:PORT/hook N=20000 CONCURRENCY=24 TUNED=0|1 node bench.mjs
//
// The jobs are added before the clock starts (as taskexec's are created before its worker
// starts); the clock stops when the last job's completion is written (its row deleted).
// TUNED=1 is graphile-worker's advice for throughput: a local queue of 500 and no batching
// delay. Prints one JSON line.

import { execSync } from "node:child_process";
import { makeWorkerUtils, run } from "graphile-worker";

const env = process.env;
const n = Number(env.N ?? 20000);
const concurrency = Number(env.CONCURRENCY ?? 24);
const tuned = env.TUNED === "1";
const connectionString = env.DATABASE_URL;
const receiver = env.RECEIVER_URL;

const utils = await makeWorkerUtils({ connectionString });
await utils.migrate();
for (let from = 0; from < n; from += 1000) {
  const specs = [];
  for (let i = from; i < Math.min(n, from + 1000); i++) {
    specs.push({ identifier: "post", payload: { n: i } });
  }
  await utils.addJobs(specs);
}
// Whether any job is left, by the primary key: a COUNT(*) every 20 ms read every dead row
// the drain left behind (a share of the two cores taken from graphile-worker itself).
const remaining = async () =>
  utils.withPgClient(async (client) => {
    const { rows } = await client.query("SELECT id FROM graphile_worker._private_jobs ORDER BY id LIMIT 1");
    return rows.length;
  });

const worker = { connectionString, concurrentJobs: concurrency, maxPoolSize: concurrency + 2 };
if (tuned) {
  Object.assign(worker, { localQueue: { size: 500 }, completeJobBatchDelay: 0, failJobBatchDelay: 0 });
}
// The kernel's dirty pages written out before the clock starts, as for taskexec (engine.rs,
// `settle`).
execSync("sync");
const started = performance.now();
const runner = await run({
  noHandleSignals: true,
  preset: { worker },
  taskList: {
    post: async (payload) => {
      const answer = await fetch(receiver, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(payload),
      });
      await answer.arrayBuffer();
      if (!answer.ok) throw new Error(`HTTP ${answer.status}`);
    },
  },
});
while ((await remaining()) > 0) {
  await new Promise((resolve) => setTimeout(resolve, 20));
}
const seconds = (performance.now() - started) / 1000;
await runner.stop();
await utils.release();
console.log(JSON.stringify({ jobs: n, seconds: Math.round(seconds * 100) / 100, jobs_per_second: Math.round(n / seconds), concurrency, tuned }));
