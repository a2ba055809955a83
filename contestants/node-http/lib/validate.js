'use strict';
// Field checks shared by the control and push endpoints (spec §5, §6).

const EVENT_NAME = /^[A-Za-z0-9_.-]{1,64}$/;

function isEventName(value) {
  return typeof value === 'string' && EVENT_NAME.test(value);
}

function isIntegerIn(value, min, max) {
  return Number.isInteger(value) && value >= min && value <= max;
}

module.exports = { isEventName, isIntegerIn };
