import { ErrorCode } from '@modelcontextprotocol/sdk/types.js';
import { describe, expect, it } from 'vitest';
import { invalidParamsResponse } from './params.js';

describe('invalidParamsResponse', () => {
  it('answers a served method with params that do not fit as -32602, each problem named with its path', () => {
    const response = invalidParamsResponse({
      jsonrpc: '2.0',
      id: 3,
      method: 'tools/call',
      params: { name: 7, arguments: [1] },
    });
    expect(response).toMatchObject({ jsonrpc: '2.0', id: 3, error: { code: ErrorCode.InvalidParams } });
    expect(response?.error.data.errors.map((problem) => problem.path)).toEqual(['params.name', 'params.arguments']);
    expect(response?.error.message).toMatch(/^Invalid params of tools\/call: params\.name: .*; params\.arguments: /);
    expect(invalidParamsResponse({ jsonrpc: '2.0', id: 'a', method: 'tools/call' })?.error.message).toContain(
      'params: Invalid input',
    );
    expect(
      invalidParamsResponse({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: 1 } })?.error
        .code,
    ).toBe(ErrorCode.InvalidParams);
  });

  it('lists the first 100 problems and says how many there were', () => {
    const response = invalidParamsResponse({
      jsonrpc: '2.0',
      id: 4,
      method: 'initialize',
      params: {
        protocolVersion: '2025-06-18',
        capabilities: {},
        clientInfo: { name: 'a', version: '1', icons: Array.from({ length: 5_000 }, () => 1) },
      },
    });
    expect(response?.error.data.errors).toHaveLength(100);
    expect(response?.error.message).toContain('and 4900 more (5000 in all)');
    expect(response?.error.message.length).toBeLessThan(20_000);
  });

  it('leaves alone what fits, notifications, responses and methods the server does not serve', () => {
    expect(invalidParamsResponse({ jsonrpc: '2.0', id: 1, method: 'tools/list' })).toBeUndefined();
    expect(
      invalidParamsResponse({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'x', arguments: {} } }),
    ).toBeUndefined();
    expect(invalidParamsResponse({ jsonrpc: '2.0', method: 'tools/call', params: 5 })).toBeUndefined();
    expect(invalidParamsResponse({ jsonrpc: '2.0', id: 1, method: 'resources/list', params: 5 })).toBeUndefined();
    expect(invalidParamsResponse({ jsonrpc: '2.0', id: 1, result: {} })).toBeUndefined();
    expect(invalidParamsResponse(null)).toBeUndefined();
  });
});
