'use strict';
// setTimeout counts from the event loop's cached clock, taken when the current loop
// iteration began; a timer armed late in a busy iteration can fire milliseconds early in
// real time. This one checks a monotonic deadline and re-arms for whatever is left.

const { performance } = require('perf_hooks');

class DeadlineTimer {
  constructor(callback, delayMs, ...args) {
    this.callback = callback;
    this.args = args;
    this.due = performance.now() + delayMs;
    this.check = this.check.bind(this);
    this.handle = setTimeout(this.check, delayMs);
  }

  check() {
    const left = this.due - performance.now();
    if (left > 0) this.handle = setTimeout(this.check, Math.ceil(left));
    else this.callback(...this.args);
  }

  cancel() {
    clearTimeout(this.handle);
  }
}

function cancelTimer(timer) {
  if (timer) timer.cancel();
}

module.exports = { DeadlineTimer, cancelTimer };
