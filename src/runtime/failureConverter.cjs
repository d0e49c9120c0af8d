/**
 * The failure converter of the service's data converter (payloadStorage.ts, `failureConverterPath`):
 * Temporal's default one with `encodeCommonAttributes`, so that a failure's message and stack trace
 * travel as an encoded payload, which the service's payload codecs encrypt like every other payload.
 * A failure in a workflow history then shows "Encoded failure" instead of its text; the service's own
 * clients (and the Web UI with a codec server) decode it. CommonJS because Temporal loads it with
 * `require` on workers and clients (and webpack bundles it into the workflow code).
 */
'use strict';
/* global require, exports */
// eslint-disable-next-line @typescript-eslint/no-require-imports
const { DefaultFailureConverter } = require('@temporalio/common');

exports.failureConverter = new DefaultFailureConverter({ encodeCommonAttributes: true });
