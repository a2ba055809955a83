'use strict';
// The primary of a cluster (workers > 1). It forks the workers, which share the listening
// sockets (node:cluster's round-robin hands each accepted connection to the next worker),
// and holds what the server has one of: the emitters, which number every emit cycle and send
// it to every worker, so that a seq means the same event on every connection; the request
// log switch, set in every worker before a POST /logging is answered; and the /stats totals,
// gathered from every worker. It serves no request itself.
//
// A worker that exits ends the server: a crash is a result to record, not to hide behind a
// new worker with fresh counters.

const cluster = require('cluster');
const events = require('./events');
const { CONTROL } = require('./hub');
const { setLogging } = require('./requestlog');
const { snapshot, addCounts } = require('./stats');
const { listeningLine } = require('./listen');
const { Rpc } = require('./rpc');

function runPrimary(options, serverName) {
  const startedAt = Date.now();
  const links = []; // an Rpc per worker
  const broadcast = (name, args) => Promise.all(links.map((link) => link.call(name, args)));

  // A cycle is over when every worker has handed its share of the snapshot over.
  events.deliverWith((name, seq, created, dataJson) =>
    broadcast('emit', { name, seq, created, dataJson }).then((shares) => ({
      total: shares.reduce((sum, share) => sum + share.total, 0),
      lastSent: Math.max(created, ...shares.map((share) => share.lastSent)),
    })),
  );

  const control = {
    ...CONTROL,
    logging: async (body) => {
      const answer = setLogging(body);
      if (answer[0] === 200) await broadcast('logging', answer[1]);
      return answer;
    },
  };

  async function stats({ serverName: name }) {
    const parts = await broadcast('counts');
    const sum = parts.reduce((total, part) => addCounts(total, part.counts), Object.create(null));
    const deliveries = parts.reduce((total, part) => addCounts(total, part.deliveries), Object.create(null));
    return {
      ...snapshot(name, events.eventStats(deliveries), sum, startedAt),
      workers: {
        count: parts.length,
        places: 'per_worker',
        each: parts.map(({ pid, counts }) => ({
          pid,
          connections: { open: counts.connectionsOpen, total: counts.connectionsTotal },
          requests: { total: counts.requestsTotal },
          subscribers: counts.openSubscribers,
        })),
      },
    };
  }

  // No worker listens before every worker can take emit cycles, so none misses one.
  const startup = barrier(options.workers);
  const listening = barrier(options.workers);
  listening.done.then((ports) => process.stderr.write(listeningLine(serverName, options, ports[0])));

  const handlers = {
    hello: () => startup.arrive(),
    listening: (ports) => listening.arrive(ports),
    control: ({ operation, body }) => control[operation](body),
    publish: ({ name, dataJson }) => events.publish(name, dataJson),
    stats,
    sync: () => null,
  };
  stopWithWorkers();
  for (let i = 0; i < options.workers; i++) links.push(new Rpc(cluster.fork(), handlers));
}

// Resolves `done` (and every arrive()) with what each of `count` arrivals brought.
function barrier(count) {
  const arrived = [];
  let open;
  const done = new Promise((resolve) => {
    open = resolve;
  });
  return {
    done,
    arrive(value) {
      arrived.push(value);
      if (arrived.length === count) open(arrived);
      return done.then(() => null);
    },
  };
}

function stopWithWorkers() {
  let stopping = false;
  cluster.on('exit', (worker, code, signal) => {
    if (stopping) return;
    stopping = true;
    const orderly = code === 0 && !signal;
    if (!orderly) {
      const how = signal ? `signal ${signal}` : `exit code ${code}`;
      process.stderr.write(`node-http: worker ${worker.process.pid} ended (${how}); stopping\n`);
    }
    process.exit(orderly ? 0 : 1);
  });
  // Workers end with the primary, however it ends.
  process.on('exit', () => {
    for (const worker of Object.values(cluster.workers)) worker.process.kill('SIGTERM');
  });
}

module.exports = { runPrimary };
