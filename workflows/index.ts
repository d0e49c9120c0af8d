// Workflow code only: deterministic, no Node built-ins. Activities are imported as types.
export { checkHealth } from './checkHealth.js';
export { runSync, runAction } from './runScript.js';
export { manageSync } from './manageSync.js';
export { floorRoundTrip, floorSyncSteps } from './floor.js';
export { deliverWebhook } from './deliverWebhook.js';
