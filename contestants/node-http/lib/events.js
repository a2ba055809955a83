'use strict';
// The seed 004 Event Manager (spec §6): one emitter per event name, a self-rescheduling
// timer that numbers each emit cycle (seq) and has it delivered. It lives where the whole
// server is one: in the one process (workers = 1), or in the cluster's primary, whose
// cycles reach every worker (primary.js). POST /event/set and /event/clear, and publish
// cycles (§11), end here.

const { performance } = require('perf_hooks');
const { isEventName, isIntegerIn } = require('./validate');
const { DeadlineTimer, cancelTimer } = require('./timers');
const { isPromise, settle } = require('./settle');
const push = require('./push');

const MIN_INTERVAL_MS = 10;

// Delivers one cycle, (name, seq, created, dataJson) -> {total, lastSent}, or a Promise of it.
let runCycle = push.deliverCycle;

function deliverWith(cycleRunner) {
  runCycle = cycleRunner;
}

class Emitter {
  constructor(name) {
    this.name = name;
    this.intervalMs = 0;
    this.active = false;
    this.timer = null;
    this.nextDue = 0;
    this.emits = 0;
    this.lastSeq = 0;
    this.lastEmitDuration = 0;
    this.maxEmitDuration = 0;
    this.totalEmitDuration = 0;
    // A cycle delivered asynchronously (by workers) that has not ended; later ones wait.
    this.pending = null;
    // Changes on every start and stop, so that a cycle ending late schedules no stale timer.
    this.generation = 0;
    this.tick = this.tick.bind(this);
  }

  start(intervalMs) {
    this.stop();
    this.intervalMs = intervalMs;
    this.active = true;
    this.nextDue = performance.now() + intervalMs;
    this.timer = new DeadlineTimer(this.tick, intervalMs);
  }

  stop() {
    cancelTimer(this.timer);
    this.timer = null;
    this.active = false;
    this.generation++;
  }

  // Cycles never overlap: the next one is due one interval after this one was, or when
  // this one ends if delivering its snapshot took longer than that.
  tick() {
    const generation = this.generation;
    settle(this.emit(), () => {
      if (generation !== this.generation) return;
      const now = performance.now();
      this.nextDue = Math.max(this.nextDue + this.intervalMs, now);
      this.timer = new DeadlineTimer(this.tick, this.nextDue - now);
    });
  }

  // One emit cycle, after the one running now; dataJson is set for a publish cycle (spec
  // §11). Returns [seq, total], or a Promise of it when workers deliver.
  emit(dataJson) {
    if (this.pending) return this.track(this.pending.then(() => this.cycle(dataJson)));
    const result = this.cycle(dataJson);
    return isPromise(result) ? this.track(result) : result;
  }

  track(cycle) {
    this.pending = cycle;
    cycle.then(() => {
      if (this.pending === cycle) this.pending = null;
    });
    return cycle;
  }

  cycle(dataJson) {
    const created = Date.now();
    const seq = ++this.lastSeq;
    this.emits++;
    return settle(runCycle(this.name, seq, created, dataJson), ({ total, lastSent }) => {
      this.recordDuration(lastSent - created);
      return [seq, total];
    });
  }

  recordDuration(duration) {
    this.lastEmitDuration = duration;
    this.totalEmitDuration += duration;
    if (duration > this.maxEmitDuration) this.maxEmitDuration = duration;
  }

  stats(deliveries) {
    return {
      interval_ms: this.intervalMs,
      active: this.active,
      emits: this.emits,
      last_seq: this.lastSeq,
      deliveries,
      last_emit_duration_ms: this.lastEmitDuration,
      max_emit_duration_ms: this.maxEmitDuration,
      total_emit_duration_ms: this.totalEmitDuration,
    };
  }
}

// Event name -> Emitter, for every name ever set or published to (stats list them all).
const emitters = new Map();

function emitter(name) {
  let state = emitters.get(name);
  if (!state) {
    state = new Emitter(name);
    emitters.set(name, state);
  }
  return state;
}

// A publish cycle (spec §11): an emit cycle now, whether or not the event has an emitter.
function publish(name, dataJson) {
  return emitter(name).emit(dataJson);
}

// The `events` of /stats; deliveries is name -> deliveries, counted where they are made.
function eventStats(deliveries) {
  const out = Object.create(null);
  for (const [name, state] of emitters) out[name] = state.stats(deliveries[name] || 0);
  return out;
}

// POST /event/set: [status, answer].
function setEvent(body) {
  const { name, interval_ms: intervalMs } = body;
  if (!isEventName(name)) return [400, { error: 'invalid event name' }];
  if (!isIntegerIn(intervalMs, MIN_INTERVAL_MS, push.MAX_DURATION_MS)) {
    return [400, { error: 'interval_ms must be an integer from 10 to 3600000' }];
  }
  const state = emitter(name);
  const replaced = state.active;
  state.start(intervalMs);
  return [200, { name, interval_ms: intervalMs, replaced }];
}

function clearAll() {
  const cleared = [];
  for (const [name, state] of emitters) {
    if (!state.active) continue;
    state.stop();
    cleared.push(name);
  }
  cleared.sort();
  return [200, { cleared }];
}

// POST /event/clear: [status, answer]; body is an object, or null for an empty body.
function clearEvent(body) {
  const name = body === null ? null : body.name;
  if (name === undefined || name === null) return clearAll();
  if (!isEventName(name)) return [400, { error: 'invalid event name' }];
  const state = emitters.get(name);
  if (!state || !state.active) return [404, { error: 'unknown event' }];
  state.stop();
  return [200, { cleared: [name] }];
}

module.exports = { deliverWith, publish, eventStats, setEvent, clearEvent };
