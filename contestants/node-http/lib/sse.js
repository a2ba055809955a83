'use strict';
// GET /sse (spec §10): a Server-Sent Events stream is one subscriber of its events. Its id is
// the stream's position, `name:seq` per event; a reconnect with Last-Event-ID gets what it
// missed from each event's replay buffer, or a gap message for what the buffer lost.

const { counters } = require('./stats');
const { sendHead, sendError, whenAnswered, writeNow } = require('./respond');
const { isEventName } = require('./validate');
const { DeadlineTimer } = require('./timers');
const push = require('./push');
const { hub } = require('./hub');

const DEFAULT_HEARTBEAT_MS = 15000;
// Leading zeros are allowed, as in HTTP's own numbers (spec §10).
const DECIMAL = /^[0-9]{1,9}$/;
const POSITION = /^([A-Za-z0-9_.-]{1,64}):(0|[1-9][0-9]{0,15})$/;

class SseSubscriber extends push.Subscriber {
  constructor(body, res, positions) {
    super('sse', body, res);
    this.positions = positions; // event name -> the newest seq this stream was sent
    this.heartbeat = null;
  }

  id() {
    return this.names.map((name) => `${name}:${this.positions.get(name)}`).join(',');
  }

  alive() {
    if (this.res.destroyed) return false;
    if (this.res.writableLength <= push.BACKLOG_LIMIT) return true;
    this.res.destroy();
    return false;
  }

  deliver(json, name, seq) {
    counters.sse.deliveries++;
    this.send(json, name, seq);
  }

  // One message, written at once: its id is the position after it.
  send(json, name, seq, type) {
    this.positions.set(name, seq);
    const event = type ? `event: ${type}\n` : '';
    writeNow(this.res, `${event}id: ${this.id()}\ndata: ${json}\n\n`);
  }

  timeOut() {
    const json = `{"response":{"timeout":true},${this.envelopeTail(Date.now())}`;
    counters.sse.timeouts++;
    this.res.end(`event: timeout\ndata: ${json}\n\n`);
    push.unsubscribe(this);
  }
}

// The query of spec §10 as the `request` of every delivery; a string says what is wrong.
function parseQuery(query) {
  const params = new URLSearchParams(query);
  const keys = [...params.keys()];
  if (new Set(keys).size !== keys.length) return 'a parameter is given twice';
  const names = (params.get('events') || '').split(',');
  if (!names.every(isEventName) || new Set(names).size !== names.length) {
    return 'events must be distinct event names';
  }
  if (names.length > push.MAX_EVENTS_PER_REQUEST) return 'at most 16 events';
  const body = { type: 'sse', events: names };
  for (const [key, low] of [['heartbeat_ms', 10], ['duration_ms', 1]]) {
    const text = params.get(key);
    if (text === null) continue;
    const value = DECIMAL.test(text) ? Number(text) : -1;
    const zeroHeartbeat = key === 'heartbeat_ms' && value === 0;
    if (!zeroHeartbeat && !(value >= low && value <= push.MAX_DURATION_MS)) {
      return `${key} is out of range`;
    }
    body[key] = value;
  }
  return body;
}

// Last-Event-ID as a Map of name -> seq; null if it is not of the `name:seq,...` form.
function parsePosition(header) {
  const named = new Map();
  if (!header) return named;
  for (const pair of header.split(',')) {
    const match = POSITION.exec(pair);
    if (!match || named.has(match[1]) || !Number.isSafeInteger(Number(match[2]))) return null;
    named.set(match[1], Number(match[2]));
  }
  return named;
}

// Sends what the stream missed of `name` after seq `after`: a gap message if the buffer no
// longer reaches back that far (or `after` is from another run of the server), then replays.
function resume(sub, name, after) {
  const newest = push.lastSeq(name);
  if (after === newest) return;
  const replays = push.replayAfter(name, after, sub);
  const next = replays.length ? replays[0].seq : newest + 1;
  if (next > after + 1 || after > newest) {
    counters.sse.gaps++;
    const gap = JSON.stringify({ gap: { name, after, next } });
    sub.send(gap, name, next - 1, 'gap');
  }
  for (const replay of replays) {
    counters.sse.replayed++;
    sub.send(replay.json, name, replay.seq);
  }
}

function handleSse(req, res, url) {
  const body = parseQuery(url.query);
  if (typeof body === 'string') return sendError(res, 400, body);
  const named = parsePosition(req.headers['last-event-id']);
  if (named === null) return sendError(res, 400, 'malformed last-event-id');
  // An id ahead of this process's newest seq is from an earlier run of the server, or (in a
  // cluster worker) names a cycle still on its way here: wait for that before judging.
  const ahead = body.events.some((name) => named.has(name) && named.get(name) > push.lastSeq(name));
  whenAnswered(res, ahead ? hub.catchUp() : null, () => {
    if (!res.destroyed) openStream(res, body, named);
  });
  return undefined;
}

// Registering and replaying are one step: no cycle comes in between.
function openStream(res, body, named) {
  const positions = new Map(body.events.map((name) => [name, named.get(name) ?? push.lastSeq(name)]));
  const sub = new SseSubscriber(body, res, positions);
  sendHead(res, 200, { 'Content-Type': 'text/event-stream', 'Cache-Control': 'no-cache' });
  counters.sse.total++;
  push.subscribe(sub);
  res.once('close', () => {
    clearInterval(sub.heartbeat);
    push.unsubscribe(sub);
  });
  for (const name of sub.names) if (named.has(name)) resume(sub, name, named.get(name));
  res.write(`id: ${sub.id()}\n\n`); // the opening message: the position, no data
  const heartbeatMs = body.heartbeat_ms ?? DEFAULT_HEARTBEAT_MS;
  if (heartbeatMs > 0) {
    sub.heartbeat = setInterval(() => {
      counters.sse.heartbeats++;
      res.write(': heartbeat\n\n');
    }, heartbeatMs);
  }
  if (body.duration_ms !== undefined) {
    sub.timer = new DeadlineTimer(() => {
      clearInterval(sub.heartbeat);
      sub.timeOut();
    }, body.duration_ms);
  }
  return undefined;
}

module.exports = { handleSse, parseQuery, parsePosition };
