'use strict';
// One process answers server-wide operations at once; a cluster worker gets a Promise from
// the primary. Code that serves both takes the value either way, so that the one-process
// server (workers = 1) never waits a tick it did not wait before.

function isPromise(value) {
  return value !== null && typeof value === 'object' && typeof value.then === 'function';
}

// onValue(value) now if `result` is a value, else once the Promise fulfils; returns what
// onValue returns (or a Promise of it).
function settle(result, onValue) {
  return isPromise(result) ? result.then(onValue) : onValue(result);
}

module.exports = { isPromise, settle };
