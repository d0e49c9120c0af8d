// Workflow code only: deterministic, no Node built-ins. Activities are imported as types.
export { checkHealth } from './checkHealth.js';
