// ioredis against `epochdb serve`, as an application would use it.
//
// Usage: node ioredis_check.js PORT PASSWORD
//
// Run by scripts/client-libraries.sh, which installs ioredis and starts the
// server with --requirepass PASSWORD. Exits non-zero at the first check that
// fails, naming it.
const Redis = require("ioredis");
const assert = require("node:assert/strict");

const port = Number(process.argv[2]);
const password = process.argv[3];
const connect = (opts = {}) => new Redis({ port, password, maxRetriesPerRequest: 1, ...opts });

async function main() {
  const r = connect();
  await r.flushall();

  // Without the password, commands are refused.
  const anon = new Redis({ port, maxRetriesPerRequest: 1, lazyConnect: true });
  anon.on("error", () => {});
  await assert.rejects(anon.get("a"), /NOAUTH/, "a client without the password was served");
  anon.disconnect();

  assert.equal(await r.set("a", "1", "EX", 100), "OK", "SET EX");
  assert.equal(await r.ttl("a"), 100, "TTL");
  assert.equal(await r.incrby("n", 5), 5, "INCRBY");
  assert.deepEqual(await r.mget("a", "n", "none"), ["1", "5", null], "MGET");
  assert.equal(await r.hset("h", { a: 1, b: 2 }), 2, "HSET");
  assert.deepEqual(await r.hgetall("h"), { a: "1", b: "2" }, "HGETALL");
  await assert.rejects(r.hget("a", "f"), /WRONGTYPE/, "HGET on a string");

  // A pipeline, then MULTI/EXEC.
  const p = r.pipeline();
  for (let i = 0; i < 500; i++) p.set(`scan:${String(i).padStart(3, "0")}`, i);
  assert.equal((await p.exec()).filter(([err, ok]) => !err && ok === "OK").length, 500, "pipeline");
  assert.deepEqual(await r.multi().set("t", "v").incr("n").get("t").exec(), [[null, "OK"], [null, 6], [null, "v"]], "MULTI");

  // SCAN through the library's stream.
  const keys = [];
  for await (const batch of r.scanStream({ match: "scan:*", count: 40 })) keys.push(...batch);
  assert.equal(new Set(keys).size, 500, "scanStream");

  // WATCH under contention, retried on a null EXEC: every increment once.
  await r.set("counter", 0);
  const add = async (times) => {
    const c = connect();
    for (let i = 0; i < times; ) {
      await c.watch("counter");
      const v = Number(await c.get("counter"));
      if ((await c.multi().set("counter", v + 1).exec()) !== null) i++;
    }
    c.disconnect();
  };
  await Promise.all([add(150), add(150), add(150), add(150)]);
  assert.equal(await r.get("counter"), "600", "WATCH/MULTI counter under 4 clients");

  // A numbered database.
  const d2 = connect({ db: 2 });
  assert.equal(await d2.set("in2", "1"), "OK", "SET in db 2");
  assert.equal(await r.get("in2"), null, "GET in db 0");
  d2.disconnect();
  r.disconnect();
  console.log(`ioredis ${require("ioredis/package.json").version}: ok`);
}

main().catch((e) => {
  console.error(`ioredis: ${e.message}`);
  process.exit(1);
});
