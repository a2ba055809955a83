'use strict';
// A worker of the cluster (workers > 1): serves requests on the shared sockets and holds its
// own subscribers. What concerns the whole server goes to the primary (hub.js): control
// calls, publishes, /stats. Every emit cycle comes from the primary, numbered, and is
// delivered here to this worker's share of the subscribers, places counted per worker.

const push = require('./push');
const { hub } = require('./hub');
const { requestLog } = require('./requestlog');
const { counters } = require('./stats');
const { listenAll } = require('./listen');
const { Rpc } = require('./rpc');

function ownCounts() {
  const { startedAt, ...counts } = counters;
  return { pid: process.pid, counts, deliveries: push.deliveriesByName() };
}

async function runWorker(options, serverName) {
  const primary = new Rpc(process, {
    emit: ({ name, seq, created, dataJson }) => push.deliverCycle(name, seq, created, dataJson),
    logging: ({ enabled }) => {
      requestLog.enabled = enabled;
      return null;
    },
    counts: ownCounts,
  });
  Object.assign(hub, {
    control: (operation, body) => primary.call('control', { operation, body }),
    publish: (name, dataJson) => primary.call('publish', { name, dataJson }),
    stats: (name) => primary.call('stats', { serverName: name }),
    // The primary answers after everything it sent before, every cycle begun included.
    catchUp: () => primary.call('sync'),
  });
  await primary.call('hello');
  await primary.call('listening', await listenAll(options, serverName));
}

module.exports = { runWorker };
