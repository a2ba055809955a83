'use strict';
// Calls with replies over a cluster's IPC channel, either way: the primary calls its
// workers (emit, logging, counts) and a worker calls the primary (control, publish, stats,
// sync). The channel keeps order, so a reply also says that everything the other side sent
// before it has arrived.

class Rpc {
  // endpoint: `process` in a worker, a cluster Worker in the primary; handlers: call name ->
  // (args) -> result, or a Promise of it.
  constructor(endpoint, handlers) {
    this.endpoint = endpoint;
    this.handlers = handlers;
    this.nextId = 1;
    this.waiting = new Map();
    endpoint.on('message', (message) => this.receive(message));
  }

  call(name, args) {
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.waiting.set(id, { resolve, reject });
      this.send({ call: name, id, args });
    });
  }

  // A channel that has closed means the other side has gone; its 'exit' or 'disconnect'
  // ends this process (primary.js, and node:cluster in a worker), so the error is dropped.
  send(message) {
    this.endpoint.send(message, () => {});
  }

  receive(message) {
    if (message.call === undefined) {
      this.settle(message);
      return;
    }
    const reply = (fields) => this.send({ reply: message.id, ...fields });
    const fail = (err) => reply({ error: err.message });
    let result;
    try {
      result = this.handlers[message.call](message.args);
    } catch (err) {
      fail(err);
      return;
    }
    if (result instanceof Promise) result.then((value) => reply({ value }), fail);
    else reply({ value: result });
  }

  settle(message) {
    const waiter = this.waiting.get(message.reply);
    if (!waiter) return;
    this.waiting.delete(message.reply);
    if (message.error === undefined) waiter.resolve(message.value);
    else waiter.reject(new Error(message.error));
  }
}

module.exports = { Rpc };
