/**
 * The globals of Node that scripts of the field's format use without importing them: `service compile`
 * injects these (esbuild `inject`) into the scripts that name them, and into no other.
 */
export { Buffer } from './buffer.js';
export { crypto } from './crypto.js';
