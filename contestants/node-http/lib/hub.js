'use strict';
// Where the operations that concern the whole server run: control calls, publish cycles,
// /stats, and catching up with the cycles already sent. They run in this process when it is
// the whole server (workers = 1); a cluster worker replaces them with calls to the primary
// (worker.js). Each returns its answer, or a Promise of it (lib/settle.js).

const events = require('./events');
const push = require('./push');
const { setLogging } = require('./requestlog');
const { snapshot } = require('./stats');

// POST /logging, /event/set, /event/clear: body -> [status, answer].
const CONTROL = { logging: setLogging, set: events.setEvent, clear: events.clearEvent };

const hub = {
  control: (operation, body) => CONTROL[operation](body),
  // -> [seq, total]
  publish: (name, dataJson) => events.publish(name, dataJson),
  stats: (serverName) => snapshot(serverName, events.eventStats(push.deliveriesByName())),
  // Resolves once every cycle begun before the call has reached this process; null when
  // this process numbers the cycles itself.
  catchUp: () => null,
};

module.exports = { hub, CONTROL };
