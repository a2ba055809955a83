'use strict';
// Runtime signals for serverlab's side file (--signals-file): Node's own figures, written
// as JSON lines, one object per sample, so that a GC pause or a late event loop can be laid
// over the load's timeline without asking this server over HTTP (a blocked loop could not
// answer). GC pauses come from perf_hooks 'gc' entries, the loop's delay from
// monitorEventLoopDelay, the heap from v8.getHeapStatistics.

const fs = require('fs');
const v8 = require('v8');
const { PerformanceObserver, monitorEventLoopDelay, performance } = require('perf_hooks');

const INTERVAL_MS = 100;
// monitorEventLoopDelay samples with a timer of this period and records the whole time
// between two of its firings, so an idle loop reads about this much: it is taken off.
const RESOLUTION_MS = 10;
const GC_KINDS = { 1: 'scavenge', 2: 'mark_sweep_compact', 4: 'incremental', 8: 'weak_callbacks' };

const unixSeconds = (msSinceOrigin) => (performance.timeOrigin + msSinceOrigin) / 1000;
const round = (x, digits = 3) => Number(x.toFixed(digits));

// Starts writing to `path` in the background; returns a function that stops and flushes.
function startSignals(path) {
  const fd = fs.openSync(path, 'a');
  const pending = [];
  const pid = process.pid;
  const gcObserver = new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) {
      const kind = entry.detail ? entry.detail.kind : entry.kind;
      pending.push({
        t: round(unixSeconds(entry.startTime), 4),
        kind: 'gc_pause',
        value: round(entry.duration),
        gc: GC_KINDS[kind] || String(kind),
        pid,
      });
    }
  });
  gcObserver.observe({ entryTypes: ['gc'] });
  const delay = monitorEventLoopDelay({ resolution: RESOLUTION_MS });
  delay.enable();
  const flush = () => {
    if (pending.length === 0) return;
    // One synchronous append per interval: a few hundred bytes, and nothing is lost when
    // the process exits on SIGTERM.
    fs.writeSync(fd, pending.map((line) => JSON.stringify(line)).join('\n') + '\n');
    pending.length = 0;
  };
  const sample = () => {
    const t = round(Date.now() / 1000, 4);
    if (delay.count > 0) {
      const ms = (ns) => round(Math.max(0, ns / 1e6 - RESOLUTION_MS));
      pending.push({ t, kind: 'loop_delay', value: ms(delay.max), mean: ms(delay.mean), p99: ms(delay.percentile(99)), pid });
    }
    delay.reset();
    pending.push({ t, kind: 'heap_used', value: v8.getHeapStatistics().used_heap_size, pid });
    flush();
  };
  const timer = setInterval(sample, INTERVAL_MS);
  timer.unref();
  const stop = () => {
    clearInterval(timer);
    gcObserver.disconnect();
    delay.disable();
    flush();
  };
  process.on('exit', stop);
  return stop;
}

module.exports = { startSignals };
