'use strict';
// The seed 004 Event Manager and Request Manager (spec §6) on one event loop: each emitter
// is a self-rescheduling setTimeout, each push request a subscriber held in per-event sets.

const { performance } = require('perf_hooks');
const { counters } = require('./stats');
const { sendHead, sendBody, sendError, JSON_TYPE } = require('./respond');
const { isEventName, isIntegerIn } = require('./validate');
const { DeadlineTimer, cancelTimer } = require('./timers');

const MAX_EVENTS_PER_REQUEST = 16;
const MAX_DURATION_MS = 3600000;
const MIN_INTERVAL_MS = 10;
// A comet reader this far behind gets disconnected instead of buffering without bound.
const COMET_BACKLOG_LIMIT = 1024 * 1024;

// Event name -> Set of subscribers in subscription order. Names nobody listens to are dropped.
const topics = new Map();
// Event name -> EventEmitterState, for every name ever set (stats list cleared ones too).
const emitters = new Map();

class Subscriber {
  constructor(res, body) {
    this.res = res;
    this.comet = body.type === 'comet';
    this.names = [...new Set(body.events)];
    this.requestJson = JSON.stringify(body);
    this.created = Date.now();
    this.start = 0; // open push requests at registration, set by subscribe()
    this.timer = null;
    this.done = false;
  }

  // The tail every push answer shares: request echo, request timings, open-push counts.
  envelopeTail(sent) {
    return (
      `"request":${this.requestJson},` +
      `"timings":{"duration":${sent - this.created},"sent":${sent},"created":${this.created}},` +
      `"connections":{"start":${this.start},"finish":${counters.openPush}}}`
    );
  }
}

function subscribe(sub) {
  counters.openPush++;
  sub.start = counters.openPush;
  for (const name of sub.names) {
    let subscribers = topics.get(name);
    if (!subscribers) {
      subscribers = new Set();
      topics.set(name, subscribers);
    }
    subscribers.add(sub);
  }
}

// Idempotent: runs on answer, on timeout and on the client going away.
function unsubscribe(sub) {
  if (sub.done) return;
  sub.done = true;
  counters.openPush--;
  cancelTimer(sub.timer);
  for (const name of sub.names) {
    const subscribers = topics.get(name);
    if (!subscribers) continue;
    subscribers.delete(sub);
    if (subscribers.size === 0) topics.delete(name);
  }
}

function answer(sub, json) {
  if (sub.comet) {
    sub.res.write(json + '\n');
  } else {
    sendBody(sub.res, 200, JSON_TYPE, json);
    unsubscribe(sub);
  }
}

function sendTimeout(sub) {
  const json = `{"response":{"timeout":true},${sub.envelopeTail(Date.now())}`;
  counters.responsesTimeouts++;
  if (sub.comet) {
    sub.res.end(json + '\n');
    unsubscribe(sub);
  } else {
    answer(sub, json);
  }
}

// False when the subscriber can no longer take a delivery (gone, or a comet reader too slow).
function canDeliver(sub) {
  if (sub.done) return false;
  const res = sub.res;
  if (res.destroyed) {
    unsubscribe(sub);
    return false;
  }
  if (sub.comet && res.writableLength > COMET_BACKLOG_LIMIT) {
    res.destroy();
    unsubscribe(sub);
    return false;
  }
  return true;
}

class EventEmitterState {
  constructor(name) {
    this.name = name;
    this.nameJson = JSON.stringify(name);
    this.intervalMs = 0;
    this.active = false;
    this.timer = null;
    this.nextDue = 0;
    this.emits = 0;
    this.lastSeq = 0;
    this.deliveries = 0;
    this.lastEmitDuration = 0;
    this.maxEmitDuration = 0;
    this.totalEmitDuration = 0;
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
  }

  // Cycles never overlap: the next one is due one interval after this one was, or now if
  // delivering this snapshot took longer than that.
  tick() {
    this.emit();
    const now = performance.now();
    this.nextDue = Math.max(this.nextDue + this.intervalMs, now);
    this.timer = new DeadlineTimer(this.tick, this.nextDue - now);
  }

  emit() {
    const created = Date.now();
    const seq = ++this.lastSeq;
    this.emits++;
    const snapshot = [...(topics.get(this.name) || [])];
    const head = `{"response":{"event":{"name":${this.nameJson},"seq":${seq},"timings":{"duration":`;
    const total = snapshot.length;
    let lastSent = created;
    for (let i = 0; i < total; i++) {
      const sub = snapshot[i];
      if (!canDeliver(sub)) continue;
      lastSent = Date.now();
      const json =
        `${head}${lastSent - created},"sent":${lastSent},"created":${created}},` +
        `"connections":{"total":${total},"place":${i + 1}}}},${sub.envelopeTail(lastSent)}`;
      answer(sub, json);
      this.deliveries++;
      counters.responsesPush++;
    }
    this.recordDuration(lastSent - created);
  }

  recordDuration(duration) {
    this.lastEmitDuration = duration;
    this.totalEmitDuration += duration;
    if (duration > this.maxEmitDuration) this.maxEmitDuration = duration;
  }

  stats() {
    return {
      interval_ms: this.intervalMs,
      active: this.active,
      emits: this.emits,
      last_seq: this.lastSeq,
      deliveries: this.deliveries,
      last_emit_duration_ms: this.lastEmitDuration,
      max_emit_duration_ms: this.maxEmitDuration,
      total_emit_duration_ms: this.totalEmitDuration,
    };
  }
}

function eventStats() {
  const out = {};
  for (const [name, state] of emitters) out[name] = state.stats();
  return out;
}

function setEvent(res, body) {
  const { name, interval_ms: intervalMs } = body;
  if (!isEventName(name)) return sendError(res, 400, 'invalid event name');
  if (!isIntegerIn(intervalMs, MIN_INTERVAL_MS, MAX_DURATION_MS)) {
    return sendError(res, 400, 'interval_ms must be an integer from 10 to 3600000');
  }
  let state = emitters.get(name);
  const replaced = Boolean(state && state.active);
  if (!state) {
    state = new EventEmitterState(name);
    emitters.set(name, state);
  }
  state.start(intervalMs);
  return sendBody(res, 200, JSON_TYPE, JSON.stringify({ name, interval_ms: intervalMs, replaced }));
}

function clearAll(res) {
  const cleared = [];
  for (const [name, state] of emitters) {
    if (!state.active) continue;
    state.stop();
    cleared.push(name);
  }
  cleared.sort();
  sendBody(res, 200, JSON_TYPE, JSON.stringify({ cleared }));
}

// body is an object, or null for an empty request body.
function clearEvent(res, body) {
  const name = body === null ? null : body.name;
  if (name === undefined || name === null) return clearAll(res);
  if (!isEventName(name)) return sendError(res, 400, 'invalid event name');
  const state = emitters.get(name);
  if (!state || !state.active) return sendError(res, 404, 'unknown event');
  state.stop();
  return sendBody(res, 200, JSON_TYPE, JSON.stringify({ cleared: [name] }));
}

function pushRequestError(body) {
  const { type, events, duration_ms: durationMs } = body;
  if (type !== 'longpoll' && type !== 'comet') return 'type must be "longpoll" or "comet"';
  if (!Array.isArray(events) || events.length > MAX_EVENTS_PER_REQUEST) {
    return 'events must be a list of at most 16 event names';
  }
  if (!events.every(isEventName)) return 'invalid event name';
  const durationOptional = type === 'comet' && (durationMs === undefined || durationMs === null);
  if (!durationOptional && !isIntegerIn(durationMs, 1, MAX_DURATION_MS)) {
    return 'duration_ms must be an integer from 1 to 3600000';
  }
  return null;
}

function registerPush(res, body) {
  const problem = pushRequestError(body);
  if (problem) return sendError(res, 400, problem);
  const sub = new Subscriber(res, body);
  subscribe(sub);
  res.once('close', () => unsubscribe(sub));
  if (sub.comet) {
    sendHead(res, 200, { 'Content-Type': 'application/x-ndjson' });
    res.flushHeaders();
  }
  const durationMs = body.duration_ms;
  if (durationMs !== undefined && durationMs !== null) {
    sub.timer = new DeadlineTimer(sendTimeout, durationMs, sub);
  }
  return undefined;
}

module.exports = { setEvent, clearEvent, registerPush, eventStats };
