'use strict';
const { test } = require('node:test');
const assert = require('node:assert/strict');
const { performance } = require('perf_hooks');
const { DeadlineTimer } = require('../lib/timers');

// Busy for a while inside one loop iteration, so the loop's cached clock falls behind.
function armAfterBusyWork(arm) {
  return new Promise((resolve) => {
    setImmediate(() => {
      const busyUntil = performance.now() + 40;
      while (performance.now() < busyUntil);
      const armedAt = performance.now();
      arm(() => resolve(performance.now() - armedAt));
    });
  });
}

test('DeadlineTimer never fires before its delay, even when armed late in an iteration', async () => {
  const elapsed = await armAfterBusyWork((done) => new DeadlineTimer(done, 30));
  assert.ok(elapsed >= 30, `fired after ${elapsed.toFixed(1)} ms`);
});

test('DeadlineTimer never fires early over many arming moments', async () => {
  const runs = Array.from({ length: 40 }, (_, i) =>
    new Promise((resolve) => {
      setTimeout(() => {
        const armedAt = performance.now();
        new DeadlineTimer(() => resolve(performance.now() - armedAt), 20);
      }, i * 0.37);
    }));
  const earliest = Math.min(...(await Promise.all(runs)));
  assert.ok(earliest >= 20, `earliest fired after ${earliest.toFixed(2)} ms`);
});

test('DeadlineTimer passes its arguments and can be cancelled', async () => {
  const got = await new Promise((resolve) => new DeadlineTimer(resolve, 5, 'payload'));
  assert.equal(got, 'payload');
  let fired = false;
  new DeadlineTimer(() => (fired = true), 5).cancel();
  await new Promise((resolve) => setTimeout(resolve, 30));
  assert.equal(fired, false);
});
