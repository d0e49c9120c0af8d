// Workflow code only: deterministic, no Node built-ins. Activities are imported as types.
export { checkHealth } from './checkHealth.js';
export { runSync, runAction } from './runScript.js';
export { manageSync } from './manageSync.js';
export { deliverWebhook } from './deliverWebhook.js';
export { applyDeployment } from './applyDeployment.js';
