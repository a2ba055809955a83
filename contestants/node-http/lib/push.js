'use strict';
// The seed 004 Event Manager and Request Manager (spec §6) on one event loop: each emitter
// is a self-rescheduling setTimeout, each subscriber (a long poll or comet stream here, an
// SSE stream in sse.js, a WebSocket in websocket.js) is held in per-event sets.

const { performance } = require('perf_hooks');
const { counters } = require('./stats');
const { sendHead, sendBody, sendError, JSON_TYPE } = require('./respond');
const { isEventName, isIntegerIn } = require('./validate');
const { DeadlineTimer, cancelTimer } = require('./timers');

const MAX_EVENTS_PER_REQUEST = 16;
const MAX_DURATION_MS = 3600000;
const MIN_INTERVAL_MS = 10;
// A stream reader this far behind gets disconnected instead of buffering without bound.
const BACKLOG_LIMIT = 1024 * 1024;
// Emit cycles kept per event for SSE replay (spec §10): exactly the newest 64.
const REPLAY_BUFFER = 64;

// Event name -> Set of subscribers in subscription order. Names nobody listens to are dropped.
const topics = new Map();
// Event name -> EventEmitterState, for every name ever set (stats list cleared ones too).
const emitters = new Map();

// One subscriber of any transport. Subclasses say how a delivery reaches the client
// (deliver) and whether it still can (alive); this one is a long poll or a comet stream.
class Subscriber {
  constructor(transport, body, res) {
    this.transport = transport;
    this.res = res;
    this.names = [...new Set(body.events)];
    this.requestJson = JSON.stringify(body);
    this.created = Date.now();
    this.start = 0; // open subscribers at registration, set by subscribe()
    this.timer = null;
    this.done = false;
  }

  // The tail every push answer shares: request echo, request timings, open subscribers.
  envelopeTail(sent) {
    return (
      `"request":${this.requestJson},` +
      `"timings":{"duration":${sent - this.created},"sent":${sent},"created":${this.created}},` +
      `"connections":{"start":${this.start},"finish":${counters.openSubscribers}}}`
    );
  }

  alive() {
    if (this.res.destroyed) return false;
    if (this.transport === 'comet' && this.res.writableLength > BACKLOG_LIMIT) {
      this.res.destroy();
      return false;
    }
    return true;
  }

  deliver(json) {
    counters.responsesPush++;
    if (this.transport === 'comet') {
      this.res.write(json + '\n');
    } else {
      sendBody(this.res, 200, JSON_TYPE, json);
      unsubscribe(this);
    }
  }

  timeOut() {
    const json = `{"response":{"timeout":true},${this.envelopeTail(Date.now())}`;
    counters.responsesTimeouts++;
    if (this.transport === 'comet') this.res.end(json + '\n');
    else sendBody(this.res, 200, JSON_TYPE, json);
    unsubscribe(this);
  }
}

function subscribe(sub) {
  counters.openSubscribers++;
  counters.open[sub.transport]++;
  sub.start = counters.openSubscribers;
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
  counters.openSubscribers--;
  counters.open[sub.transport]--;
  cancelTimer(sub.timer);
  for (const name of sub.names) {
    const subscribers = topics.get(name);
    if (!subscribers) continue;
    subscribers.delete(sub);
    if (subscribers.size === 0) topics.delete(name);
  }
}

// False when the subscriber can no longer take a delivery (gone, or a reader too slow).
function canDeliver(sub) {
  if (sub.done) return false;
  if (sub.alive()) return true;
  unsubscribe(sub);
  return false;
}

// The part of a delivery up to the request echo (spec §6), `data` for publish cycles (§11),
// `replayed` for SSE replays (§10).
function eventJson(nameJson, seq, created, sent, total, place, dataJson, replayed) {
  const extra = (dataJson === undefined ? '' : `,"data":${dataJson}`) + (replayed ? ',"replayed":true' : '');
  return (
    `{"response":{"event":{"name":${nameJson},"seq":${seq},"timings":{"duration":` +
    `${sent - created},"sent":${sent},"created":${created}},` +
    `"connections":{"total":${total},"place":${place}}${extra}}},`
  );
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
    this.history = []; // {seq, created, dataJson} of the newest cycles, for SSE replay
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

  // One emit cycle; dataJson is set for a publish cycle (spec §11). Returns [seq, total].
  emit(dataJson) {
    const created = Date.now();
    const seq = ++this.lastSeq;
    this.emits++;
    this.history.push({ seq, created, dataJson });
    if (this.history.length > REPLAY_BUFFER) this.history.shift();
    const snapshot = [...(topics.get(this.name) || [])];
    const total = snapshot.length;
    let lastSent = created;
    for (let i = 0; i < total; i++) {
      const sub = snapshot[i];
      if (!canDeliver(sub)) continue;
      lastSent = Date.now();
      const head = eventJson(this.nameJson, seq, created, lastSent, total, i + 1, dataJson);
      sub.deliver(head + sub.envelopeTail(lastSent), this.name, seq);
      this.deliveries++;
    }
    this.recordDuration(lastSent - created);
    return [seq, total];
  }

  // The buffered cycles after `seq`, as replayed deliveries to `sub` (spec §10).
  replayAfter(seq, sub) {
    return this.history
      .filter((entry) => entry.seq > seq)
      .map((entry) => {
        const sent = Date.now();
        const head = eventJson(this.nameJson, entry.seq, entry.created, sent, 1, 1, entry.dataJson, true);
        return { seq: entry.seq, json: head + sub.envelopeTail(sent) };
      });
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

function emitterState(name) {
  let state = emitters.get(name);
  if (!state) {
    state = new EventEmitterState(name);
    emitters.set(name, state);
  }
  return state;
}

// A publish cycle (spec §11): an emit cycle now, whether or not the event has an emitter.
function publish(name, data) {
  return emitterState(name).emit(JSON.stringify(data === undefined ? null : data));
}

function lastSeq(name) {
  const state = emitters.get(name);
  return state ? state.lastSeq : 0;
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
  const state = emitterState(name);
  const replaced = state.active;
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
  const sub = new Subscriber(body.type, body, res);
  subscribe(sub);
  res.once('close', () => unsubscribe(sub));
  if (sub.transport === 'comet') {
    sendHead(res, 200, { 'Content-Type': 'application/x-ndjson' });
    res.flushHeaders();
  }
  const durationMs = body.duration_ms;
  if (durationMs !== undefined && durationMs !== null) {
    sub.timer = new DeadlineTimer(() => sub.timeOut(), durationMs);
  }
  return undefined;
}

module.exports = {
  MAX_EVENTS_PER_REQUEST,
  MAX_DURATION_MS,
  BACKLOG_LIMIT,
  Subscriber,
  subscribe,
  unsubscribe,
  emitters,
  publish,
  lastSeq,
  setEvent,
  clearEvent,
  registerPush,
  eventStats,
};
