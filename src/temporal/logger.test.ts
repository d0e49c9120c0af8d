import { describe, expect, it } from 'vitest';
import { FAILURE_TYPE_ATTRIBUTE } from '../../workflows/failureLog.js';
import { createLogger, type LogLevelName } from '../log.js';
import { createServiceLogger, WITHHELD } from './logger.js';

/** The Temporal SDK's logger of the service over a pino logger whose lines are kept. */
function capture(level: LogLevelName = 'info') {
  const lines: string[] = [];
  const target = createLogger({ level, destination: { write: (line: string) => void lines.push(line) } });
  return {
    logger: createServiceLogger(target),
    lines,
    entries: () => lines.map((line) => JSON.parse(line) as Record<string, unknown>),
  };
}

const TOKEN = 'tok_read-by-a-script_42';

describe('the Temporal runtime logger', () => {
  it("writes the SDK's lines to the service log, its attributes as fields", () => {
    const { logger, entries } = capture();
    logger.info('Worker state changed', { sdkComponent: 'worker', taskQueue: 'q', state: 'RUNNING' });
    expect(entries()).toEqual([
      expect.objectContaining({
        level: 'info',
        message: 'Worker state changed',
        component: 'temporal',
        sdkComponent: 'worker',
        taskQueue: 'q',
        state: 'RUNNING',
      }),
    ]);
  });

  it("writes the watchdogs' worker's 'no workflows' warning as a debug line, and the same of any other worker as a warning", () => {
    const notice = 'No workflows registered, not polling for workflow tasks';
    const { logger, entries } = capture('debug');
    logger.warn(notice, { sdkComponent: 'worker', taskQueue: 'service-watch' });
    logger.warn(notice, { sdkComponent: 'worker', taskQueue: 'service' });
    expect(entries().map((entry) => [entry['level'], entry['taskQueue']])).toEqual([
      ['debug', 'service-watch'],
      ['warn', 'service'],
    ]);
  });

  it('logs an expected run failure as one INFO line without the error', () => {
    const { logger, lines, entries } = capture();
    logger.warn('Workflow failed', {
      workflowType: 'runAction',
      workflowId: 'action:x:1',
      [FAILURE_TYPE_ATTRIBUTE]: 'action_script_failure',
      error: new Error(`issue is locked ${TOKEN}`),
    });
    expect(entries()).toEqual([
      expect.objectContaining({
        level: 'info',
        message: `Workflow failed as expected: action_script_failure: runAction action:x:1 (${WITHHELD})`,
        workflowId: 'action:x:1',
      }),
    ]);
    expect(entries()[0]).not.toHaveProperty('error');
    expect(lines.join('')).not.toContain(TOKEN);
  });

  it("withholds the message, stack and odd failure type of a script run's error", () => {
    const { logger, lines, entries } = capture();
    const thrown = new Error(`the token is ${TOKEN}`);
    logger.warn('Workflow failed', { workflowType: 'runSync', [FAILURE_TYPE_ATTRIBUTE]: TOKEN, error: thrown });
    logger.warn('Activity failed', { workflowType: 'runAction', error: { name: TOKEN, code: 'script_error' } });
    // A sync entity runs its sync's script in its own execution.
    logger.warn('Workflow failed', { workflowType: 'manageSync', error: new TypeError(`the token is ${TOKEN}`) });
    expect(entries().map((entry) => [entry['level'], entry['error'], entry[FAILURE_TYPE_ATTRIBUTE]])).toEqual([
      ['warn', `Error: ${WITHHELD}`, '(withheld)'],
      ['warn', `error script_error: ${WITHHELD}`, undefined],
      ['warn', `TypeError: ${WITHHELD}`, undefined],
    ]);
    expect(lines.join('')).not.toContain(TOKEN);
  });

  it('keeps the error of a run that is not a script run, and what is below the level is not written', () => {
    const { logger, entries } = capture('warn');
    logger.info('Workflow started', { workflowType: 'deliverWebhook' });
    logger.warn('Workflow failed', { workflowType: 'deliverWebhook', error: new TypeError('bad state') });
    expect(entries()).toHaveLength(1);
    expect(entries()[0]?.['error']).toMatchObject({ type: 'TypeError', message: 'bad state' });
  });
});
