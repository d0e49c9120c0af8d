import { outboundPolicy } from '../../src/runtime/outbound.js';

/**
 * Opens one fake server's address (`127.0.0.1:<port>`) in this process's outbound request policy, and
 * nothing else: loopback stays refused, so a test that reaches another local port still fails.
 */
export function allowOutbound(url: string): void {
  outboundPolicy().allow(new URL(url).host);
}
