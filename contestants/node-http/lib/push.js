'use strict';
// The seed 004 Request Manager (spec §6) of one event loop: each subscriber (a long poll or
// comet stream here, an SSE stream in sse.js, a WebSocket in websocket.js, a gRPC Subscribe
// stream in grpc.js) is held in
// per-event sets, and each emit cycle (numbered by an emitter, events.js) is delivered to
// them here.

const { counters } = require('./stats');
const { sendHead, sendBody, sendError, writeNow, JSON_TYPE } = require('./respond');
const { isEventName, isIntegerIn } = require('./validate');
const { DeadlineTimer, cancelTimer } = require('./timers');

const MAX_EVENTS_PER_REQUEST = 16;
const MAX_DURATION_MS = 3600000;
// A stream reader this far behind gets disconnected instead of buffering without bound.
const BACKLOG_LIMIT = 1024 * 1024;
// Emit cycles kept per event for SSE replay (spec §10): exactly the newest 64.
const REPLAY_BUFFER = 64;

// Event name -> Set of subscribers in subscription order. Names nobody listens to are dropped.
const topics = new Map();

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

  // One emit cycle's delivery, `sent` taken by the caller immediately before this write:
  // the JSON of spec §6 for every transport but gRPC, which sends the cycle's fields.
  deliverCycle(cycle, place, sent) {
    const head = eventJson(cycle.nameJson, cycle.seq, cycle.created, sent, cycle.total, place, cycle.dataJson);
    this.deliver(head + this.envelopeTail(sent), cycle.name, cycle.seq);
  }

  deliver(json) {
    counters.responsesPush++;
    if (this.transport === 'comet') {
      writeNow(this.res, json + '\n');
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

// What this process knows of an event's emit cycles: the newest seq, the replay buffer and
// the deliveries it made. With workers, every worker keeps its own, since the primary sends
// every cycle to every worker: a seq means the same event on every connection.
class EventLog {
  constructor(name) {
    this.nameJson = JSON.stringify(name);
    this.lastSeq = 0;
    this.deliveries = 0;
    this.history = []; // {seq, created, dataJson} of the newest cycles, for SSE replay
  }

  record(seq, created, dataJson) {
    this.lastSeq = seq;
    this.history.push({ seq, created, dataJson });
    if (this.history.length > REPLAY_BUFFER) this.history.shift();
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
}

// Event name -> EventLog, for every name that had a cycle.
const logs = new Map();

function eventLog(name) {
  let log = logs.get(name);
  if (!log) {
    log = new EventLog(name);
    logs.set(name, log);
  }
  return log;
}

// One emit cycle delivered to the subscribers this process holds, in the order they
// subscribed; dataJson is set for a publish cycle (spec §11). Places count this process's
// snapshot (with workers: per worker).
function deliverCycle(name, seq, created, dataJson) {
  const log = eventLog(name);
  log.record(seq, created, dataJson);
  const snapshot = [...(topics.get(name) || [])];
  const total = snapshot.length;
  const cycle = { name, nameJson: log.nameJson, seq, created, total, dataJson };
  let lastSent = created;
  for (let i = 0; i < total; i++) {
    const sub = snapshot[i];
    if (!canDeliver(sub)) continue;
    lastSent = Date.now();
    sub.deliverCycle(cycle, i + 1, lastSent);
    log.deliveries++;
  }
  return { total, lastSent };
}

function lastSeq(name) {
  const log = logs.get(name);
  return log ? log.lastSeq : 0;
}

function replayAfter(name, seq, sub) {
  const log = logs.get(name);
  return log ? log.replayAfter(seq, sub) : [];
}

// name -> deliveries made by this process, for the `events` of /stats.
function deliveriesByName() {
  const out = Object.create(null);
  for (const [name, log] of logs) out[name] = log.deliveries;
  return out;
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
  deliverCycle,
  lastSeq,
  replayAfter,
  deliveriesByName,
  registerPush,
};
